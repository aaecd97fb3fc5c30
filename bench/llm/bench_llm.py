#!/usr/bin/env python3
"""Runs the whole LLM + per-call benchmark in one GPU-machine command, within a time budget.

    python3 bench/llm/bench_llm.py --out OUT --build BUILD [--config 1b] [--layers N]
        [--parts llm,int4,cublas,compile,fixtures] [--budget 540] [--work /tmp/llm_bench]
        [--stage all|prepare|measure]

BUILD is a build folder of this repository made elsewhere (tools/contrib/gpu-machine/device-pack.sh), holding
examples/generate/generate and the aoti_cuda CLI. Steps (each a child process with its own log
and timeout; a failed or timed-out step is recorded and the rest go on):

  phase 1, concurrently (CPU-heavy compiles; GPU only for autotuning):
    export_bf16 / export_int4   tools/export/llm/export_llm.py -> WORK/<quant>/llm.pte + .ptd
    export_bf16cublas           the same, bf16 with --gemm cublas (part cublas) -> WORK/bf16cublas/
    warm_decode_bf16            a throwaway decode-only export filling the caches for export_bf16
    weights                     the peers' weights file (from the seed, on this GPU)
    aoti_package                prefill.pt2 / decode.pt2 for the libtorch runner
    runner_build                bench/peers/aoti_runner (CMake against this machine's torch)
    compile_warm                torch.compile max-autotune, once, to fill the Inductor caches
                                (its compile_s is the cold compile time)
    call_packages               fixtures: AOTI packages per method
  phase 2, one at a time (GPU measurements):
    bandwidth                   host -> device copy rate, pinned and pageable
    read_bw                     the GPU's streaming-read bandwidth (BUILD/bench/aoti_cuda_read_bw): the roofline
    aoti_cuda_bf16 / _int4 / _bf16cublas   examples/generate on the exported programs (+ --profile-kernels)
    libtorch_aoti               aoti_runner llm
    eager, eager_graph          (part llm)
    compile                     torch.compile peer, warm caches (part compile)
    eager_int4                  (part int4)
    calls_*                     fixtures: aoti_cuda_call_bench (plain / graphs / bound outputs; where the
                                build has it) and aoti_cuda bench, PyTorch eager + graph replay, aoti_runner call

Results: OUT/llm_results.json and OUT/calls_results.json (raw, every step's status and numbers),
OUT/bench_steps.log (tails of every step's log). bench/report.py turns them into docs/benchmarks/.
A WORK folder left by an earlier command on the same (warm) machine is reused: exports whose
manifest matches the config are not redone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable
LLM_PEERS = os.path.join(ROOT, "bench", "peers", "llm_peers.py")
CALL_PEERS = os.path.join(ROOT, "bench", "peers", "call_peers.py")
EXPORT = os.path.join(ROOT, "tools", "export", "llm", "export_llm.py")
# The ExecuTorch exports: folder / step name -> (part that asks for it, export_llm.py flags). Measured alike
# (run "aoti_cuda_<name>"); bf16cublas is bf16 with cuBLAS GEMMs instead of the backend's Triton templates.
EXPORTS = {
    "bf16": ("llm", ["--quant", "bf16"]),
    "int4": ("int4", ["--quant", "int4"]),
    "bf16cublas": ("cublas", ["--quant", "bf16", "--gemm", "cublas"]),
    # cuBLAS GEMMs and SDPA decomposed into bf16 matmuls + softmax (the backend's triton_kernel_mode=OFF) instead
    # of the backend's Triton SDPA kernel, which runs one block per KV head at decode.
    "bf16fast": ("fast", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "decomposed"]),
    "int4fast": ("int4fast", ["--quant", "int4", "--gemm", "cublas", "--sdpa", "decomposed"]),
    # As bf16fast, but prefill keeps the backend's Triton SDPA kernel (decode alone decomposed).
    "bf16mix": ("mix", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "mixed"]),
    # As bf16mix, with AOTInductor's own fusion defaults instead of ExecuTorch's (export_llm.py --fusion).
    "bf16mixfuse": ("mixfuse", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "mixed", "--fusion", "inductor"]),
    # As bf16mixfuse, but prefill keeps PyTorch's flash attention (aoti_cuda's kernel) instead of the Triton SDPA.
    "bf16flash": ("flash", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "flash", "--fusion", "inductor"]),
    # As bf16mix, but decode attends through aoti_cuda's own decode attention shim (export_llm.py --sdpa decode-op):
    # a program only aoti_cuda runs.
    "bf16dop": ("decodeop", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "decode-op"]),
    # The int4 export (torchao, as "int4") with bf16dop's options: the remaining GEMMs on cuBLAS, decode's attention
    # through aoti_cuda's shim. Also only aoti_cuda runs it.
    "int4dop": ("int4decodeop", ["--quant", "int4", "--gemm", "cublas", "--sdpa", "decode-op"]),
    # As bf16dop / int4dop with the operator's update form: it also stores the step's K and V rows, so decode has no
    # separate kernels writing the cache (two fewer launches per layer).
    "bf16dopu": ("decodeopu", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "decode-op-update"]),
    "int4dopu": ("int4decodeopu", ["--quant", "int4", "--gemm", "cublas", "--sdpa", "decode-op-update"]),
    # With the operator's qkv form: it also rotates q and k from the projection's output, so decode has no kernel
    # between the q/k/v projection and the attention (three fewer launches per layer than dopu, measured in B).
    "bf16dopq": ("decodeopq", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "decode-op-qkv"]),
    "int4dopq": ("int4decodeopq", ["--quant", "int4", "--gemm", "cublas", "--sdpa", "decode-op-qkv"]),
    # As bf16dopq / int4dopq, every decode projection through aoti_cuda's fused linear operator (its int4 form on
    # torchao's packed weights), with the RMSNorms, SwiGLU and residual adds folded in: four projections per layer.
    "bf16dopqf": ("decodeopqf", ["--quant", "bf16", "--gemm", "cublas", "--sdpa", "decode-op-fused"]),
    "int4dopqf": ("int4decodeopqf", ["--quant", "int4", "--gemm", "cublas", "--sdpa", "decode-op-fused"]),
}


def export_names(a):
    """The exports the parts need, in EXPORTS' order (--exports then picks among them)."""
    return [name for name, (part, _flags) in EXPORTS.items() if part in a.parts]


