"""The aoti_cuda Triton backend behind the real server (CPU only).

Starts `tritonserver` (from the nvidia-pytriton 0.7.0 wheel, see scripts/setup-triton.sh) with
libtriton_aoti_cuda.so from a CMake build (AOTI_CUDA_BUILD_TRITON=ON, with tests) and serves the fake
CPU programs of tests/python/fake_programs.cpp (Device::cpu, no GPU needed), then talks to it with
tritonclient over HTTP and gRPC: load, infer, bad requests, two interleaved sequences, idle release,
unload and reload with requests in flight, load failures, metrics, dynamic batching.

Environment: AOTI_CUDA_TEST_BUILD (the build folder), TRITONSERVER (optional: the server binary;
default: the one in the installed nvidia-pytriton package).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

tritonclient = pytest.importorskip("tritonclient")
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
AFFINE_W = np.array([0.5, 1.0, 2.0, -1.0], dtype=np.float32)
STATE_INIT = np.arange(1, 17, dtype=np.float32).reshape(4, 4)  # the fake "kv" cache's initial bytes
IDLE_US = 1_000_000  # the state model's max_sequence_idle_microseconds


def _server_binary() -> Path | None:
    if os.environ.get("TRITONSERVER"):
        return Path(os.environ["TRITONSERVER"])
    spec = importlib.util.find_spec("pytriton")  # does not import the package
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "tritonserver" / "bin" / "tritonserver"
    return path if path.exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_model(repo: Path, name: str, program: Path, config: str, pte_name: str = "model.pte",
                 ptd: Path | None = None) -> None:
    d = repo / name / "1"
    d.mkdir(parents=True)
    shutil.copy(program, d / pte_name)
    shutil.copy(ptd or program.parent / "aoti_cuda_blob.ptd", d / "aoti_cuda_blob.ptd")
    (repo / name / "config.pbtxt").write_text('backend: "aoti_cuda"\n' + config)


CPU = "instance_group [{ kind: KIND_CPU count: 2 }]\n"  # the fake libraries run on the CPU only


class Server:
    def __init__(self, tmp: Path):
        build = os.environ.get("AOTI_CUDA_TEST_BUILD")
        if not build:
            pytest.skip("Triton tests SKIPPED: AOTI_CUDA_TEST_BUILD is not set (a CMake build with tests and "
                        "AOTI_CUDA_BUILD_TRITON=ON)")
        build = Path(build)
        backend = build / "triton" / "backends" / "aoti_cuda" / "libtriton_aoti_cuda.so"
        binary = _server_binary()
        if binary is None:
            pytest.skip("Triton tests SKIPPED: no tritonserver (pip install --no-deps nvidia-pytriton==0.7.0, "
                        "see scripts/setup-triton.sh, or set TRITONSERVER)")
        if not backend.exists():
            pytest.skip(f"Triton tests SKIPPED: {backend} is not built (configure with -DAOTI_CUDA_BUILD_TRITON=ON)")
        progs = tmp / "programs"
        subprocess.run([str(build / "tests" / "aoti_cuda_fake_programs"), str(progs)], check=True,
                       stdout=subprocess.DEVNULL)
        affine, state = progs / "affine" / "affine.pte", progs / "state" / "state.pte"
        repo = self.repo = tmp / "repo"
        # Auto-completed configurations.
        _write_model(repo, "affine", affine, CPU)
        _write_model(repo, "state", state, CPU + "sequence_batching { max_sequence_idle_microseconds: "
                     f"{IDLE_US} oldest {{ max_candidate_sequences: 8 }} }}\n")
        # A written configuration, with every parameter.
        _write_model(repo, "written", affine, CPU + """
