#!/usr/bin/env bash
# EviReform's sweeps and round/reorder controls on the first 20 2Wiki questions (EviReform paper, Appendix: Tables
# A.5, A.6 and A.8-A.10, Figure A.2), each a resumable run folder beside the 20-question runs of the notebook;
# then the table with paired bootstrap differences against the full method.
#   bash benchmarks/evireform_sweeps.sh            (runs what is missing, then writes benchmarks/results/2wiki20-evireform-sweeps.md)
set -euo pipefail
cd "$(dirname "$0")/.."
common=(--dataset 2wikimultihopqa --limit 20 --set pool_x=6 --set pool_r=3 --batch-size 4 --device cpu)
runs=(runs/2wiki20-evireform)
sweep() {  # sweep NAME SET...
  local out=runs/2wiki20-evireform-$1; shift
  local sets=(); for kv in "$@"; do sets+=(--set "$kv"); done
  megrag-kit run evireform "${common[@]}" "${sets[@]}" --out "$out"
  runs+=("$out")
}
for a in 0.0 0.25 0.75 1.0; do sweep "alpha$a" "alpha=$a"; done
for b in 0.0 0.25 0.75 1.0; do sweep "beta$b" "beta=$b"; done
for k in 2 8; do sweep "kr$k" "k_r=$k"; done
for l in 1 3; do sweep "L$l" "L=$l"; done
for r in 2 3; do sweep "rounds$r" "rounds=$r"; done
sweep reorder variant=reorder
python benchmarks/evireform_table.py "${runs[@]}" --save benchmarks/results/2wiki20-evireform-sweeps.scores.json > benchmarks/results/2wiki20-evireform-sweeps.md
cat benchmarks/results/2wiki20-evireform-sweeps.md