def export_flag(name, flag):
    """The value export `name` passes for `flag` (--gemm, --sdpa, --fusion), or the exporter's default."""
    flags = EXPORTS[name][1]
    return flags[flags.index(flag) + 1] if flag in flags else EXPORT_DEFAULTS[flag]


EXPORT_DEFAULTS = {"--gemm": "triton", "--sdpa": "triton", "--fusion": "executorch"}


class Steps:
    """Child processes with logs, timeouts and a global deadline."""

    def __init__(self, work: str, deadline: float):
        self.work, self.deadline = work, deadline
        self.logs = os.path.join(work, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.status = {}
        self.running = {}

    def left(self) -> float:
        return self.deadline - time.time()

    def start(self, name, cmd, timeout, cwd=ROOT, env=None):
        timeout = min(timeout, self.left() - 5)
        if timeout < 10:
            self.status[name] = {"status": "skipped", "reason": "time budget spent"}
            return False
        log = open(os.path.join(self.logs, name + ".log"), "w")
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True,
                                    env=None if env is None else dict(os.environ, **env))
        except OSError as exc:  # e.g. the runner did not build
            log.write(f"cannot start: {exc}\n")
            log.close()
            self.status[name] = {"status": f"not started ({exc.strerror})"}
            return False
        self.running[name] = (proc, log, time.time(), timeout)
        print(f"[{time.strftime('%H:%M:%S')}] start {name} (timeout {timeout:.0f}s)", flush=True)
        return True

    def poll(self):
        for name in list(self.running):
            proc, log, t0, timeout = self.running[name]
            rc = proc.poll()
            if rc is None and time.time() - t0 < timeout:
                continue
            if rc is None:
                os.killpg(proc.pid, 9)
                proc.wait()
                status = "timeout"
            else:
                status = "ok" if rc == 0 else f"failed (exit {rc})"
            log.close()
            del self.running[name]
            self.status[name] = {"status": status, "seconds": round(time.time() - t0, 1)}
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {status} after {time.time() - t0:.0f}s", flush=True)

    def wait(self, names=None):
        while any(n in self.running for n in (names or list(self.running))):
            time.sleep(0.5)
            self.poll()

    def run(self, name, cmd, timeout, env=None):
        if self.start(name, cmd, timeout, env=env):
            self.wait([name])
        return self.json_of(name)

    def json_of(self, name):
        """The last '@@JSON {...}' line of a step's log (or None)."""
        found = None
        path = os.path.join(self.logs, name + ".log")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                for line in f:
                    if line.startswith("@@JSON "):
                        try:
                            found = json.loads(line[7:])
                        except ValueError:
                            pass
        return found


