#!/bin/bash
# CARA's model-policy rows after the issue-24 fixes (strict action parsing, no fallback, unassessed causal candidates)
# on the first N questions of a dataset, with a REDUCED budget (2 agents x 5 steps, not the paper's 3 x 150) and short
# prompts so that SmolLM2-135M on CPU finishes: full and no_causal run the agents, count re-fuses full's agent lists
# (benchmarks/cara_refuse.py), and BM25 GlobalSearch alone is the baseline. Settings under which the contrasts can
# differ: fallback off (no rule appends the BM25 order), 2 agents (RRF and count fusion can order the lists
# differently), causal_order on (the causal scores reorder what the agent sees). Resumable: rerun to finish.
# usage: benchmarks/cara_model_rows.sh N DATASET   (DATASET: musique | 2wikimultihopqa)
N=${1:-20}; DS=${2:-musique}; P=${DS/2wikimultihopqa/2wiki}$N
S="--set agents=2 --set t_max=5 --set show=5 --set neighbors_k=5 --set snippet_chars=100 --set causal_tokens_per_candidate=12 --set read=false"
C="--dataset $DS --limit $N --device cpu --batch-size ${BATCH:-10} --openie-backend parser"
megrag-kit run cara $C --set read=false --set variant=global_search --out runs/$P-cara-global_search || exit $?
for V in full no_causal; do
  megrag-kit run cara $C $S --set variant=$V --out runs/$P-cara-$V-t5 || exit $?
done
python benchmarks/cara_refuse.py runs/$P-cara-full-t5 runs/$P-cara-global_search runs/$P-cara-count-t5
{ echo "CARA model-policy rows on the first $N $DS questions (corpus graph, parser triples, SmolLM2-135M agents and causal module on CPU, reduced budget: $S; fallback off): \`bash benchmarks/cara_model_rows.sh $N $DS\`"; echo
  python benchmarks/cara_table.py runs/$P-cara-full-t5 runs/$P-cara-no_causal-t5 runs/$P-cara-count-t5 runs/$P-cara-global_search; } | tee benchmarks/results/$P-cara-model-t5-table.md
