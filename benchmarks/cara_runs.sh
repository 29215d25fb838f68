#!/bin/bash
# The CARA runs behind benchmarks/results/2wiki<N>-cara-table.md: the four configurations of the issue on the first N
# 2Wiki questions (corpus graph, SmolLM2-135M agents and causal module on CPU, no reader). Resumable: rerun to finish.
# count-based fusion re-aggregates the full run's agent lists (benchmarks/cara_refuse.py): the same agents and seeds.
# usage: [BATCH=B] benchmarks/cara_runs.sh N   (EXTRA='--openie-backend parser' reads the parser's triples: megrag-kit index --views triple --openie-backend parser)
N=${1:-3}
EXTRA=${EXTRA:-}
S="--set agents=2 --set t_max=3 --set show=5 --set neighbors_k=5 --set snippet_chars=100 --set causal_tokens_per_candidate=12 --set read=false"
for V in full no_causal global_search; do
  megrag-kit run cara --dataset 2wikimultihopqa --limit $N --device cpu --batch-size ${BATCH:-$N} $S --set variant=$V $EXTRA --out runs/2wiki$N-cara-$V || exit $?
done
python benchmarks/cara_refuse.py runs/2wiki$N-cara-full runs/2wiki$N-cara-global_search runs/2wiki$N-cara-count
{ echo "CARA on the first $N 2WikiMultiHopQA questions (corpus graph, SmolLM2-135M on CPU; $S $EXTRA): \`BATCH=${BATCH:-$N} EXTRA='$EXTRA' bash benchmarks/cara_runs.sh $N\`"; echo
  python benchmarks/cara_table.py runs/2wiki$N-cara-full runs/2wiki$N-cara-no_causal runs/2wiki$N-cara-count runs/2wiki$N-cara-global_search; } | tee benchmarks/results/2wiki$N-cara-table.md