def export_ok(folder, cfg_args, gemm="triton", sdpa="triton", fusion="executorch") -> bool:
    mf = os.path.join(folder, "manifest.json")
    if not os.path.exists(mf) or not os.path.exists(os.path.join(folder, "llm.pte")):
        return False
    with open(mf) as f:
        m = json.load(f)
    return m.get("config_name") == cfg_args["config"] and (
        cfg_args["layers"] is None or m["config"]["n_layers"] == cfg_args["layers"]) and not m.get("stub_backend") and (
        m.get("gemm", "triton") == gemm) and m.get("sdpa", "triton") == sdpa and m.get("fusion", "executorch") == fusion


def reset_if_config_changed(a):
    """WORK artifacts are reused only for the same model config (a stamp file records it)."""
    stamp = os.path.join(a.work, "stamp.json")
    want = {"config": a.config, "layers": a.layers}
    if load_json(stamp) != want:
        for name in list(EXPORTS) + ["weights.pt", "aoti_llm", "warm_decode_bf16"]:
            path = os.path.join(a.work, name)
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
        with open(stamp, "w") as f:
            json.dump(want, f)


def start_exports(s: Steps, a, cfg_flags):
    w = a.work
    for quant in export_names(a):  # quant: the export's name (bf16, int4, bf16cublas)
        if a.exports is not None and quant not in a.exports:
            s.status["export_" + quant] = {"status": "not asked for (--exports)"}
            continue
        if export_ok(os.path.join(w, quant), {"config": a.config, "layers": a.layers}, export_flag(quant, "--gemm"), export_flag(quant, "--sdpa"),
                     export_flag(quant, "--fusion")):
            s.status["export_" + quant] = {"status": "reused"}
            continue
        shutil.rmtree(os.path.join(w, quant), ignore_errors=True)
        s.start("export_" + quant, [PY, EXPORT, "--out", os.path.join(w, quant)] + EXPORTS[quant][1] + cfg_flags,
                a.export_timeout)
        if quant == "bf16" and not a.exclusive_export:
            # A throwaway export of decode alone, at the same time: it fills the shared Inductor /
            # Triton caches (autotuning results, compiled kernels) for decode while the real export
            # is still on prefill, so the real one finds them there.
            s.start("warm_decode_bf16", [PY, EXPORT, "--out", os.path.join(w, "warm_decode_bf16"), "--methods", "decode",
                                         "--reference-tokens", "0"] + cfg_flags, a.export_timeout)


def start_runner_build(s: Steps, a):
    runner = os.path.join(a.work, "runner")
    if os.path.exists(os.path.join(runner, "aoti_runner")):
        s.status["runner_build"] = {"status": "reused"}
        return
    torch_dir = subprocess.run([PY, "-c", "import torch;print(torch.utils.cmake_prefix_path)"],
                               capture_output=True, text=True).stdout.strip() + "/Torch"
    s.start("runner_build", ["bash", "-c", f"cmake -S bench/peers -B {runner} -G Ninja -DCMAKE_BUILD_TYPE=Release "
                             f"-DTorch_DIR={torch_dir} && cmake --build {runner}"], 240)


