#!/usr/bin/env python3
"""PyTorch peers of the LLM benchmark, on the model of tools/export/llm/model.py.

One peer per process (a fresh CUDA context and allocator each):

    llm_peers.py weights      --config C [--layers N] --weights FILE          # write the weights file
    llm_peers.py eager        --config C --weights FILE [measure options] --json OUT
    llm_peers.py eager_graph  ... (eager prefill; decode captured once as a CUDA graph, replayed)
    llm_peers.py compile      ... (torch.compile mode="max-autotune": decode with CUDA graphs,
                                   prefill dynamic=True without graphs, as gpt-fast does)
    llm_peers.py bandwidth    (host -> device copy rate, pinned and pageable, 1 GiB)
    llm_peers.py aoti_package --config C --out-dir DIR [--settings default|et]
                                  (torch._inductor.aoti_compile_and_package of prefill and decode
                                   into DIR/prefill.pt2, DIR/decode.pt2 for bench/peers/aoti_runner)

Measure options: --prompt-lens 128,512 --new-tokens 256 --reps 5 [--quant int4]

What is measured (the same protocol as examples/generate and aoti_runner):
  load_ms        file -> ready: torch.load(mmap) of the weights file + load_state_dict into a model
                 allocated on the GPU + synchronize (for compile: the compilation is reported apart,
                 as compile_s, since it happens at the first calls)
  gpu_mem_mib    device memory in use (cudaMemGetInfo) after the run minus before loading
  pN_ttft_ms     prefill of the N-token prompt -> next token on the device, synchronized; median
                 of --reps runs after one untimed (pN_ttft_first_ms is that first one)
  pN_decode_tok_s  --new-tokens greedy decode steps after that prompt, one synchronize at the end
  pN_tokens      the first 32 generated ids (prefill's + decode's), to compare contenders

The weights come from the file written by `weights` (generated from the config seed on this GPU),
so every peer runs the same numbers. Prompt ids: (7919 * i + 13) mod vocab.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "export", "llm"))


def sync():
    import torch

    torch.cuda.synchronize()


def used_mib() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**20


def config_from(args):
    from model import get_config

    return get_config(args.config, n_layers=args.layers, max_prefill=args.max_prefill)


def warm_framework():
    """Build and load a tiny model once, untimed: PyTorch's first CUDA calls in a process load
    kernel images and initialize libraries (seconds under some sandboxes), which is the
    framework's start-up, not the model's load. Returns how long it took (reported apart)."""
    import torch

    from model import build_model, get_config

    t0 = time.perf_counter()
    tiny = build_model(get_config("tiny"), device="cuda")
    tiny.load_state_dict({k: v.cpu() for k, v in tiny.state_dict().items()})
    with torch.no_grad():
        tiny.decode(tiny.prefill(torch.zeros(1, 4, dtype=torch.int64, device="cuda"))[1],
                    torch.tensor([4], device="cuda"))
    sync()
    return (time.perf_counter() - t0) * 1000


def load_model(args, cfg, result):
    """file -> ready model on the GPU; records load_ms and its phases in `result`."""
    import torch

    from model import build_model

    result["framework_warmup_ms"] = warm_framework()
    sync()
    t0 = time.perf_counter()
    if args.quant == "int4":
        # torchao's quantized tensors do not round-trip through a state dict file cheaply; build
        # from the seed and quantize (reported as load time: the file would hold the same).
        from export_llm import quantize_int4

        model = build_model(cfg, device="cuda")
        quantize_int4(model)
    else:
        state = torch.load(args.weights, mmap=True, map_location="cpu", weights_only=True)
        t1 = time.perf_counter()
        model = build_model(cfg, device="cuda", init=False)
        sync()
        t2 = time.perf_counter()
        model.load_state_dict(state)
        del state
        result["load_phases_ms"] = {"open": (t1 - t0) * 1000, "allocate": (t2 - t1) * 1000,
                                    "copy": (time.perf_counter() - t2) * 1000}
    sync()
    result["load_ms"] = (time.perf_counter() - t0) * 1000
    return model


def measure(prefill, decode_steps, cfg, args, result):
    """prefill(tokens) -> (logits, tok); decode_steps(tok, start_pos, n) -> list of n device tokens."""
    import torch

    from model import prompt_tokens

    for plen in args.prompt_lens:
        if plen > cfg.max_prefill or plen + args.new_tokens > cfg.max_ctx:
            result[f"p{plen}_error"] = "prompt too long for the config"
            continue
        key = f"p{plen}_"
        tokens = prompt_tokens(plen, cfg.vocab).cuda()
        times = []
        for _ in range(args.reps + 1):
            sync()
            t0 = time.perf_counter()
            _, tok = prefill(tokens)
            sync()
            times.append((time.perf_counter() - t0) * 1000)
        result[key + "ttft_first_ms"] = times[0]
        result[key + "ttft_ms"] = statistics.median(times[1:] or times)
        sync()
        t0 = time.perf_counter()
        generated = decode_steps(tok, plen, args.new_tokens)
        sync()
        ms = (time.perf_counter() - t0) * 1000
        result[key + "decode_ms"] = ms
        result[key + "decode_tok_s"] = args.new_tokens / (ms / 1000)
        ids = [int(tok)] + [int(t) for t in generated[:31]]
        result[key + "tokens"] = ids
        del tokens
    return result


def plain_decode_steps(decode, positions):
    def steps(tok, start, n):
        out = []
        for i in range(n):
            _, tok = decode(tok, positions[start + i : start + i + 1])
            out.append(tok)
        return out

    return steps


def run_eager(args):
    import torch

    cfg = config_from(args)
    result = {"peer": "eager", "quant": args.quant}
    torch.ones(1, device="cuda")
    sync()
    mem0 = used_mib()
    model = load_model(args, cfg, result)
    result["gpu_mem_after_load_mib"] = used_mib() - mem0
    positions = torch.arange(cfg.max_ctx, device="cuda")
    with torch.no_grad():
        warm = model.prefill(torch.zeros(1, 16, dtype=torch.int64, device="cuda"))
        model.decode(warm[1], positions[16:17])
        measure(model.prefill, plain_decode_steps(model.decode, positions), cfg, args, result)
    result["gpu_mem_mib"] = used_mib() - mem0
    result["torch_max_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return result


def run_eager_graph(args):
    """Eager prefill; decode captured once into a CUDA graph that also feeds its output token back
    to its input and advances the position, so each step is one graph replay."""
    import torch

    cfg = config_from(args)
    result = {"peer": "eager_graph", "quant": args.quant}
    torch.ones(1, device="cuda")
    sync()
    mem0 = used_mib()
    model = load_model(args, cfg, result)
    result["gpu_mem_after_load_mib"] = used_mib() - mem0
    static_tok = torch.zeros(1, 1, dtype=torch.int64, device="cuda")
    static_pos = torch.zeros(1, dtype=torch.int64, device="cuda")
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up outside capture (cuBLAS handles, autotuned kernels)
                model.decode(static_tok, static_pos)
        torch.cuda.current_stream().wait_stream(side)
        sync()
        t0 = time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _, out_tok = model.decode(static_tok, static_pos)
            static_tok.copy_(out_tok)
            static_pos.add_(1)
        sync()
        result["capture_ms"] = (time.perf_counter() - t0) * 1000

        def steps(tok, start, n):
            static_tok.copy_(tok)
            static_pos.fill_(start)
            out = []
            for i in range(n):
                graph.replay()
                if i < 31:  # the ids to compare (a tiny copy; cheap next to a decode step)
                    out.append(static_tok.clone())
            return out

        measure(model.prefill, steps, cfg, args, result)
    result["gpu_mem_mib"] = used_mib() - mem0
    return result


def run_compile(args):
    import torch

    cfg = config_from(args)
    result = {"peer": "torch_compile", "quant": args.quant, "mode": "max-autotune"}
    torch.ones(1, device="cuda")
    sync()
    mem0 = used_mib()
    model = load_model(args, cfg, result)
    positions = torch.arange(cfg.max_ctx, device="cuda")
    decode = torch.compile(model.decode, mode="max-autotune", fullgraph=True)
    prefill = torch.compile(model.prefill, mode="max-autotune-no-cudagraphs", fullgraph=True, dynamic=True)

    def cloned_decode(tok, pos):
        logits, nxt = decode(tok, pos)
        return logits, nxt.clone()  # CUDA-graph outputs are overwritten by the next replay

    with torch.no_grad():
        t0 = time.perf_counter()
        for plen in sorted(set([16] + list(args.prompt_lens))):  # compile + warm both paths
            if plen <= cfg.max_prefill:
                _, tok = prefill(torch.zeros(1, plen, dtype=torch.int64, device="cuda"))
        for i in range(3):
            _, tok = cloned_decode(tok, positions[16 + i : 17 + i])
        sync()
        result["compile_s"] = time.perf_counter() - t0
        measure(prefill, plain_decode_steps(cloned_decode, positions), cfg, args, result)
    result["gpu_mem_mib"] = used_mib() - mem0
    return result


def write_weights(args):
    import torch

    from model import build_model

    cfg = config_from(args)
    t0 = time.perf_counter()
    model = build_model(cfg, device="cuda")
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save(state, args.weights + ".tmp")
    os.replace(args.weights + ".tmp", args.weights)  # complete or absent: the orchestrator reuses it
    return {"step": "weights", "seconds": time.perf_counter() - t0, "bytes": os.path.getsize(args.weights)}


def bandwidth(args):
    """Host -> device copy rate of 1 GiB, pinned and pageable (the yardstick of the weights upload)."""
    import torch

    n = 1 << 30
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    out = {"step": "bandwidth", "bytes": n}
    for name, pinned in (("pinned", True), ("pageable", False)):
        host = torch.ones(n, dtype=torch.uint8, pin_memory=pinned)
        dev.copy_(host, non_blocking=pinned)
        sync()
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            dev.copy_(host, non_blocking=pinned)
            sync()
            t = time.perf_counter() - t0
            best = t if best is None else min(best, t)
        out[f"{name}_h2d_gb_per_s"] = n / best / 1e9
        del host
    return out


ET_INDUCTOR_SETTINGS = {
    # What ExecuTorch 1.2's CUDA backend passes to AOTInductor (minus its packaging options).
    "max_autotune": True,
    "max_autotune_gemm_backends": "TRITON",
    "max_autotune_conv_backends": "TRITON",
    "emulate_precision_casts": True,
    "loop_ordering_after_fusion": False,
}


def aoti_package(args):
    """prefill.pt2 / decode.pt2 for the libtorch runner (default AOTInductor settings: cuBLAS GEMMs
    and aten flash/efficient attention, what a libtorch user gets; --settings et for ExecuTorch's)."""
    import torch

    from export_llm import export_methods, quantize_int4
    from model import build_model

    cfg = config_from(args)
    t0 = time.perf_counter()
    model = build_model(cfg, device="cuda")
    if args.quant == "int4":
        quantize_int4(model)
    programs = export_methods(model, cfg, min(args.prefill_hint, cfg.max_prefill), "cuda")
    configs = dict(ET_INDUCTOR_SETTINGS) if args.settings == "et" else {}
    tmp = args.out_dir.rstrip("/") + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    times = {"export_s": time.perf_counter() - t0}
    for name, ep in programs.items():
        t1 = time.perf_counter()
        torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(tmp, f"{name}.pt2"), inductor_configs=configs)
        times[f"{name}_compile_s"] = time.perf_counter() - t1
    import shutil

    shutil.rmtree(args.out_dir, ignore_errors=True)
    os.replace(tmp, args.out_dir)  # both packages or none: the orchestrator reuses the folder
    times["total_s"] = time.perf_counter() - t0
    return {"step": "aoti_package", "settings": args.settings, **times}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("peer", choices=["weights", "eager", "eager_graph", "compile", "aoti_package", "bandwidth"])
    ap.add_argument("--config", default="1b")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--max-prefill", type=int)
    ap.add_argument("--quant", choices=["bf16", "int4"], default="bf16")
    ap.add_argument("--weights", default="/tmp/llm_weights.pt")
    ap.add_argument("--prompt-lens", default="128,512")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prefill-hint", type=int, default=128)
    ap.add_argument("--out-dir", default="/tmp/llm_aoti")
    ap.add_argument("--settings", choices=["default", "et"], default="default")
    ap.add_argument("--json", help="write the result here (also printed as a line '@@JSON ...')")
    args = ap.parse_args(argv)
    args.prompt_lens = [int(x) for x in args.prompt_lens.split(",") if x]

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    run = {"weights": write_weights, "eager": run_eager, "eager_graph": run_eager_graph,
           "compile": run_compile, "aoti_package": aoti_package, "bandwidth": bandwidth}[args.peer]
    t0 = time.perf_counter()
    try:
        result = run(args)
    except Exception as exc:  # reported, not raised: the orchestrator collects partial results
        import traceback

        traceback.print_exc()
        result = {"peer": args.peer, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    result["wall_s"] = time.perf_counter() - t0
    result["config"] = args.config
    text = json.dumps(result)
    print("@@JSON " + text, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
