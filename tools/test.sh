#!/usr/bin/env bash
# The test command: set up .venv, run the notebooks' own tests (nbdev_test, slow cells skipped) and pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1
. .venv/bin/activate
nbdev_test --n_workers 1 || exit 1
pytest -q tests "$@"
rc=$?
if [ $rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi
exit $rc
