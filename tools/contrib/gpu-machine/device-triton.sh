#!/usr/bin/env bash
# The Triton backend on the GPU machine (docs/benchmarks/serving.md): the bundled
# fixtures through tritonserver, an LLM (the `lm` fixture: prefill/decode with a KV
# cache) as 16 concurrent sequences checked against in-process runs, per-request
# latency against the same call in process with the server's overhead measured on
# an empty model, throughput with 1/4/16 clients, unload/reload cycles under load.
#
# Runs from a carry folder made by tools/contrib/gpu-machine/pack-triton.sh
# (inside a checkout whose tests/fixtures.tar.xz it unpacks):
#   cd .carry/triton && bash device-triton.sh
# Writes results.jsonl, summary.txt and server.log to $OUT (or /tmp/triton-out).
set -uo pipefail
HERE="$(pwd)"
ROOT="$(cd ../.. && pwd)"
OUT="${OUT:-/tmp/triton-out}"
mkdir -p "$OUT"
RES="$OUT/results.jsonl"
: >"$RES"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
t0=$(date +%s.%N)
elapsed() { python3 -c "import time; print(f'{time.time() - $t0:.1f}s')"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/summary.txt"
mkdir -p /tmp/ts /tmp/fx
tar xJf tritonserver.tar.xz -C /tmp/ts && tar xJf "$ROOT/tests/fixtures.tar.xz" -C /tmp/fx || { say "unpack failed"; exit 1; }
FX=/tmp/fx/tests/fixtures
cp -rn "$ROOT"/tests/fixtures/* "$FX"/  # the manifests are tracked beside the archive, not in it
TS=/tmp/ts/tritonserver/bin/tritonserver
export LD_LIBRARY_PATH="$HERE/pack/backends/aoti_cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
REF="$HERE/pack/bin/aoti_cuda_serving_reference"
BENCH="python3 $HERE/serving_bench.py"
say "unpacked ($(elapsed))"

# ---- the model repository ----
R=/tmp/repo
rm -rf "$R"
model() {  # model NAME PTE CONFIG...
  local name="$1" pte="$2"; shift 2
  mkdir -p "$R/$name/1"
  cp "$pte" "$R/$name/1/model.pte"
  cp "$(dirname "$pte")/aoti_cuda_blob.ptd" "$R/$name/1/"
  printf 'backend: "aoti_cuda"\n%s\n' "$*" >"$R/$name/config.pbtxt"
}
GPU='instance_group [{ kind: KIND_GPU count: 1 }]'
FIXTURES=""
for d in "$FX"/*/; do
  f="$(basename "$d")"
  pte="$(ls "$d"*.pte 2>/dev/null | head -1)"
  [[ -n "$pte" ]] || continue
  model "$f" "$pte" "$GPU"
  [[ "$f" == partial ]] || FIXTURES="$FIXTURES $f"
done
# The small model of the latency and throughput figures: mlp with CUDA graphs, 4 instances.
model mlp_graphs "$FX/mlp/mlp.pte" 'instance_group [{ kind: KIND_GPU count: 4 }]
parameters [{ key: "cuda_graphs" value: { string_value: "true" } }]'
# The empty model: the fake CPU "affine" program (32 multiply-adds on the host).
model empty "$HERE/pack/fake/affine/affine.pte" 'instance_group [{ kind: KIND_CPU count: 4 }]'
# The LLM: prefill/decode over one KV cache (share_state all), one Session per sequence.
model llm "$FX/lm/lm.pte" "$GPU"'
parameters [{ key: "share_state" value: { string_value: "all" } }]
sequence_batching { max_sequence_idle_microseconds: 5000000 oldest { max_candidate_sequences: 16 } }'

start_server() {  # start_server [LD_PRELOAD value]
  env ${1:+LD_PRELOAD=$1} "$TS" --model-repository="$R" --backend-directory="$HERE/pack/backends" \
    --model-control-mode=explicit --load-model='*' --exit-on-error=false --strict-readiness=false \
    --http-port=8000 --grpc-port=8001 --metrics-port=8002 >>"$OUT/server.log" 2>&1 &
  SERVER=$!
  python3 - <<'EOF'
import http.client, os, time
deadline = time.time() + 60
while time.time() < deadline:
    try:
        c = http.client.HTTPConnection("127.0.0.1", 8000, timeout=2)
        c.request("GET", f"/v2/models/{os.environ.get('READY_MODEL', 'mlp_graphs')}/ready"); r = c.getresponse(); r.read()
        if r.status == 200:
            break
    except OSError:
        pass
    time.sleep(0.2)
EOF
}
stop_server() {
  kill -INT "$SERVER" 2>/dev/null
  wait "$SERVER"
  say "tritonserver exit status after SIGINT: $?"
}

start_server
say "server started ($(elapsed))"
if ! $BENCH latency 8000 mlp_graphs 5 >/dev/null 2>"$OUT/first_call.err"; then
  # Fallback: the model libraries' cuda* imports resolve to the first libcudart in the
  # global scope, which is the server's own (12.x); preload ours instead.
  say "first mlp request failed: $(tail -c 400 "$OUT/first_call.err"); retrying with LD_PRELOAD of our libcudart"
  stop_server
  CUDART="$(ldd "$HERE/pack/backends/aoti_cuda/libaoti_cuda.so.0" | awk '/libcudart/ {print $3}')"
  start_server "$CUDART"
  say "server restarted with LD_PRELOAD=$CUDART ($(elapsed))"
fi
grep -E "failed to load|aoti_cuda: loaded" "$OUT/server.log" | cut -c1-400 >>"$OUT/summary.txt"

# ---- the fixtures through the server ----
python3 - "$R" "$REF" $FIXTURES >"$OUT/names.json" <<'EOF'
import json, subprocess, sys
repo, ref, models = sys.argv[1], sys.argv[2], sys.argv[3:]
r = subprocess.run([ref, "names"] + [f"{repo}/{m}/1/model.pte" for m in models], capture_output=True, text=True)
got = json.loads(r.stdout) if r.returncode == 0 else {}
print(json.dumps({m: got[f"{repo}/{m}/1/model.pte"] for m in models
                  if "error" not in got.get(f"{repo}/{m}/1/model.pte", {"error": 1})}))
EOF
OK_FIXTURES="$(python3 -c "import json; print(' '.join(json.load(open('$OUT/names.json'))))")"
$BENCH fixtures 8000 "$FX" "$OUT/names.json" $OK_FIXTURES | tee -a "$RES"
say "fixtures done ($(elapsed))"

# ---- latency: through the server vs in process ----
"$REF" latency "$R/mlp_graphs/1/model.pte" forward 5000 --graphs | tee -a "$RES"
"$REF" latency "$R/empty/1/model.pte" forward 5000 --cpu | tee -a "$RES"
$BENCH latency 8000 mlp_graphs 5000 | tee -a "$RES"
$BENCH latency 8000 empty 5000 | tee -a "$RES"
"$REF" latency "$R/mlp/1/model.pte" forward 3000 | tee -a "$RES"
$BENCH latency 8000 mlp 3000 | tee -a "$RES"
say "latency done ($(elapsed))"

# ---- throughput ----
$BENCH throughput 8000 mlp_graphs 3 1 4 16 | tee -a "$RES"
$BENCH throughput 8000 empty 1 1 4 16 | tee -a "$RES"
say "throughput done ($(elapsed))"

# ---- the LLM: 16 concurrent sequences vs their in-process runs ----
# The lm fixture holds 16 positions: an 8-token prompt, then 7 decode steps.
"$REF" llm "$R/llm/1/model.pte" 16 7 >"$OUT/llm_reference.json" && $BENCH llm 8000 llm "$OUT/llm_reference.json" 7 | tee -a "$RES"
say "llm done ($(elapsed))"

# ---- unload while requests are in flight, reload; device memory before and after ----
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/device memory before reload cycles: /' | tee -a "$OUT/summary.txt"
$BENCH reload 8000 mlp_graphs 5 | tee -a "$RES"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/device memory after reload cycles: /' | tee -a "$OUT/summary.txt"
stop_server
say "all done ($(elapsed))"
