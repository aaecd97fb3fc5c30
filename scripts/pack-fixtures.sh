#!/usr/bin/env bash
# Packs the fixtures' binaries (tests/fixtures/*/*.{pte,ptd,bin}) into
# tests/fixtures.tar.xz after re-exporting them (tools/export), reproducibly:
# sorted names, fixed times and owners. Manifests and import lists stay in git
# as text. The archive is unpacked at configure time (cmake/unpack_fixtures.cmake).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
find tests/fixtures -type f \( -name '*.pte' -o -name '*.ptd' -o -name '*.bin' \) | LC_ALL=C sort |
  tar --mtime=@0 --owner=0 --group=0 --numeric-owner --no-recursion -cf - -T - | xz -9e -T0 > tests/fixtures.tar.xz.tmp
mv tests/fixtures.tar.xz.tmp tests/fixtures.tar.xz
rm -f tests/fixtures/.unpacked  # the next configure re-checks what is on disk against the new archive
ls -l tests/fixtures.tar.xz
