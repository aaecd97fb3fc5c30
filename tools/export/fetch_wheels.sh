#!/usr/bin/env bash
# Downloads the Python wheels the exporter needs on the GPU machine (which has
# torch 2.11 but no internet) into .whl/ at the repo root, and trims the
# executorch wheel to what `exir` + the CUDA backend import, so that the
# wheels plus the repository stay under the device tool's 64 MiB transfer limit.
#
#   tools/export/fetch_wheels.sh        # run on a machine that reaches PyPI
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$ROOT/.whl"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$TMP" executorch==1.2.0 flatbuffers==25.12.19 ruamel.yaml==0.19.1 tabulate==0.10.0 torchao==0.17.0
mkdir -p "$DEST"
cp "$TMP"/*.whl "$DEST"/
# Other backends, on-device runners and test trees are never imported by the
# CUDA export path; dropping them takes the wheel from ~20 MB to ~7 MB.
python3 - "$TMP"/executorch-*.whl "$DEST" <<'PY'
import os, re, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
out = os.path.join(dest, os.path.basename(src))
drop = re.compile(r'^executorch/(backends/(qualcomm|apple|arm|mediatek|samsung|nxp|vulkan|openvino|cadence)'
                  r'|extension/(training|llm/runner)|.*/tests?/|examples/)')
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out + '.tmp', 'w', zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
    for info in zin.infolist():
        if not drop.match(info.filename):
            zout.writestr(info, zin.read(info.filename), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
os.replace(out + '.tmp', out)
PY
du -sh "$DEST"/*.whl
