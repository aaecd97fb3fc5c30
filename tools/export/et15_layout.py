#!/usr/bin/env python3
"""Writes small programs in ExecuTorch 1.5's CUDA layout (per-FQN weights) without a GPU.

The files come from ExecuTorch 1.5.1's own Python exporter: torch.export, the CUDA partitioner,
CudaBackend.preprocess_multimethod, the CUDA weight collector (ETCUDAFQN3 metadata, one
`cuda_fqn_weight:<cpu|cuda>:<fqn>` entry per storage in aoti_cuda_blob.ptd, shared by every method)
and ExecuTorch's serializers. Only what needs a GPU is replaced, at the points where it happens:

  * CudaBackend.move_program_to_device / release_moved_tensors: the program stays on the CPU;
  * the device type the collector records for each weight is CUDA (1), which is what the real
    flow records after moving every constant to the GPU (`_aoti_device_type_for_weight`);
  * torch._inductor.aot_compile: instead of compiling, returns what AOTInductor returns with
    `package_constants_on_disk_format="pickle_weights"`: the path of a `.wrapper.so` (here a tiny
    ELF shared object with no code, built with the C compiler) and a `Weights` object mapping
    each constant's original name to (tensor, TensorProperties). Tensor constants are named
    `_tensor_constant<N>`, as Inductor's tracing names them.

So the named-data keys, the metadata bytes, the storages and the container files are the real
ones; the `.so` is not a model library. `layout.json` records, per delegate, what the collector
encoded (taken from ExecuTorch's `encode_cuda_weight_metadata` as it runs), for the reader tests.

Needs: executorch==1.5.1 and the torch it was built with (2.14.0; a CPU machine is enough), and cc.

    python3 tools/export/et15_layout.py --out tests/data/et15
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Tuple


def _tiny_so(path: str, tag: str) -> None:
    """A minimal ELF shared object (no code): the stand-in for AOTInductor's .wrapper.so. `tag`
    makes each one different, as each compiled partition is (its key is its SHA-256)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "stub.c")
        with open(src, "w") as f:
            f.write('const char aoti_stub_tag[] = "%s";\n' % tag)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-shared", "-nostdlib", "-s", "-Wl,--build-id=none", "-Wl,-z,noseparate-code",
                        "-Wl,--hash-style=gnu", "-o", path, src], check=True)


def _models():
    import torch
    from torch import nn

    class Core(nn.Module):
        """Parameters shared by both methods, a transposed view, a view with a storage offset,
        a bfloat16 parameter, a buffer one method mutates, and a tensor constant."""

        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 3)
            with torch.no_grad():
                self.lin.weight.copy_(torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8)
                self.lin.bias.copy_(torch.tensor([0.5, -1.0, 2.0]))
            self.scale = nn.Parameter(torch.tensor([1.0, 2.0, 0.5], dtype=torch.bfloat16))
            self.register_buffer("table", (torch.arange(12, dtype=torch.float32) - 6).reshape(3, 4).t())
            self.register_buffer("tail", torch.arange(8, dtype=torch.float32)[2:])
            self.register_buffer("cache", torch.zeros(2, 3))

        def base(self, x):
            y = self.lin(x) + x @ self.table + self.tail[:3]
            return y * self.scale.to(torch.float32)

    class Forward(nn.Module):
        def __init__(self, core):
            super().__init__()
            self.m = core

        def forward(self, x):
            return self.m.base(x) + torch.tensor([1.0, 0.0, -1.0])

    class Step(nn.Module):
        def __init__(self, core):
            super().__init__()
            self.m = core

        def forward(self, x):
            self.m.cache.add_(self.m.base(x))
            return self.m.cache.clone()

    class Single(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([[1.0, -2.0], [0.25, 4.0]]))

        def forward(self, x):
            return x @ self.w

    core = Core()
    x = (torch.arange(8, dtype=torch.float32).reshape(2, 4) / 4,)
    return {
        # two methods of one module: one weight store shared by both
        "shared": ({"forward": Forward(core), "step": Step(core)}, {"forward": x, "step": x}),
        # the smallest case: one method, one parameter
        "single": ({"forward": Single()}, {"forward": (torch.ones(3, 2),)}),
    }