input [{ name: "a" data_type: TYPE_FP32 dims: [-1, 4] }, { name: "b" data_type: TYPE_FP32 dims: [-1, 4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [-1, 4] }, { name: "y_again" data_type: TYPE_FP32 dims: [-1, 4] }]
parameters [{ key: "methods" value: { string_value: "forward" } },
            { key: "cuda_graphs" value: { string_value: "false" } },
            { key: "num_models" value: { string_value: "3" } },
            { key: "share_state" value: { string_value: "none" } },
            { key: "pte" value: { string_value: "prog.pte" } }]
""", pte_name="prog.pte")
        # Models that must fail to load, each with a message saying why.
        broken = tmp / "broken.ptd"  # the .ptd cut in half
        data = (progs / "affine" / "aoti_cuda_blob.ptd").read_bytes()
        broken.write_bytes(data[: len(data) // 2])
        _write_model(repo, "wrong_ptd", affine, CPU, ptd=broken)
        _write_model(repo, "bad_param", affine, CPU + 'parameters [{ key: "graphs" value: { string_value: "1" } }]\n')
        _write_model(repo, "wrong_type", affine, CPU + """
input [{ name: "a" data_type: TYPE_INT32 dims: [-1, 4] }, { name: "b" data_type: TYPE_FP32 dims: [-1, 4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [-1, 4] }, { name: "y_again" data_type: TYPE_FP32 dims: [-1, 4] }]
""")
        # Dynamic batching: one instance and a long queue delay, so concurrent requests meet in one batch.
        BATCH_CPU = "instance_group [{ kind: KIND_CPU count: 1 }]\n"
        _write_model(repo, "batched", affine, BATCH_CPU + "max_batch_size: 8\n"
                     "dynamic_batching { max_queue_delay_microseconds: 300000 }\n")
        _write_model(repo, "batched_auto", affine, BATCH_CPU + "dynamic_batching { }\n")  # max_batch_size proposed
        # The state program's forward is f32[2, 4], fixed: no batch dimension.
        _write_model(repo, "unbatchable", state, CPU + "max_batch_size: 2\ndynamic_batching { }\n"
                     'parameters [{ key: "methods" value: { string_value: "forward" } }]\n')
        _write_model(repo, "batch_too_big", affine, CPU + "max_batch_size: 16\ndynamic_batching { }\n")
        mlp = ROOT / "tests" / "fixtures" / "mlp" / "mlp.pte"
        self.have_cuda_program = mlp.exists()
        if self.have_cuda_program:  # a CUDA program on a CPU instance: the SDK refuses it
            _write_model(repo, "cuda_on_cpu", mlp, "instance_group [{ kind: KIND_CPU }]\n")
        self.http_port, self.grpc_port, self.metrics_port = _free_port(), _free_port(), _free_port()
        self.log_path = tmp / "server.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(binary), f"--model-repository={repo}", f"--backend-directory={build / 'triton' / 'backends'}",
             "--model-control-mode=explicit", "--load-model=affine", "--load-model=state", "--load-model=written",
             "--load-model=batched", "--load-model=batched_auto",
             f"--http-port={self.http_port}", f"--grpc-port={self.grpc_port}", f"--metrics-port={self.metrics_port}",
             "--allow-metrics=true", "--allow-gpu-metrics=false", "--exit-timeout-secs=10"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.http = httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}", concurrency=8)
        self.grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"tritonserver exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if self.http.is_server_ready():
                    break
            except Exception:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("tritonserver did not get ready in 60 s:\n" + self.log_text())

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def stop(self) -> int:
        self.http.close()
        self.grpc.close()
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("triton"))
    yield s
    rc = s.stop()
    assert rc == 0, f"tritonserver exited with {rc} at shutdown:\n{s.log_text()[-4000:]}"


def _client_inputs(mod, arrays: dict[str, np.ndarray]):
    out = []
    for name, a in arrays.items():
        dt = {np.float32: "FP32", np.int64: "INT64", np.int32: "INT32"}[a.dtype.type]
        t = mod.InferInput(name, list(a.shape), dt)
        t.set_data_from_numpy(a)
        out.append(t)
    return out


def infer(server, proto: str, model: str, arrays: dict[str, np.ndarray], outputs=None, client=None, **kw):
    """One request; `client` overrides the server's shared client (the HTTP client is not thread-safe)."""
    mod = httpclient if proto == "http" else grpcclient
    client = client or (server.http if proto == "http" else server.grpc)
    req_out = [mod.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, _client_inputs(mod, arrays), outputs=req_out, **kw)


PROTOS = ["http", "grpc"]


# ---- load and configuration ---------------------------------------------------------------

def test_models_ready_and_backend_logged(server):
    for m in ("affine", "state", "written"):
        assert server.http.is_model_ready(m)
        assert server.grpc.is_model_ready(m)
    assert "aoti_cuda backend" in server.log_text()


def test_config_completed_from_method_meta(server):
    cfg = server.http.get_model_config("affine")
    ins = {t["name"]: t for t in cfg["input"]}
    assert set(ins) == {"a", "b"}
    assert ins["a"]["data_type"] == "TYPE_FP32" and ins["a"]["dims"] == [-1, 4]  # dim 0 dynamic up to 8
    assert {t["name"] for t in cfg["output"]} == {"y", "y_again"}
    assert cfg["max_batch_size"] == 0
    st = server.http.get_model_config("state")
    sins = {t["name"]: t for t in st["input"]}
    # forward(a, b), write(x, pos), write_too(x, pos): an input only some methods take is optional.
    assert set(sins) == {"a", "b", "x", "pos"} and all(t.get("optional") for t in sins.values())
    assert sins["pos"]["data_type"] == "TYPE_INT64" and sins["pos"]["dims"] == [1]
    assert sins["x"]["dims"] == [1, 4]
    assert {t["name"] for t in st["output"]} == {"y", "y_again", "sum"}


# ---- inference ----------------------------------------------------------------------------

@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("model", ["affine", "written"])
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_infer(server, proto, model, rows):
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, 4), dtype=np.float32)
    b = rng.standard_normal((rows, 4), dtype=np.float32)
    r = infer(server, proto, model, {"a": a, "b": b})
    np.testing.assert_allclose(r.as_numpy("y"), a * AFFINE_W + b, rtol=1e-6)
    np.testing.assert_allclose(r.as_numpy("y_again"), a * AFFINE_W + b, rtol=1e-6)