def phase1(s: Steps, a, cfg_flags):
    """Everything that compiles or writes files, concurrently; waits for all of it."""
    w = a.work
    reset_if_config_changed(a)
    llm = "llm" in a.parts
    if export_names(a):
        start_exports(s, a, cfg_flags)
        if a.exclusive_export:  # autotuning alone on the GPU: slower, but no contention in its timings
            s.wait()
    if a.parts & {"llm", "int4", "compile"}:
        if os.path.exists(os.path.join(w, "weights.pt")):
            s.status["weights"] = {"status": "reused"}
        else:
            s.start("weights", [PY, LLM_PEERS, "weights", "--weights", os.path.join(w, "weights.pt")] + cfg_flags, 120)
    if llm and "libtorch" in a.peers:
        if os.path.exists(os.path.join(w, "aoti_llm", "decode.pt2")):
            s.status["aoti_package"] = {"status": "reused"}
        else:
            s.start("aoti_package", [PY, LLM_PEERS, "aoti_package", "--out-dir", os.path.join(w, "aoti_llm")]
                    + cfg_flags, a.export_timeout)
    if (llm or "fixtures" in a.parts) and "libtorch" in a.peers:
        start_runner_build(s, a)
    if "fixtures" in a.parts and "libtorch" in a.peers:
        if load_json(os.path.join(w, "call_aoti", "index.json")):
            s.status["call_packages"] = {"status": "reused"}
        else:
            s.start("call_packages", [PY, CALL_PEERS, "package", "--out-dir", os.path.join(w, "call_aoti"),
                                      "--jobs", "6", "--budget", str(a.export_timeout - 20),
                                      "--settings", a.fixture_settings] + fixture_flag(a),
                    a.export_timeout)
    if "compile" in a.parts:
        s.wait(["weights"])
        s.start("compile_warm", [PY, LLM_PEERS, "compile", "--weights", os.path.join(w, "weights.pt"),
                                 "--new-tokens", "4", "--reps", "0"] + cfg_flags, a.export_timeout)
    s.wait()


def find_binary(build, *candidates):
    """The first of BUILD/<candidate> that exists (layouts differ between versions of the build)."""
    for c in candidates:
        if os.path.exists(os.path.join(build, c)):
            return os.path.join(build, c)
    return os.path.join(build, candidates[0])


def generate_cmd(a, quant, manifest):
    cmd = [find_binary(a.build, "examples/generate/generate", "generate"), os.path.join(a.work, quant, "llm.pte"),
           "--prompt-lens", a.prompt_lens, "--new-tokens", str(a.new_tokens), "--reps", str(a.reps),
           "--profile-kernels"]  # after the timed runs: where prefill's and decode's GPU time goes
    ref = (manifest or {}).get("reference") or {}
    if ref.get("tokens") and str(ref.get("prompt_len")) == a.prompt_lens.split(",")[0]:
        cmd += ["--expect-tokens", ",".join(str(t) for t in ref["tokens"])]
    return cmd