def _install_stubs(records: List[Dict[str, Any]]) -> None:
    import torch
    from executorch.backends.cuda import cuda_backend, cuda_weight_collector
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from torch.export.pt2_archive._package_weights import TensorProperties, Weights

    def aot_compile(gm, args, options=None):
        # What AOTInductor returns with package_constants_on_disk_format="pickle_weights".
        assert options and options.get("aot_inductor.package_constants_on_disk_format") == "pickle_weights"
        params = {n for n, _ in gm.named_parameters()} | {n for n, _ in gm.named_buffers()}
        weights: Dict[str, Tuple[Any, Any]] = {}
        n_const = 0
        for node in gm.graph.nodes:
            if node.op != "get_attr":
                continue
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            if not isinstance(value, torch.Tensor):
                continue
            name = node.target
            if name not in params:  # a lifted tensor constant: Inductor's tracing names it so
                name = "_tensor_constant%d" % n_const
                n_const += 1
            weights[name] = (value, TensorProperties(value))
        out = tempfile.mkdtemp(prefix="et15_stub_")
        so_path = os.path.join(out, "model.wrapper.so")
        _tiny_so(so_path, "partition %d: %s" % (len(records), ", ".join(sorted(weights))))
        return [so_path, Weights(weights)]

    torch._inductor.aot_compile = aot_compile
    CudaBackend.move_program_to_device = classmethod(lambda cls, ep, device, specs: ep)
    CudaBackend.release_moved_tensors = classmethod(lambda cls, ep, specs: None)
    cuda_backend._aoti_device_type_for_weight = lambda t: cuda_weight_collector.AOTI_DEVICE_TYPE_CUDA

    encode = cuda_weight_collector.encode_cuda_weight_metadata

    def recording_encode(so_blob_key, entries):
        data = encode(so_blob_key, entries)
        records.append({
            "so_key": so_blob_key,
            "metadata_size": len(data),
            "entries": [{
                "fqn": e.fqn, "storage_key": e.storage_key, "storage_nbytes": e.storage_nbytes,
                "dtype": e.dtype, "device_type": e.device_type, "storage_offset": e.storage_offset,
                "sizes": list(e.sizes), "strides": list(e.strides),
            } for e in entries],
        })
        return data

    cuda_weight_collector.encode_cuda_weight_metadata = recording_encode


def export_one(name: str, modules, inputs, out_dir: str, records: List[Dict[str, Any]]) -> Dict[str, Any]:
    import torch
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    programs = {m: torch.export.export(mod, inputs[m], strict=False) for m, mod in modules.items()}
    partitioner = {m: [CudaPartitioner([CudaBackend.generate_method_name_compile_spec(m)])] for m in programs}
    first = len(records)
    edge = to_edge_transform_and_lower(programs, partitioner=partitioner,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True))
    prog = edge.to_executorch()
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model.pte"), "wb") as f:
        prog.write_to_file(f)
    prog.write_tensor_data_to_file(out_dir)
    return {"methods": sorted(programs), "delegates": records[first:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory; each program goes to OUT/<name>/")
    args = ap.parse_args()
    import torch
    from executorch import version as et_version

    records: List[Dict[str, Any]] = []
    _install_stubs(records)
    for name, (modules, inputs) in _models().items():
        out_dir = os.path.join(args.out, name)
        info = export_one(name, modules, inputs, out_dir, records)
        info["generator"] = {"executorch": et_version.__version__, "torch": torch.__version__,
                             "script": "tools/export/et15_layout.py"}
        with open(os.path.join(out_dir, "layout.json"), "w") as f:
            json.dump(info, f, indent=1, sort_keys=True)
            f.write("\n")
        sizes = {fn: os.path.getsize(os.path.join(out_dir, fn)) for fn in sorted(os.listdir(out_dir))}
        print(name, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