@pytest.mark.parametrize("proto", PROTOS)
def test_only_requested_output_is_returned(server, proto):
    a = np.ones((2, 4), np.float32)
    r = infer(server, proto, "affine", {"a": a, "b": a}, outputs=["y_again"])
    np.testing.assert_allclose(r.as_numpy("y_again"), a * AFFINE_W + a)
    assert r.as_numpy("y") is None


@pytest.mark.parametrize("proto", PROTOS)
def test_zero_rows(server, proto):
    z = np.zeros((0, 4), np.float32)
    r = infer(server, proto, "affine", {"a": z, "b": z})
    assert r.as_numpy("y").shape == (0, 4)


# ---- bad requests: an error naming the input; the model keeps serving ----------------------

def _error(fn) -> str:
    with pytest.raises(InferenceServerException) as e:
        fn()
    return str(e.value)


@pytest.mark.parametrize("proto", PROTOS)
def test_bad_requests_name_the_input(server, proto):
    ok = np.ones((2, 4), np.float32)
    # Shape beyond the dynamic bound: the backend's check.
    msg = _error(lambda: infer(server, proto, "affine", {"a": np.ones((9, 4), np.float32), "b": np.ones((9, 4), np.float32)}))
    assert "input 'a'" in msg and "[9, 4]" in msg and "up to [8, 4]" in msg, msg
    # Wrong dtype (Triton checks it against the completed config).
    msg = _error(lambda: infer(server, proto, "affine", {"a": ok.astype(np.int32), "b": ok}))
    assert "'a'" in msg and "INT32" in msg, msg
    # Wrong static dimension.
    msg = _error(lambda: infer(server, proto, "affine", {"a": np.ones((2, 5), np.float32), "b": ok}))
    assert "'a'" in msg, msg
    # Missing input of a single-method model (Triton's check) ...
    msg = _error(lambda: infer(server, proto, "affine", {"a": ok}))
    assert "'b'" in msg or "b" in re.findall(r"\['(\w+)'\]", msg), msg
    # ... and of the method a multi-method model runs (the backend's check).
    msg = _error(lambda: infer(server, proto, "state", {"x": np.ones((1, 4), np.float32)},
                               parameters={"method": "write"}, sequence_id=900, sequence_start=True,
                               sequence_end=True))
    assert "missing input 'pos'" in msg and "'write'" in msg, msg
    # Unknown method.
    msg = _error(lambda: infer(server, proto, "state", {"a": np.ones((2, 4), np.float32), "b": np.ones((2, 4), np.float32)},
                               parameters={"method": "nope"}, sequence_id=901, sequence_start=True, sequence_end=True))
    assert "unknown method 'nope'" in msg and "forward, write, write_too" in msg, msg
    # The model's own failure (the fake library fails when b[0] == -777): the SDK's message.
    bad = ok.copy()
    bad[0, 0] = -777
    msg = _error(lambda: infer(server, proto, "affine", {"a": ok, "b": bad}))
    assert "aoti_cuda (model)" in msg, msg
    # Still serving.
    r = infer(server, proto, "affine", {"a": ok, "b": ok})
    np.testing.assert_allclose(r.as_numpy("y"), ok * AFFINE_W + ok)


