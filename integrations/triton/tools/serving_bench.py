"""The client side of the serving benchmark (docs/benchmarks/serving.md), run by
tools/contrib/gpu-machine/device-triton.sh against a running tritonserver with
the aoti_cuda backend. Needs only Python 3 and numpy: it speaks Triton's HTTP/REST
protocol (KServe v2) with the binary tensor extension over http.client, so no
client library has to travel to the GPU machine.

    python3 serving_bench.py fixtures PORT FIXTURE_DIR NAMES_JSON MODEL...
    python3 serving_bench.py latency PORT MODEL RUNS
    python3 serving_bench.py throughput PORT MODEL SECONDS CLIENTS...
    python3 serving_bench.py llm PORT MODEL REFERENCE_JSON STEPS
    python3 serving_bench.py reload PORT MODEL CYCLES   (server in explicit model-control mode)

Each prints one JSON document on its last line.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import sys
import threading
import time
from pathlib import Path

import numpy as np

DTYPES = {  # manifest dtype -> (Triton datatype, numpy dtype of the raw bytes)
    "float32": ("FP32", np.float32), "float16": ("FP16", np.float16), "bfloat16": ("BF16", np.uint16),
    "float64": ("FP64", np.float64), "int64": ("INT64", np.int64), "int32": ("INT32", np.int32),
    "int16": ("INT16", np.int16), "int8": ("INT8", np.int8), "uint8": ("UINT8", np.uint8), "bool": ("BOOL", np.bool_),
}
CONFIG_TYPES = {"TYPE_" + v[0]: (v[0], v[1]) for v in DTYPES.values()}
NP_OF = {v[0]: v[1] for v in DTYPES.values()}


class Client:
    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, path: str):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        return r.status, (json.loads(body) if body else None)

    def infer(self, model: str, inputs: list[tuple[str, str, np.ndarray]], outputs: list[str] | None = None,
              parameters: dict | None = None) -> dict[str, np.ndarray]:
        """inputs: (name, Triton datatype, array of its raw elements). Raises RuntimeError with the server's message."""
        head = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": dt,
                            "parameters": {"binary_data_size": a.nbytes}} for n, dt, a in inputs]}
        if outputs:
            head["outputs"] = [{"name": o, "parameters": {"binary_data": True}} for o in outputs]
        else:
            head["parameters"] = {"binary_data_output": True}
        if parameters:
            head.setdefault("parameters", {}).update(parameters)
        hj = json.dumps(head).encode()
        body = hj + b"".join(np.ascontiguousarray(a).tobytes() for _, _, a in inputs)
        self.conn.request("POST", f"/v2/models/{model}/infer", body=body,
                          headers={"Inference-Header-Content-Length": str(len(hj)),
                                   "Content-Type": "application/octet-stream"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(json.loads(data).get("error", data.decode(errors="replace")))
        hl = int(r.getheader("Inference-Header-Content-Length", len(data)))
        resp = json.loads(data[:hl])
        out, off = {}, hl
        for o in resp["outputs"]:
            size = o["parameters"]["binary_data_size"]
            out[o["name"]] = np.frombuffer(data[off:off + size], dtype=NP_OF[o["datatype"]]).reshape(o["shape"])
            off += size
        return out


def as_float(a: np.ndarray, dt: str) -> np.ndarray:
    if dt == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64 if a.dtype != np.bool_ else np.float64)


def fixtures(port: int, fixture_dir: Path, names: dict, models: list[str]) -> dict:
    """Each fixture's manifest inputs through the server, outputs compared with its reference files."""
    c = Client(port)
    results = {}
    for model in models:
        manifest = json.loads((fixture_dir / model / "manifest.json").read_text())
        res = results[model] = {}
        for method, case in manifest["methods"].items():
            try:
                ins = []
                for i, spec in enumerate(case["inputs"]):
                    dt, npt = DTYPES[spec["dtype"]]
                    a = np.fromfile(fixture_dir / model / spec["file"], dtype=npt).reshape(spec["shape"])
                    ins.append((names[model][method]["inputs"][i], dt, a))
                out = c.infer(model, ins, parameters={"method": method})
                worst = 0.0
                for j, spec in enumerate(case["outputs"]):
                    dt, npt = DTYPES[spec["dtype"]]
                    want = as_float(np.fromfile(fixture_dir / model / spec["file"], dtype=npt).reshape(spec["shape"]), dt)
                    got = as_float(out[names[model][method]["outputs"][j]], dt)
                    tol = spec.get("atol", 1e-4) + spec.get("rtol", 1e-4) * np.abs(want)
                    if got.shape != want.shape:
                        raise RuntimeError(f"output {j}: shape {got.shape}, expected {want.shape}")
                    bad = np.abs(got - want) > tol
                    worst = max(worst, float(np.max(np.abs(got - want))) if want.size else 0.0)
                    if bad.any():
                        raise RuntimeError(f"output {j}: {int(bad.sum())} of {bad.size} elements beyond tolerance, max error {worst:g}")
                res[method] = {"ok": True, "max_abs_err": worst}
            except Exception as e:  # noqa: BLE001
                res[method] = {"ok": False, "error": str(e)[:300]}
    return results


def random_inputs(c: Client, model: str) -> list:
    _, cfg = c.get(f"/v2/models/{model}/config")
    rng = np.random.default_rng(0)
    ins = []
    for t in cfg["input"]:
        if t.get("optional"):
            continue
        dt, npt = CONFIG_TYPES[t["data_type"]]
        shape = [d if d > 0 else 1 for d in t["dims"]]
        a = (rng.integers(0, 8, size=shape)).astype(npt)
        ins.append((t["name"], dt, a))
    return ins


def stats(c: Client, model: str) -> dict:
    _, s = c.get(f"/v2/models/{model}/stats")
    st = s["model_stats"][0]["inference_stats"]
    return {k: (int(st[k]["count"]), int(st[k]["ns"])) for k in ("success", "queue", "compute_input", "compute_infer", "compute_output")}


def latency(port: int, model: str, runs: int) -> dict:
    c = Client(port)
    ins = random_inputs(c, model)
    for _ in range(100):
        c.infer(model, ins)
    before = stats(c, model)
    us = []
    for _ in range(runs):
        t0 = time.perf_counter()
        c.infer(model, ins)
        us.append((time.perf_counter() - t0) * 1e6)
    after = stats(c, model)
    n = after["success"][0] - before["success"][0]
    server = {k: (after[k][1] - before[k][1]) / 1e3 / max(n, 1) for k in after}  # mean us per request
    us.sort()
    return {"model": model, "runs": runs, "client_p50_us": us[runs // 2], "client_p90_us": us[runs * 9 // 10],
            "client_mean_us": sum(us) / runs, "server_mean_us": server}


def _load(args):
    port, model, seconds, start = args
    c = Client(port)
    ins = random_inputs(c, model)
    c.infer(model, ins)
    while time.time() < start:
        time.sleep(0.001)
    n, lat = 0, []
    end = start + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        c.infer(model, ins)
        lat.append(time.perf_counter() - t0)
        n += 1
    return n, lat


def throughput(port: int, model: str, seconds: float, clients: list[int]) -> dict:
    out = {}
    for k in clients:
        start = time.time() + 0.5
        with multiprocessing.get_context("fork").Pool(k) as pool:
            res = pool.map(_load, [(port, model, seconds, start)] * k)
        total = sum(r[0] for r in res)
        lat = sorted(x for r in res for x in r[1])
        out[str(k)] = {"requests_per_s": total / seconds, "p50_us": lat[len(lat) // 2] * 1e6 if lat else None}
    return {"model": model, "seconds": seconds, "clients": out}


def llm(port: int, model: str, reference: dict, steps: int) -> dict:
    """Every reference sequence through the server at once (one thread and connection each): prefill with
    START, then decode calls, END on the last; the generated tokens must equal the in-process ones."""
    names = reference["methods"]
    prompt_len, vocab = reference["prompt_len"], reference["vocab"]
    results, errors = {}, []
    t_start = time.perf_counter()

    def run(s: int):
        try:
            c = Client(port)
            sid = 1000 + s
            tokens = np.array([(7 * s + 3 * i) % vocab for i in range(prompt_len)], np.int64)
            out = c.infer(model, [(names["prefill"]["inputs"][0], "INT64", tokens)],
                          parameters={"method": "prefill", "sequence_id": sid, "sequence_start": True})
            logits = out[names["prefill"]["outputs"][0]].astype(np.float32)
            nxt = int(np.argmax(logits[prompt_len - 1]))
            gen = [nxt]
            for k in range(steps):
                out = c.infer(model, [(names["decode"]["inputs"][0], "INT64", np.array([nxt], np.int64)),
                                      (names["decode"]["inputs"][1], "INT64", np.array([prompt_len + k], np.int64))],
                              parameters={"method": "decode", "sequence_id": sid, "sequence_end": k == steps - 1})
                nxt = int(np.argmax(out[names["decode"]["outputs"][0]].reshape(-1)))
                gen.append(nxt)
            results[str(s)] = gen
        except Exception as e:  # noqa: BLE001
            errors.append(f"sequence {s}: {e}")

    seqs = sorted(int(k) for k in reference["tokens"])
    threads = [threading.Thread(target=run, args=(s,)) for s in seqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t_start
    match = [s for s in seqs if results.get(str(s)) == reference["tokens"][str(s)]]
    distinct = len({tuple(v) for v in reference["tokens"].values()})
    return {"sequences": len(seqs), "steps": steps, "matching_in_process": len(match), "errors": errors[:5],
            "distinct_reference_sequences": distinct, "wall_s": wall,
            "tokens_per_s": len(seqs) * (steps + 1) / wall, "first_mismatch": next(
                ({"seq": s, "server": results.get(str(s)), "in_process": reference["tokens"][str(s)]}
                 for s in seqs if s not in match), None)}


def reload(port: int, model: str, cycles: int) -> dict:
    """Unloads the model while 8 clients keep sending requests, waits until it is gone, loads it again and
    checks a request; the server must stay up and every answered request must be right."""
    c = Client(port)
    ins = random_inputs(c, model)
    want = c.infer(model, ins)
    counts = {"ok": 0, "refused": 0, "wrong": 0}
    lock = threading.Lock()
    for _ in range(cycles):
        stop = threading.Event()

        def load_loop():
            cc = Client(port)
            while not stop.is_set():
                try:
                    out = cc.infer(model, ins)
                    key = "ok" if all(np.array_equal(out[k], want[k]) for k in want) else "wrong"
                except (RuntimeError, OSError, http.client.HTTPException):
                    key = "refused"
                    cc = Client(port)
                with lock:
                    counts[key] += 1

        threads = [threading.Thread(target=load_loop) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        c.conn.request("POST", f"/v2/repository/models/{model}/unload", body=b"{}")
        r = c.conn.getresponse(); r.read()
        deadline = time.time() + 20
        while time.time() < deadline and c.get(f"/v2/models/{model}/ready")[0] == 200:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join()
        c.conn.request("POST", f"/v2/repository/models/{model}/load", body=b"{}")
        r = c.conn.getresponse(); r.read()
        out = c.infer(model, ins)
        if not all(np.array_equal(out[k], want[k]) for k in want):
            counts["wrong"] += 1
    return {"model": model, "cycles": cycles, "requests": counts}


def main(argv: list[str]) -> None:
    cmd, port = argv[1], int(argv[2])
    if cmd == "fixtures":
        r = fixtures(port, Path(argv[3]), json.loads(Path(argv[4]).read_text()), argv[5:])
    elif cmd == "latency":
        r = latency(port, argv[3], int(argv[4]))
    elif cmd == "throughput":
        r = throughput(port, argv[3], float(argv[4]), [int(x) for x in argv[5:]])
    elif cmd == "llm":
        r = llm(port, argv[3], json.loads(Path(argv[4]).read_text()), int(argv[5]))
    elif cmd == "reload":
        r = reload(port, argv[3], int(argv[4]))
    else:
        raise SystemExit(__doc__)
    print(json.dumps(r))


if __name__ == "__main__":
    main(sys.argv)
