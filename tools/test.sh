#!/usr/bin/env bash
# The test command (README, CI): set up .venv, run the notebooks' own tests (nbdev_test; cells flagged
# `#| slow` are skipped) and pytest of all tiers.
#   bash tools/test.sh            full run: setup, nbdev_test, pytest (fast and slow tests)
#   bash tools/test.sh --fast     fast tier: setup, nbdev_test, pytest -m "not slow" (no real model is loaded)
# Extra arguments go to pytest (e.g. `bash tools/test.sh --fast -x tests/test_metrics.py`).
set -uo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then fast=1; shift; fi

stage() {  # stage NAME CMD...: run CMD, print its wall time and exit status
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@"; local rc=$?
  echo "[tools/test.sh] $name: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}') s, exit $rc"
  return $rc
}

stage setup bash tools/setup.sh || exit 1
. .venv/bin/activate
# Notebook cells flagged `#| data` read the benchmark data ($MEGRAG_KIT_DATA, or shared/data beside the checkout);
# they run only when it is there, and the pytest tests that need it skip, naming the path, when it is not.
data=$(python -c "from megrag_kit.data import shared_data_dir; print(shared_data_dir())" 2>/dev/null)
if [ -n "$data" ] && [ -d "$data/multihop" ]; then
  echo "[tools/test.sh] benchmark data at $data: notebook cells flagged 'data' run"; flags=(--flags data)
else
  echo "[tools/test.sh] no benchmark data (${data:-none found}; set MEGRAG_KIT_DATA): notebook cells flagged 'data' are skipped, and so are the tests that need it"
  flags=()
fi
stage nbdev_test nbdev_test --n_workers 1 "${flags[@]}" || exit 1
if [ $fast -eq 1 ]; then
  stage "pytest (fast tier)" pytest -q --durations=15 -m "not slow" "$@"; rc=$?
  if [ $rc -eq 5 ]; then echo "[tools/test.sh] pytest: every selected test is marked slow; fast tier has nothing to run (ok)"; exit 0; fi
else
  stage "pytest (all tiers)" pytest -q --durations=25 "$@"; rc=$?
  if [ $rc -eq 5 ]; then echo "[tools/test.sh] pytest collected no tests"; exit 1; fi
fi
exit $rc
