#!/usr/bin/env bash
# EviReform after the fidelity fixes (propagation without the self term, seeds and residual queries over the whole
# proposition index, worked-example copies dropped, select-all replies recognised), parser propositions, retrieval
# only (read=false): each run a resumable folder under runs/, then the tables with paired bootstrap intervals and the
# policy-health counters (benchmarks/evireform_table.py).
#   bash benchmarks/evireform_issue24.sh gold [N]          MuSiQue dev, first N (default 200): gold, dense, BM25 (no LLM call)
#   bash benchmarks/evireform_issue24.sh model DATASET [N] first N (default 100; folders runs/{musique,2wiki}100-*) of musique | 2wikimultihopqa: full, the
#                                                          2x2, the controls, dense, BM25 (the selector's and writer's
#                                                          replies are served by the LLM call cache to the runs sharing them)
#   bash benchmarks/evireform_issue24.sh tables            the tables of whatever runs exist (benchmarks/results/*-issue24.md)
set -euo pipefail
cd "$(dirname "$0")/.."
common=(--openie-backend parser --set propositions=eager --set read=false --batch-size 8 --device cpu)
one() {  # one DATASET TAG N VARIANT
  megrag-kit run evireform --dataset "$1" --limit "$3" "${common[@]}" --set "variant=$4" --out "runs/$2-evireform-parser-$4"
}
tables() {  # tables TAG BASE VARIANT...   (the first variant is the reference of the paired differences)
  local tag=$1 base=$2; shift 2; local runs=() pairs=()
  for v in "$@"; do [ -f "runs/$tag-evireform-parser-$v/predictions.jsonl" ] && runs+=("runs/$tag-evireform-parser-$v"); done
  [ ${#runs[@]} -ge 2 ] || return 0
  for p in ${PAIRS:-}; do pairs+=("$p"); done
  { echo "EviReform on $tag, parser propositions, retrieval only (\`bash benchmarks/evireform_issue24.sh tables\`; runs: \`bash benchmarks/evireform_issue24.sh $base\`)"; echo
    python benchmarks/evireform_table.py "${runs[@]}" --common --save "benchmarks/results/$tag-evireform-issue24.scores.json" ${pairs:+--pairs "${pairs[@]}"}; } \
    > "benchmarks/results/$tag-evireform-issue24.md"
  cat "benchmarks/results/$tag-evireform-issue24.md"
}
MODEL=(full no_propagation no_reformulation no_reformulation_no_propagation residual_only repeat_question dense bm25)
case ${1:-} in
  gold) n=${2:-200}; for v in gold dense bm25; do one musique "musique$n" "$n" "$v"; done ;;
  model) ds=$2; n=${3:-100}; tag=$([ "$ds" = musique ] && echo musique || echo 2wiki)100   # one folder per dataset: a smaller N
         # first, then the same command with a larger one resumes it (the runner answers only the questions not done)
         for v in "${MODEL[@]}"; do one "$ds" "$tag" "$n" "$v"; done ;;
  tables)
    tables musique200 gold gold dense bm25
    PAIRS="evireform-no_propagation:evireform-no_reformulation_no_propagation evireform-no_reformulation:evireform-no_reformulation_no_propagation" \
      tables musique100 "model musique" "${MODEL[@]}"
    PAIRS="evireform-no_propagation:evireform-no_reformulation_no_propagation evireform-no_reformulation:evireform-no_reformulation_no_propagation" \
      tables 2wiki100 "model 2wikimultihopqa" "${MODEL[@]}" ;;
  *) echo "usage: $0 gold [N] | model DATASET [N] | tables" >&2; exit 2 ;;
esac
