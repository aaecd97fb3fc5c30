# Sourced by the scripts: common build settings.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/aoti_cuda-ccache}"
# One cache for every checkout beside this one (git worktrees), paths made relative.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$ROOT")}"
for d in /usr/local/cuda /usr/local/cuda-13.0; do
  if [[ -x "$d/bin/nvcc" ]] && ! command -v nvcc >/dev/null 2>&1; then export PATH="$d/bin:$PATH"; fi
done
JOBS="${JOBS:-$(nproc)}"
configure() {  # configure <build-dir> [cmake args...]
  local dir="$1"; shift
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
}
