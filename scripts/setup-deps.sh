#!/usr/bin/env bash
# Installs the build dependencies of aoti_cuda on Debian/Ubuntu when missing.
# Needs root (or sudo) only when something is missing. The CUDA toolkit
# (cudart + headers) must already be installed; see README "Quick start".
set -euo pipefail

# clang-14 + libclang-rt-14-dev: the libFuzzer targets the test command runs (tests/fuzz).
# python3-venv: the Python package is built and tested in a virtual environment (scripts/setup-python.sh).
packages=(cmake ninja-build g++ ccache binutils python3 python3-venv flatbuffers-compiler libflatbuffers-dev doctest-dev nlohmann-json3-dev libdlpack-dev libcli11-dev clang-14 libclang-rt-14-dev xz-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ -z "${CUDAToolkit_ROOT:-}" ]] && ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-12; do
    if [[ -x "$d/bin/nvcc" ]]; then export PATH="$d/bin:$PATH"; break; fi
  done
fi
if ! command -v nvcc >/dev/null 2>&1 && [[ -z "${CUDAToolkit_ROOT:-}" ]]; then
  echo "[setup] error: the CUDA toolkit (nvcc, cudart) was not found; install it (e.g. /usr/local/cuda) or set CUDAToolkit_ROOT" >&2
  exit 1
fi
echo "[setup] dependencies present"