# ---- sequences ------------------------------------------------------------------------------

class Sequence:
    """One sequence on the state model: method write(x, pos) sets cache[pos] = x and returns column sums."""

    def __init__(self, server, proto, seq_id, client=None):
        self.server, self.proto, self.id, self.client = server, proto, seq_id, client
        self.cache = STATE_INIT.copy()
        self.started = False

    def write(self, row: int, value: float, end=False):
        x = np.full((1, 4), value, np.float32)
        r = infer(self.server, self.proto, "state", {"x": x, "pos": np.array([row], np.int64)},
                  parameters={"method": "write"}, sequence_id=self.id, sequence_start=not self.started,
                  sequence_end=end, client=self.client)
        self.started = not end
        self.cache[row] = x[0]
        np.testing.assert_allclose(r.as_numpy("sum"), self.cache.sum(0), err_msg=f"sequence {self.id}")


def test_two_interleaved_sequences_keep_their_state_apart(server):
    # One over HTTP, one over gRPC, their requests alternating.
    s1, s2 = Sequence(server, "http", 11), Sequence(server, "grpc", 12)
    for step in range(6):
        s1.write(step % 4, 10.0 + step)
        s2.write((step + 1) % 4, -100.0 * (step + 1))
    s1.write(0, 1.0, end=True)
    s2.write(0, 2.0, end=True)
    # END released the state: a new sequence with the same ID starts from the initial bytes.
    s1 = Sequence(server, "grpc", 11)
    s1.write(3, 7.0, end=True)


def test_start_resets_and_methods_share_nothing(server):
    s = Sequence(server, "http", 21)
    s.write(1, 5.0)
    # START again on a live sequence ID: its state goes back to the initial bytes.
    s.started = False
    s.cache = STATE_INIT.copy()
    s.write(2, 6.0)
    s.write(0, 0.0, end=True)


def test_request_without_start_is_refused(server):
    msg = _error(lambda: infer(server, "http", "state", {"x": np.ones((1, 4), np.float32), "pos": np.array([0])},
                               parameters={"method": "write"}, sequence_id=31))
    assert "START" in msg, msg


def test_idle_sequence_is_released(server):
    s = Sequence(server, "http", 41)
    s.write(0, 3.0)
    time.sleep(2 * IDLE_US / 1e6 + 0.5)  # past Triton's timeout, and the backend's (twice Triton's)
    Sequence(server, "http", 42).write(1, 4.0, end=True)  # any request sweeps idle states
    assert "released the state of sequence 41" in server.log_text()


def test_sixteen_concurrent_sequences(server):
    errors = []

    def run(i):
        try:
            proto = "grpc" if i % 2 else "http"
            client = (grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") if i % 2 else
                      httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}"))
            s = Sequence(server, proto, 1000 + i, client)
            try:
                for step in range(5):
                    s.write((i + step) % 4, float(i * 10 + step))
                s.write(0, 0.0, end=True)
            finally:
                client.close()  # an open HTTP connection holds the server's shutdown for its exit timeout
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---- load failures, unload, reload -------------------------------------------------------

def test_load_failures_carry_the_sdk_message(server):
    msg = _error(lambda: server.http.load_model("wrong_ptd"))
    assert "aoti_cuda (" in msg, msg
    msg = _error(lambda: server.grpc.load_model("bad_param"))
    assert "unknown parameter 'graphs'" in msg, msg
    msg = _error(lambda: server.http.load_model("wrong_type"))
    assert "input 'a'" in msg and "TYPE_INT32" in msg and "TYPE_FP32" in msg, msg
    if server.have_cuda_program:
        msg = _error(lambda: server.http.load_model("cuda_on_cpu"))
        assert "aoti_cuda (" in msg, msg
    assert server.http.is_model_ready("affine")
    ok = np.ones((1, 4), np.float32)
    infer(server, "grpc", "affine", {"a": ok, "b": ok})


