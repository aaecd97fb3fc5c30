# Sourced by the setup-*.sh scripts that make a test environment: ensure_venv DIR makes a virtual environment at DIR
# unless one is there, and sets PY to its python. Messages go to stderr: those scripts print PY alone on stdout.
ensure_venv() {
  local venv=$1
  if [[ ! -x "$venv/bin/python" ]]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2
  fi
  PY="$venv/bin/python"
}
