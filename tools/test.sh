#!/usr/bin/env bash
# The test command (README, CI): set up .venv, run the notebooks' own tests (nbdev_test; cells flagged `#| slow` are
# skipped, cells flagged `#| data` run when the benchmark data is there) and pytest. Every stage prints its wall time,
# and pytest its slowest tests.
#   bash tools/test.sh                  full run: setup, nbdev_test, pytest of every tier (fast, slow and data tests)
#   bash tools/test.sh --fast           fast tier: setup, nbdev_test, pytest -m "not slow" (no real model is loaded)
#   bash tools/test.sh --slow-and-data  what a --fast run without the data leaves out (CI's second pass): the
#                                       notebooks that have `#| data` cells, with them, and pytest -m "slow or data"
#                                       (tests that load a real model or read the data; tests/conftest.py marks them)
# pytest runs on two worker processes (MEGRAG_KIT_TEST_WORKERS, default 2; 1: in this process).
# Extra arguments go to pytest (e.g. `bash tools/test.sh --fast -x tests/test_index.py`). A selection with no test in
# the chosen tier passes, saying so; one that matches no test at all fails with pytest's exit status 5.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=full
case "${1:-}" in
  --fast) mode=fast; shift ;;
  --slow-and-data) mode=slow-and-data; shift ;;
esac

stage() {  # stage NAME CMD...: run CMD, print its wall time and exit status
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@"; local rc=$?
  echo "[tools/test.sh] $name: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}') s, exit $rc"
  return $rc
}
t_all=$(date +%s.%N)
finish() {  # finish RC: print the total wall time, exit RC
  echo "[tools/test.sh] total ($mode): $(awk -v a="$t_all" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}') s, exit $1"
  exit "$1"
}

stage setup bash tools/setup.sh || finish 1
. .venv/bin/activate
# Notebook cells flagged `#| data` read the benchmark data ($MEGRAG_KIT_DATA, or shared/data beside the checkout);
# they run only when it is there, and the pytest tests that need it skip, naming the path, when it is not.
data=$(python -c "from megrag_kit.data import shared_data_dir; print(shared_data_dir())" 2>/dev/null)
if [ -n "$data" ] && [ -d "$data/multihop" ]; then
  echo "[tools/test.sh] benchmark data at $data: notebook cells flagged 'data' run"; flags=(--flags data); have_data=1
else
  echo "[tools/test.sh] no benchmark data (${data:-none found}; set MEGRAG_KIT_DATA): notebook cells flagged 'data' are skipped, and so are the tests that need it"
  flags=(); have_data=0
fi

if [ $mode = slow-and-data ]; then
  # Only the notebooks with `#| data` cells (their other cells run too: the data cells build on them); no notebook
  # has a test that loads a real model outside the `#| slow` cells, which never run here.
  mapfile -t data_nbs < <(grep -lE '^ *"#\| *data *(\\n)?",?$' nbs/*.ipynb)
  if [ $have_data -eq 0 ]; then echo "[tools/test.sh] nbdev_test: no benchmark data, so no notebook cell to add to a --fast run"
  elif [ ${#data_nbs[@]} -eq 0 ]; then echo "[tools/test.sh] nbdev_test: no notebook has a cell flagged 'data'"
  else
    for nb in "${data_nbs[@]}"; do stage "nbdev_test $nb" nbdev_test --path "$nb" --n_workers 1 "${flags[@]}" || finish 1; done
  fi
else
  stage nbdev_test nbdev_test --n_workers 1 "${flags[@]}" || finish 1
fi

case $mode in
  full) tier="all tiers"; marks=() ;;
  fast) tier="fast tier"; marks=(-m "not slow") ;;
  slow-and-data) tier="slow and data tests"; marks=(-m "slow or data") ;;
esac
# Two worker processes (pytest-xdist), a test file to each worker whole (--dist loadfile): a file's module fixtures
# (a reproduction, a loaded model) are built once. MEGRAG_KIT_TEST_WORKERS=1 runs in this process (e.g. for pdb).
workers=${MEGRAG_KIT_TEST_WORKERS:-2}
if [ "$workers" -gt 1 ]; then par=(-n "$workers" --dist loadfile); else par=(-p no:xdist); fi
stage "pytest ($tier, $workers worker(s))" pytest -q --durations=25 "${par[@]}" "${marks[@]}" "$@"; rc=$?
if [ $rc -eq 5 ]; then   # no test selected: fine when the selection has tests, all of them in other tiers
  if [ ${#marks[@]} -gt 0 ] && pytest -q --collect-only -p no:cacheprovider -p no:xdist "$@" > /dev/null 2>&1; then
    echo "[tools/test.sh] pytest: the selected tests are all outside the $tier; nothing to run here (ok)"; rc=0
  else
    echo "[tools/test.sh] pytest: no test matches the selection (exit 5)"
  fi
fi
finish $rc
