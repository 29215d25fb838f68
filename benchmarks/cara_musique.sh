#!/bin/bash
# CARA on the first N MuSiQue dev questions (corpus graph with parser triples; no reader): the gold policy (policy=gold,
# no model call: the mechanism with a perfect driver) and BM25 GlobalSearch alone, then their paired table with the
# policy-health counters. Resumable: rerun to finish.
# usage: benchmarks/cara_musique.sh N      -> runs/musiqueN-cara-gold, runs/musiqueN-cara-global_search,
#                                             benchmarks/results/musiqueN-cara-gold-table.md
N=${1:-200}
C="--dataset musique --limit $N --device cpu --openie-backend parser --set read=false"
megrag-kit run cara $C --set policy=gold --out runs/musique$N-cara-gold || exit $?
megrag-kit run cara $C --set variant=global_search --out runs/musique$N-cara-global_search || exit $?
{ echo "CARA gold policy vs BM25 GlobalSearch alone on the first $N MuSiQue dev questions (corpus graph, parser triples, depth 30, no reader): \`bash benchmarks/cara_musique.sh $N\`"; echo
  python benchmarks/cara_table.py runs/musique$N-cara-gold runs/musique$N-cara-global_search; } | tee benchmarks/results/musique$N-cara-gold-table.md
