"""int4 weight-only models for export_models.py: torchao 0.17 `Int4WeightOnlyConfig` with the
`tile_packed_to_4d` packing (what ExecuTorch's CUDA recipe uses for `--qlinear 4w`). Their
linear layers lower to `aoti_torch_cuda__weight_int4pack_mm` calls in the .so.

torchao packs on the GPU (`_convert_weight_to_int4pack` for CUDA; the CPU op has another
layout), so the models are quantized on CUDA and exported there (`Model.export_device`).
torchao pads every quantized weight's K to a multiple of 1024 and N to a multiple of 8, and
pads activations to match inside the graph, and fixes innerKTiles to 8.
"""

from typing import Any


def add_to(ex: Any) -> None:
    """Registers the models into export_models (passed as module `ex`)."""

    def quantize(module, group_size):
        import torch
        from torchao.quantization import Int4WeightOnlyConfig, quantize_

        module = module.to("cuda")
        # Only the linear weights must be bf16 (torchao casts activations to bf16 and back).
        for sub in module.modules():
            if isinstance(sub, torch.nn.Linear):
                sub.to(torch.bfloat16)
        quantize_(module, Int4WeightOnlyConfig(group_size=group_size, int4_packing_format="tile_packed_to_4d"))
        return module.eval()

    @ex.register(
        "mlp_int4",
        "bf16[24,256] -> bf16[24,64]: int4 weight-only (torchao tile_packed_to_4d, group 128) Linear/ReLU/Linear",
        default=False,
    )
    def _mlp_int4():
        import torch

        ex._seed("mlp_int4")
        g = ex._gen("mlp_int4")
        mlp = ex._mlp_module(256, 512, 64).to(torch.bfloat16)
        mlp = quantize(mlp, 128)
        x = ex._randn(g, 24, 256, dtype=torch.bfloat16)
        return ex.Model(
            [ex.Method("forward", mlp, (x,), 3e-2, 3e-2)],
            notes=(
                "int4 weight-only MLP: torchao 0.17 Int4WeightOnlyConfig(group_size=128, "
                "int4_packing_format='tile_packed_to_4d'); each Linear runs "
                "aoti_torch_cuda__weight_int4pack_mm (K padded to 1024, innerKTiles 8, M = 24). Expected "
                "outputs are eager torchao (torch's tinygemm kernel); tolerance covers one bf16 ulp per "
                "layer of accumulation-order difference."
            ),
            export_device="cuda",
        )

    @ex.register(
        "lm_int4",
        "lm with int4 weight-only linears (group 32): prefill i64[8] -> f32[8,64], decode -> f32[1,64]",
        default=False,
    )
    def _lm_int4():
        import torch

        TinyLM, Prefill, Decode = ex._lm_module()
        ex._seed("lm_int4")
        g = ex._gen("lm_int4")
        lm = quantize(TinyLM(), 32)
        prompt = torch.randint(0, ex.LM_VOCAB, (ex.LM_PROMPT,), generator=g, dtype=torch.int64)
        token = torch.randint(0, ex.LM_VOCAB, (1,), generator=g, dtype=torch.int64)
        pos = torch.tensor([ex.LM_PROMPT], dtype=torch.int64)
        return ex.Model(
            [
                ex.Method("prefill", Prefill(lm), (prompt,), 3e-2, 3e-2),
                ex.Method("decode", Decode(lm), (token, pos), 3e-2, 3e-2),
            ],
            notes=(
                "The lm model (see its manifest) with every Linear int4 weight-only quantized by torchao 0.17 "
                "(group 32, tile_packed_to_4d): prefill runs aoti_torch_cuda__weight_int4pack_mm with M = 8, "
                "decode with M = 1. methods.<m>.outputs are each method on a fresh module (zero caches)."
            ),
            export_device="cuda",
        )
