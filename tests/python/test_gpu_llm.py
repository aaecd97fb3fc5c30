"""An LLM through the Python package: the 'lm' fixture (prefill i64[8] -> logits, decode (token, pos) ->
logits, a KV cache), its cache shared by both methods (share_state='all'), one Session per conversation,
against eager PyTorch (recorded outputs, and the exporter's model rebuilt here for whole generations)."""

from __future__ import annotations

import pytest

import aoti_cuda
from conftest import GPU_SKIP_REASON
from gpu_support import eager_model, fixture_dir, load_bin

if GPU_SKIP_REASON:
    pytest.skip(f"GPU tests SKIPPED: {GPU_SKIP_REASON}", allow_module_level=True)

LM = fixture_dir("lm")
TOL = {"atol": 1e-4, "rtol": 1e-4}  # the manifest's


def tensors():
    return {
        "prompt": load_bin(LM, {"file": "prefill.in0.bin", "dtype": "int64", "shape": [8]}).cuda(),
        "token": load_bin(LM, {"file": "decode.in0.bin", "dtype": "int64", "shape": [1]}).cuda(),
        "pos": load_bin(LM, {"file": "decode.in1.bin", "dtype": "int64", "shape": [1]}).cuda(),
        "prefill": load_bin(LM, {"file": "prefill.out0.bin", "dtype": "float32", "shape": [8, 64]}),
        "fresh": load_bin(LM, {"file": "decode.out0.bin", "dtype": "float32", "shape": [1, 64]}),
        "after": load_bin(LM, {"file": "decode.after_prefill.out0.bin", "dtype": "float32", "shape": [1, 64]}),
    }


def close(got, want):
    import torch

    torch.testing.assert_close(got.cpu(), want.cpu(), **TOL)


@pytest.mark.parametrize("graphs", [False, True])
def test_sessions_hold_separate_conversations(graphs):
    t = tensors()
    with aoti_cuda.Module(LM / "lm.pte", share_state="all", cuda_graphs=graphs) as m:
        assert m.load_stats().shared_state_constants >= 2  # k_cache and v_cache
        a, b = m.create_session(), m.create_session()
        close(m.execute("prefill", t["prompt"], session=a)[0], t["prefill"])
        close(m.execute("decode", t["token"], t["pos"], session=a)[0], t["after"])  # eager: one shared module
        close(m.execute("decode", t["token"], t["pos"], session=b)[0], t["fresh"])  # b's cache is still empty
        for _ in range(3):  # back and forth: each session's cache comes back in place
            close(m.execute("decode", t["token"], t["pos"], session=a)[0], t["after"])
            close(m.execute("decode", t["token"], t["pos"], session=b)[0], t["fresh"])
        close(m.execute("decode", t["token"], t["pos"])[0], t["fresh"])  # the Module's own state: untouched
        a.reset()
        close(m.execute("decode", t["token"], t["pos"], session=a)[0], t["fresh"])
        a.close()
        with pytest.raises(aoti_cuda.Error, match="the Session is closed"):
            m.execute("decode", t["token"], t["pos"], session=a)
        close(m.execute("decode", t["token"], t["pos"], session=b)[0], t["fresh"])  # still usable
        if graphs:
            assert m.graph_status("decode").replays > 0, repr(m.graph_status("decode"))


def generate(step_prefill, step_decode, prompt, steps: int) -> list[int]:
    """Greedy decoding: the argmax of the last logits, fed back at the next position."""
    logits = step_prefill(prompt)
    tokens = []
    nxt = logits[-1].argmax().reshape(1)
    for i in range(steps):
        tokens.append(int(nxt))
        pos = prompt.new_tensor([prompt.numel() + i])
        nxt = step_decode(nxt, pos)[-1].argmax().reshape(1)
    return tokens


def test_generation_matches_eager_pytorch():
    import torch

    model, why = eager_model("lm")
    if model is None:
        pytest.skip(f"eager generation SKIPPED: {why}")
    t = tensors()
    prefill, decode = (meth.module for meth in model.methods)
    lm = prefill.lm.cuda().eval()  # one module owns the cache, as the exported program's shared state
    with torch.no_grad():
        close(lm.prefill(t["prompt"]), t["prefill"])  # the rebuilt model is the exported one
        lm.k_cache.zero_()
        lm.v_cache.zero_()
        want = generate(lm.prefill, lm.decode, t["prompt"], 8)
    with aoti_cuda.Module(LM / "lm.pte", share_state="all", cuda_graphs=True) as m:
        conversations = [m.create_session() for _ in range(2)]
        for s in conversations:  # one after the other, each from its own fresh cache
            got = generate(lambda p, s=s: m.execute("prefill", p, session=s)[0],
                           lambda tok, pos, s=s: m.execute("decode", tok, pos, session=s)[0], t["prompt"], 8)
            assert got == want
        assert m.graph_status("decode").replays > 0