def test_unload_with_requests_in_flight_then_reload(server):
    a = np.ones((8, 4), np.float32)
    for cycle in range(3):
        results = []
        reqs = [server.http.async_infer("affine", _client_inputs(httpclient, {"a": a, "b": a})) for _ in range(64)]
        server.http.unload_model("affine")
        for r in reqs:
            try:
                results.append(r.get_result().as_numpy("y"))
            except InferenceServerException as e:
                results.append(e)
        done = [x for x in results if isinstance(x, np.ndarray)]
        for y in done:
            np.testing.assert_allclose(y, a * AFFINE_W + a)
        deadline = time.time() + 20
        while server.http.is_model_ready("affine") and time.time() < deadline:
            time.sleep(0.05)
        assert server.proc.poll() is None, "the server died during unload"
        server.http.load_model("affine")
        assert server.http.is_model_ready("affine")
        r = infer(server, "grpc", "affine", {"a": a, "b": a})
        np.testing.assert_allclose(r.as_numpy("y"), a * AFFINE_W + a)


# ---- metrics --------------------------------------------------------------------------------

def test_metrics(server):
    ok = np.ones((2, 4), np.float32)
    for _ in range(3):
        infer(server, "http", "written", {"a": ok, "b": ok})
    with pytest.raises(InferenceServerException):
        infer(server, "http", "written", {"a": np.ones((9, 4), np.float32), "b": np.ones((9, 4), np.float32)})
    def metric(text, name):  # summed over the other labels (e.g. a failure's reason)
        values = [int(float(v)) for labels, v in re.findall(r"^" + name + r"\{([^}]*)\} (\S+)$", text, re.M)
                  if 'model="written"' in labels]
        assert values, f"{name} for model written not in the metrics:\n{text[:3000]}"
        return sum(values)

    wanted = {"nv_inference_request_success": 3, "nv_inference_request_failure": 1, "nv_inference_exec_count": 3}
    # The server may count a request after its reply has gone out (a CI run of 2026-12-05 read the failure counter
    # at 0 once, right after the failed request), so the counters get a few seconds to catch up.
    deadline = time.monotonic() + 10
    while True:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
        got = {name: metric(text, name) for name in wanted}
        if all(got[name] >= n for name, n in wanted.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(got[name] >= n for name, n in wanted.items()), f"counters {got}, wanted at least {wanted}"
    stats = server.http.get_inference_statistics("written")["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) >= 3
    assert int(stats["inference_stats"]["compute_infer"]["ns"]) > 0


# ---- dynamic batching (max_batch_size > 0) --------------------------------------------------

def test_batching_config_completed(server):
    for model in ("batched", "batched_auto"):
        cfg = server.http.get_model_config(model)
        # The batch dimension is implicit (Triton's convention): dims without it.
        assert cfg["max_batch_size"] == 8, cfg  # batched_auto: proposed, the first-dimension bound of a, b, y
        assert {t["name"]: t["dims"] for t in cfg["input"]} == {"a": [4], "b": [4]}, cfg
        # The program bounds its outputs as a whole (which dims vary is not known): all -1.
        assert {t["name"]: t["dims"] for t in cfg["output"]} == {"y": [-1], "y_again": [-1]}, cfg


def test_batching_load_refusals(server):
    msg = _error(lambda: server.http.load_model("unbatchable"))
    assert "max_batch_size 2" in msg and "input 'a' of method 'forward'" in msg and "no dynamic first dimension" in msg, msg
    msg = _error(lambda: server.grpc.load_model("batch_too_big"))
    assert "max_batch_size 16" in msg and "input 'a'" in msg and "goes up to 8" in msg, msg


def _concurrent(server, proto, model, jobs, delays=None):
    """Runs jobs (arrays, parameters) at once (job i after delays[i] s), each from its own client;
    returns results or exceptions."""
    out = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def run(i):
        mod = httpclient if proto == "http" else grpcclient
        port = server.http_port if proto == "http" else server.grpc_port
        client = mod.InferenceServerClient(f"127.0.0.1:{port}")
        arrays, params = jobs[i]
        barrier.wait()
        if delays:
            time.sleep(delays[i])
        try:
            out[i] = infer(server, proto, model, arrays, client=client, parameters=params)
        except InferenceServerException as e:
            out[i] = e
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def _batch_stats(server, model):
    s = server.http.get_inference_statistics(model)["model_stats"][0]
    sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in s.get("batch_stats", [])}
    return int(s.get("inference_count", 0)), int(s.get("execution_count", 0)), sizes


@pytest.mark.parametrize("proto", PROTOS)
def test_concurrent_requests_are_batched_and_split_in_order(server, proto):
    rows = [1, 2, 1, 3, 1, 2, 1, 1]  # 12 rows: more than one batch of at most 8
    rng = np.random.default_rng(7)
    jobs = [({"a": rng.standard_normal((r, 4), dtype=np.float32), "b": rng.standard_normal((r, 4), dtype=np.float32)}, None)
            for r in rows]
    inf0, exe0, _ = _batch_stats(server, "batched")
    results = _concurrent(server, proto, "batched", jobs)
    for (arrays, _), r in zip(jobs, results):
        assert not isinstance(r, Exception), r
        alone = infer(server, proto, "affine", arrays)  # the same request, run alone (max_batch_size 0)
        np.testing.assert_array_equal(r.as_numpy("y"), alone.as_numpy("y"))
        np.testing.assert_array_equal(r.as_numpy("y_again"), alone.as_numpy("y_again"))
        np.testing.assert_allclose(r.as_numpy("y"), arrays["a"] * AFFINE_W + arrays["b"], rtol=1e-6)
    inf1, exe1, sizes = _batch_stats(server, "batched")
    assert inf1 - inf0 == sum(rows)
    assert exe1 - exe0 < len(rows), (inf0, exe0, inf1, exe1, sizes)  # fewer calls than requests
    assert max(sizes) > 3, sizes  # a batch of several requests' rows
    assert max(sizes) <= 8, sizes


@pytest.mark.parametrize("proto", PROTOS)
def test_malformed_request_in_a_batch_fails_alone(server, proto):
    ok = [np.full((r, 4), i + 1, np.float32) for i, r in enumerate([2, 1, 3, 1])]
    jobs = [({"a": x, "b": x}, None) for x in ok]
    jobs.insert(2, ({"a": ok[0], "b": ok[0]}, {"method": "nope"}))  # unknown method: the backend's own check
    results = _concurrent(server, proto, "batched", jobs)
    assert isinstance(results[2], InferenceServerException), results[2]
    assert "unknown method 'nope'" in str(results[2]), results[2]
    for i, (arrays, _) in enumerate(jobs):
        if i == 2:
            continue
        assert not isinstance(results[i], Exception), results[i]
        np.testing.assert_allclose(results[i].as_numpy("y"), arrays["a"] * AFFINE_W + arrays["b"], rtol=1e-6)
    # Only the outputs asked for, from inside a batch.
    x = np.ones((2, 4), np.float32)
    r = infer(server, proto, "batched", {"a": x, "b": x}, outputs=["y_again"])
    assert r.as_numpy("y") is None
    np.testing.assert_allclose(r.as_numpy("y_again"), x * AFFINE_W + x)


@pytest.mark.parametrize("proto", PROTOS)
def test_model_failure_inside_a_batch(server, proto):
    # The fake library fails the whole call when the first element of the call's b is -777, so the
    # bad request goes first (the others follow within the 300 ms queue delay, in the same batch).
    # Every request of that call gets the SDK's message, with the batch it was in; the model keeps serving.
    xs = [np.full((1, 4), i + 1, np.float32) for i in range(6)]
    bad = xs[0].copy()
    bad[0, 0] = -777
    jobs = [({"a": x, "b": bad if i == 0 else x}, None) for i, x in enumerate(xs)]
    results = _concurrent(server, proto, "batched", jobs, delays=[0] + [0.05] * 5)
    assert isinstance(results[0], InferenceServerException) and "aoti_cuda (model)" in str(results[0]), results[0]
    for i, r in enumerate(results):
        if isinstance(r, Exception):
            assert "aoti_cuda (model)" in str(r) and "in a batch of" in str(r), r
        else:
            np.testing.assert_allclose(r.as_numpy("y"), xs[i] * AFFINE_W + xs[i], rtol=1e-6)
    assert sum(isinstance(r, Exception) for r in results) > 1  # batched with the bad one (300 ms queue delay)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(infer(server, proto, "batched", {"a": x, "b": x}).as_numpy("y"), x * AFFINE_W + x)
