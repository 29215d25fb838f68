#!/bin/bash
# CARA's sweeps on the first N 2Wiki questions (corpus graph, SmolLM2-135M on CPU, no reader): lambda (Eq. 3) and
# alpha (Eq. 4) at the base budget, and the budget grid agents x T_max. Every run is a resumable run folder
# runs/2wiki<N>-cara-sweep-<name>; benchmarks/cara_sweep_table.py turns them into a table and a figure.
# usage: [DECODING=text|schema] [BATCH=B] benchmarks/cara_sweeps.sh N
# The causal module only moves the ranking when it answers: with the 135M model that needs DECODING=schema (the
# default here); under text decoding it gave no usable line (benchmarks/results/2wiki20-cara-table.md).
N=${1:-20}
D=${DECODING:-schema}
S="--set show=5 --set neighbors_k=5 --set snippet_chars=100 --set read=false --set decoding=$D --openie-backend parser"
run() { megrag-kit run cara --dataset 2wikimultihopqa --limit $N --device cpu --batch-size ${BATCH:-$N} $S "$@" || exit $?; }
for L in 0 0.25 0.5 0.75 1; do run --set agents=2 --set t_max=3 --set lam=$L --out runs/2wiki$N-cara-sweep-$D-lam$L; done
for A in 0 0.25 0.75 1; do run --set agents=2 --set t_max=3 --set alpha=$A --out runs/2wiki$N-cara-sweep-$D-alpha$A; done
for M in 1 2 3; do for T in 3 5 10; do run --set agents=$M --set t_max=$T --out runs/2wiki$N-cara-sweep-$D-m${M}t$T; done; done
python benchmarks/cara_sweep_table.py $N $D | tee benchmarks/results/2wiki$N-cara-sweeps-$D.md
