#!/usr/bin/env bash
# EviReform on the first 200 2WikiMultiHopQA questions with parser propositions (EviReform paper, Appendix: main
# retrieval table and the 2x2 of reformulation and propagation): the proposition file over the whole corpus (time and
# yield), the dense baseline (same embedder) and BM25, the full method and its 2x2 ablation, each a resumable run
# folder (retrieval only: read=false, no reader calls; the selector's and writer's replies are served by the LLM call
# cache to the runs that share them); then the table with paired bootstrap differences against the full method.
#   bash benchmarks/evireform_2wiki200.sh [N]      (N questions, default 200; runs what is missing, then writes the table)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
tag=2wiki$n
common=(--dataset 2wikimultihopqa --limit "$n" --openie-backend parser --set propositions=eager --set read=false --batch-size 8 --device cpu)
ext=benchmarks/results/2wiki-parser-propositions.json     # kept once written: a second call finds every passage done (0 s)
[ -f "$ext" ] || python benchmarks/evireform_extract.py --dataset 2wikimultihopqa --openie-backend parser --out "$ext"
runs=()
pools=(--set pool_x=6 --set pool_r=3)   # the pools of the 20-question runs: ~22 seed candidates per question (the selector's prompt is what costs)
one() {  # one NAME VARIANT
  local out=runs/$tag-evireform-parser-$1 extra=("${pools[@]}")
  case $2 in dense|bm25) extra=();; esac
  megrag-kit run evireform "${common[@]}" "${extra[@]}" --set "variant=$2" --out "$out"
  runs+=("$out")
}
one dense dense
one bm25 bm25
one full full
one no_propagation no_propagation
one no_reformulation no_reformulation
one no_reformulation_no_propagation no_reformulation_no_propagation
for extra in ${EXTRA:-}; do one "$extra" "$extra"; done           # EXTRA="residual_only repeat_question"
{ echo "EviReform on the first $n 2WikiMultiHopQA questions, parser propositions (\`EXTRA=\"${EXTRA:-}\" bash benchmarks/evireform_2wiki200.sh $n\`)"; echo
  python benchmarks/evireform_table.py "${runs[@]}" --common --save "benchmarks/results/$tag-evireform.scores.json"; } > "benchmarks/results/$tag-evireform-table.md"
cat "benchmarks/results/$tag-evireform-table.md"