def phase2_llm(s: Steps, a, cfg_flags, results):
    w = a.work
    results["runs"]["bandwidth"] = s.run("bandwidth", [PY, LLM_PEERS, "bandwidth"], 60)
    # The roofline's ceiling (bench/roofline.py): the GPU's streaming-read bandwidth, in this job.
    s.run("read_bw", [find_binary(a.build, "bench/aoti_cuda_read_bw", "aoti_cuda_read_bw")], 60)
    results["runs"]["read_bw"] = last_json(os.path.join(s.logs, "read_bw.log"))
    measure = ["--prompt-lens", a.prompt_lens, "--new-tokens", str(a.new_tokens), "--reps", str(a.reps)]
    for quant in export_names(a):  # same generate invocation for each (prompts, token check, kernel profile)
        manifest = load_json(os.path.join(w, quant, "manifest.json"))
        results["exports"][quant] = manifest
        if manifest:
            results["runs"]["aoti_cuda_" + quant] = s.run("aoti_cuda_" + quant, generate_cmd(a, quant, manifest), 90)
            if a.gemv_ab and export_flag(quant, "--gemm") == "cublas":
                # A/B of the extern GEMMs' few-row kernels (default: 1 row, decode's projections): off (every
                # GEMM on cuBLAS), and up to 8 rows (decode's attention matmuls too, 4 query rows per KV head).
                for suffix, rows in (("_nogemv", "0"), ("_gemv8", "8")):
                    name = "aoti_cuda_" + quant + suffix
                    results["runs"][name] = s.run(name, generate_cmd(a, quant, manifest), 90,
                                                  env={"AOTI_CUDA_GEMV_MAX_ROWS": rows})
            if a.cache_ab:
                # A/B of the call slots' block cache: without it every intermediate of prefill is a
                # cudaMallocAsync / cudaFreeAsync pair again.
                name = "aoti_cuda_" + quant + "_nocache"
                results["runs"][name] = s.run(name, generate_cmd(a, quant, manifest), 90,
                                              env={"AOTI_CUDA_BLOCK_CACHE_MIB": "0"})
            if a.graph_ab:
                # What decode's graph replay buys: the same run with plain calls.
                name = "aoti_cuda_" + quant + "_nographs"
                results["runs"][name] = s.run(name, generate_cmd(a, quant, manifest) + ["--no-graphs"], 90)
    cfg = (results["exports"].get("bf16") or {}).get("config") or {}
    runner = [os.path.join(w, "runner", "aoti_runner"), "llm", os.path.join(w, "aoti_llm", "prefill.pt2"),
              os.path.join(w, "aoti_llm", "decode.pt2"), "--vocab", str(cfg.get("vocab", 32000)),
              "--max-ctx", str(cfg.get("max_ctx", 1024)), "--prompt-lens", a.prompt_lens,
              "--new-tokens", str(a.new_tokens), "--reps", str(a.reps)]
    if "llm" in a.parts and "libtorch" in a.peers:
        r = s.run("libtorch_aoti", runner, 150)
        if (r is None or "error" in r) and os.path.exists(os.path.join(w, "aoti_llm", "decode.pt2")):
            # Binding decode's constants through libtorch's inactive buffer (which also frees decode's
            # own copy) is the less travelled path; if it broke, bind the active buffer instead.
            r = s.run("libtorch_aoti_active", runner + ["--share", "active"], 150)
        results["runs"]["libtorch_aoti"] = r
        if a.graph_ab and r is not None and "error" not in r:
            # The libtorch runner with its decode step captured once in a CUDA graph and replayed.
            share = ["--share", "active"] if r.get("share_path") == "active" else []
            results["runs"]["libtorch_aoti_graph"] = s.run("libtorch_aoti_graph", runner + share + ["--decode-graph", "1"], 150)
    weights = ["--weights", os.path.join(w, "weights.pt")]
    if "llm" in a.parts and "eager" in a.peers:
        for peer in ["eager", "eager_graph"]:
            results["runs"][peer] = s.run(peer, [PY, LLM_PEERS, peer] + weights + measure + cfg_flags, 150)
    if "compile" in a.parts:  # caches filled by compile_warm in phase 1
        results["runs"]["torch_compile"] = s.run("compile", [PY, LLM_PEERS, "compile"] + weights + measure + cfg_flags,
                                                 240)
    if "int4" in a.parts and "eager" in a.peers:
        results["runs"]["eager_int4"] = s.run("eager_int4", [PY, LLM_PEERS, "eager", "--quant", "int4"] + weights
                                              + measure + cfg_flags, 150)


def last_json(path):
    """The last line of a log that parses as a JSON object ('@@JSON ' prefix or not)."""
    found = None
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("@@JSON "):
                    line = line[7:]
                if line.startswith("{") and line.endswith("}"):
                    try:
                        found = json.loads(line)
                    except ValueError:
                        pass
    return found


