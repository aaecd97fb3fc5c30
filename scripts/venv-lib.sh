# Sourced by the setup-*.sh scripts that make a test environment: ensure_venv DIR makes a virtual environment at DIR
# unless one is there, and sets PY to its python; ensure_packages installs into it what is missing. Messages go to
# stderr: those scripts print PY alone on stdout.
ensure_venv() {
  local venv=$1
  if [[ ! -x "$venv/bin/python" ]]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2
  fi
  PY="$venv/bin/python"
}

# ensure_packages TAG CHECK SPEC...: pip-installs SPEC... into $PY unless the Python code CHECK runs there without
# an error; TAG names the calling script in the message.
ensure_packages() {
  local tag=$1 check=$2
  shift 2
  if ! "$PY" -c "$check" >/dev/null 2>&1; then
    echo "[$tag] installing $* into $(dirname "$(dirname "$PY")")" >&2
    "$PY" -m pip install -q --disable-pip-version-check "$@" >&2
  fi
}
