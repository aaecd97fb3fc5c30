#!/usr/bin/env bash
# Export the reference models on a GPU machine and pack them for the trip back.
#
#   bash tools/export/run_on_device.sh OUT_DIR [MODELS] [JOBS] [BUDGET_S]
#
#   OUT_DIR   where the results go (on the lent GPU machine: "$OUT")
#   MODELS    comma list, "default" (all but the optional ones) or "all"      [default]
#   JOBS      models exported at once, each in its own process                 [4]
#   BUDGET_S  seconds for the exporter; no model starts later and running
#             ones are killed, so packing still happens within the call limit  [450]
#
# Needs: python3 with torch (CUDA) + triton, a GPU, and the wheels in <repo>/.whl
# (executorch 1.2.0 + flatbuffers, ruamel.yaml, tabulate; see tools/export/README.md).
#
# Writes to OUT_DIR (at most 8 files, each < 16 MiB, as the device tool returns):
#   export.log                  the exporter's progress and summary table
#   models.tar.xz.part-aa ...   the model folders, xz-compressed (gzip: .tar.gz.part-*, if the
#                               machine has no xz) and split at 15 MiB; unpack with
#                               cat models.tar.xz.part-* | tar -xJ -C DEST   (gzip: tar -xz)
set -uo pipefail

OUT_DIR=${1:?usage: run_on_device.sh OUT_DIR [MODELS] [JOBS] [BUDGET_S]}
MODELS=${2:-default}
JOBS=${3:-4}
BUDGET=${4:-450}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SITE=${AOTI_EXPORT_SITE:-/tmp/site}
WORK=${AOTI_EXPORT_WORK:-/tmp/aoti_export}
# Extra exporter flags, for testing this script without a GPU:
#   AOTI_EXPORT_EXTRA_ARGS="--device cpu --stub-backend some.so"
EXTRA_ARGS=${AOTI_EXPORT_EXTRA_ARGS:-}
mkdir -p "$OUT_DIR"

main() {
export PYTHONUNBUFFERED=1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c 'import executorch.exir' >/dev/null 2>&1; then
    echo "installing wheels from $REPO/.whl into $SITE"
    ls -l "$REPO"/.whl/*.whl || { echo "error: no wheels in $REPO/.whl (carry .whl)"; return 3; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$REPO"/.whl/*.whl || return 3
fi
# The .ptd writer runs flatc; pip --target leaves the console script off PATH.
export FLATC_EXECUTABLE="$SITE/executorch/data/bin/flatc"
chmod +x "$FLATC_EXECUTABLE" 2>/dev/null || true
# Caches inside the (git-ignored) repo .cache: a warm machine keeps them between calls, which
# makes a re-run skip most of the Triton autotuning and compilation.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$REPO/.cache/inductor}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$REPO/.cache/triton}
mkdir -p "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR"

date -u
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
python3 - <<'EOF'
import torch, triton
from executorch.version import __version__ as et
print(f"torch {torch.__version__} CUDA {torch.version.cuda} triton {triton.__version__} executorch {et} "
      f"gpu {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NONE'}")
EOF

rm -rf "$WORK"
mkdir -p "$WORK"
python3 "$REPO/tools/export/export_models.py" --out "$WORK/models" --models "$MODELS" \
    --jobs "$JOBS" --time-budget "$BUDGET" $EXTRA_ARGS
rc=$?

# Pack every finished model, the per-model logs and any failed attempt (xz if present, else gzip).
if command -v xz >/dev/null 2>&1; then ext=xz; compress="xz -T0 -6"; else ext=gz; compress="gzip -6"; fi
PACK="$WORK/models.tar.$ext"
( cd "$WORK" && tar -cf - models | $compress > "$PACK" )
size=$(stat -c %s "$PACK")
echo "packed $(du -sh "$WORK/models" | cut -f1) into $((size / 1024 / 1024)) MiB"
if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
    echo "warning: more than 60 MiB packed; the device tool returns at most 64 MiB: export fewer models per call"
fi
split -b 15m -a 2 "$PACK" "$OUT_DIR/models.tar.$ext.part-"
ls -l "$OUT_DIR"
date -u
echo "exporter exit code: $rc"
return $rc
}

main 2>&1 | tee "$OUT_DIR/export.log"
exit "${PIPESTATUS[0]}"