def stdout_json(path):
    """A multi-line JSON document printed by a step (aoti_cuda bench --json), or None."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
        return json.loads(text[text.index("\n{") + 1:]) if "\n{" in text else None
    except (OSError, ValueError):
        return None


def aoti_cuda_bench(s: Steps, a, fixtures):
    """`aoti_cuda bench` per fixture method (JSON with --json where the CLI has that flag, else its text)."""
    cli = find_binary(a.build, "aoti_cuda", "tools/aoti_cuda")
    has_json = "--json" in subprocess.run([cli, "bench", "--help"], capture_output=True, text=True).stdout
    rows = []
    for model, method in fixtures:
        name = f"calls_aoti_cuda_{model}.{method}"
        cmd = [cli, "bench", os.path.join(ROOT, "tests", "fixtures", model, model + ".pte"), "--method", method,
               "--runs", "200", "--loads", "2"] + (["--json"] if has_json else [])
        s.run(name, cmd, 60)
        row = {"model": model, "method": method}
        log = os.path.join(s.logs, name + ".log")
        doc = stdout_json(log) if has_json else None
        if doc:
            row["bench_json"] = doc
        with open(log, errors="replace") as f:
            text = f.read()
        m = re.search(r"device I/O\s+latency over \d+ runs: p50 ([0-9.]+) ms", text)
        if m:
            row["device_io_p50_ms"] = float(m.group(1))
        m = re.search(r"first call[^:]*: ([0-9.]+) ms", text)
        if m:
            row["first_call_ms"] = float(m.group(1))
        rows.append(row)
    return rows


def aoti_cuda_call_modes(s: Steps, a, fixtures):
    """bench/aoti_cuda_call_bench (its modes: plain, graphs, bound outputs, interleaved in one
    process) over the fixtures, and its --first (load + first call in a fresh process) per model.
    None when the build has no such program."""
    prog = find_binary(a.build, "bench/aoti_cuda_call_bench")
    if not os.path.exists(prog):
        return None
    fx = os.path.join(ROOT, "tests", "fixtures")
    models = sorted({m for m, _ in fixtures})
    out = os.path.join(s.logs, "calls_aoti_cuda_modes.json")
    s.run("calls_aoti_cuda_modes", [prog, "--runs", "300", "--json", out] + [os.path.join(fx, m) for m in models], 300)
    rows = load_json(out) or []
    first = {}
    for m in models:
        s.run(f"calls_aoti_cuda_first_{m}", [prog, "--first", os.path.join(fx, m)], 30)
        first[m] = last_json(os.path.join(s.logs, f"calls_aoti_cuda_first_{m}.log"))
    return {"rows": rows, "first": first}


def phase2_calls(s: Steps, a, results):
    w = a.work
    index = load_json(os.path.join(w, "call_aoti", "index.json")) or []
    fixtures = [(r["model"], r["method"]) for r in index] or fixture_rows(a.fixture_models)
    results["calls"]["aoti_cuda_modes"] = aoti_cuda_call_modes(s, a, fixtures)
    results["calls"]["aoti_cuda"] = aoti_cuda_bench(s, a, fixtures)
    results["calls"]["pytorch"] = s.run("calls_pytorch", [PY, CALL_PEERS, "measure", "--runs", "200"] + fixture_flag(a),
                                        200)
    runner = os.path.join(w, "runner", "aoti_runner")
    rows = []
    for rec in index if "libtorch" in a.peers else []:
        if "package" not in rec:
            rows.append(rec)
            continue
        cmd = [runner, "call", rec["package"], "--runs", "200"]
        for spec in rec["inputs"]:
            cmd += ["--input", spec]
        r = s.run(f"calls_libtorch_{rec['model']}.{rec['method']}", cmd, 60) or {"error": "no result"}
        rows.append({"model": rec["model"], "method": rec["method"], "compile_s": rec.get("compile_s"), **r})
    results["calls"]["libtorch_aoti"] = rows


def fixture_flag(a):
    return ["--models", a.fixture_models] if a.fixture_models else []


def fixture_rows(only):
    out = subprocess.run([PY, "-c", "import sys; sys.path.insert(0, 'bench/peers'); import call_peers, export_models;"
                          f"print('\\n'.join(f'{{n}} {{m.name}}' for n in call_peers.fixture_models('tests/fixtures', {only!r})"
                          " for m in export_models.REGISTRY[n].build().methods))"],
                         capture_output=True, text=True, cwd=ROOT).stdout
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def machine_info():
    code = ("import torch, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
            "'gpu': torch.cuda.get_device_name(0)}))")
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True).stdout.strip()
    try:
        return json.loads(out)
    except ValueError:
        return {}


def write_outputs(a, s, results):
    results["steps"] = s.status
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    llm = {k: results[k] for k in ("machine", "config", "exports", "runs", "steps", "finished", "params")}
    with open(os.path.join(a.out, "llm_results.json"), "w") as f:
        json.dump(llm, f, indent=1)
    with open(os.path.join(a.out, "calls_results.json"), "w") as f:
        json.dump({"machine": results["machine"], "calls": results["calls"], "finished": results["finished"]}, f, indent=1)
    with open(os.path.join(a.out, "bench_steps.log"), "w") as out:
        for name in sorted(os.listdir(s.logs)):
            if not name.endswith(".log"):
                continue
            with open(os.path.join(s.logs, name), errors="replace") as f:
                text = f.read()
            out.write(f"===== {name} ({len(text)} chars; last 6000)\n{text[-6000:]}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", required=True, help="build folder with examples/generate/generate and tools/aoti_cuda")
    ap.add_argument("--config", default="1b")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--parts", default="llm,int4,compile,fixtures",
                    help="comma list of llm, int4, cublas (bf16 export with cuBLAS GEMMs), fast, int4fast, mix, mixfuse, flash, decodeop, int4decodeop, decodeopu, int4decodeopu, decodeopq, int4decodeopq, decodeopqf, int4decodeopqf (see EXPORTS), "
                         "compile, fixtures")
    ap.add_argument("--budget", type=float, default=540, help="seconds for everything (the call limit is 600)")
    ap.add_argument("--export-timeout", type=float, default=330)
    ap.add_argument("--work", default="/tmp/llm_bench")
    ap.add_argument("--prompt-lens", default="128,512")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fixture-models", help="comma list: only these fixtures (default: every runnable one)")
    ap.add_argument("--fixture-settings", choices=["et", "default"], default="et",
                    help="Inductor settings of the libtorch fixture packages: ExecuTorch's (max_autotune) or AOTI's")
    ap.add_argument("--exclusive-export", action="store_true",
                    help="phase 1: the ExecuTorch exports first, alone (their autotuning sees no other GPU work)")
    ap.add_argument("--peers", default="libtorch,eager",
                    help="comma list of peers besides torch.compile (part 'compile'): libtorch, eager")
    ap.add_argument("--exports", help="comma list of the ExecuTorch exports to make (bf16,int4,bf16cublas; default: "
                                      "those the parts need); e.g. int4 alone when the bf16 numbers come from "
                                      "another job")
    ap.add_argument("--cache-ab", action="store_true",
                    help="also run each export with AOTI_CUDA_BLOCK_CACHE_MIB=0 (no block cache; run aoti_cuda_<name>_nocache)")
    ap.add_argument("--graph-ab", action="store_true",
                    help="also run each export with --no-graphs (aoti_cuda_<export>_nographs) and the libtorch runner with "
                         "its decode step in a CUDA graph (libtorch_aoti_graph)")
    ap.add_argument("--gemv-ab", action="store_true",
                    help="also run each export with cuBLAS GEMMs with AOTI_CUDA_GEMV_MAX_ROWS=0 (every GEMM on cuBLAS; "
                         "run aoti_cuda_<export>_nogemv) and =8 (the few-row kernels up to 8 rows; _gemv8)")
    ap.add_argument("--stage", choices=["all", "prepare", "measure"], default="all",
                    help="prepare: only phase 1 (exports, packages, builds); measure: only phase 2, reusing WORK")
    a = ap.parse_args(argv)
    a.parts = set(a.parts.split(","))
    a.peers = set(p for p in a.peers.split(",") if p)
    a.exports = None if a.exports is None else set(x for x in a.exports.split(",") if x)
    a.build = os.path.abspath(a.build)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    s = Steps(a.work, time.time() + a.budget)
    cfg_flags = ["--config", a.config] + (["--layers", str(a.layers)] if a.layers else [])
    results = {"machine": machine_info(), "config": {"name": a.config, "layers": a.layers, "parts": sorted(a.parts)},
               "params": vars(a).copy(), "exports": {}, "runs": {}, "calls": {}}
    results["params"]["parts"] = sorted(a.parts)
    results["params"]["peers"] = sorted(a.peers)
    results["params"]["exports"] = None if a.exports is None else sorted(a.exports)
    try:
        if a.stage in ("all", "prepare"):
            phase1(s, a, cfg_flags)
            for quant in EXPORTS:  # export times, even when nothing is measured
                results["exports"][quant] = load_json(os.path.join(a.work, quant, "manifest.json"))
        results["runs"]["compile_warm"] = s.json_of("compile_warm")  # also left by an earlier prepare
        if a.stage == "prepare":
            return 0
        if a.parts & ({part for part, _flags in EXPORTS.values()} | {"compile"}):  # an export's part, or compile
            phase2_llm(s, a, cfg_flags, results)
        if "fixtures" in a.parts:
            phase2_calls(s, a, results)
    finally:
        for name, (proc, *_rest) in list(s.running.items()):
            os.killpg(proc.pid, 9)
        write_outputs(a, s, results)
    print(json.dumps(s.status, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
