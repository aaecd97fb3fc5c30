#!/usr/bin/env bash
# Packs a build folder made on this machine for the GPU machine: every
# executable and shared library, stripped, in the same layout, plus
# CMakeCache.txt (tools/contrib/gpu-machine/device-suite.sh reads the configured paths from it).
# A stripped RelWithDebInfo build is ~10 MB instead of ~170 MB.
#
#   tools/contrib/gpu-machine/device-pack.sh BUILD_DIR DEST_DIR
set -euo pipefail
BUILD="$(cd "$1" && pwd)"
mkdir -p "$2"; DEST="$(cd "$2" && pwd)"
rm -rf "$DEST"; mkdir -p "$DEST"
cp "$BUILD/CMakeCache.txt" "$DEST/"
cd "$BUILD"
# Not needed there: the install test's tree and the fuzz replay drivers (CPU-only checks).
find . \( -path '*/CMakeFiles' -o -path './install_consumer' -o -name 'aoti_cuda_fuzz_replay_*' \) -prune -o \( -type f \( -perm -u+x -o -name '*.so*' \) -print \) | while read -r f; do
  mkdir -p "$DEST/$(dirname "$f")"
  if file -b "$f" | grep -q ELF; then strip -o "$DEST/$f" "$f"; else cp -p "$f" "$DEST/$f"; fi
done
find . \( -path '*/CMakeFiles' -o -path './install_consumer' \) -prune -o \( -type l -print \) | while read -r l; do
  mkdir -p "$DEST/$(dirname "$l")"; cp -P "$l" "$DEST/$l"
done
du -sh "$DEST"
