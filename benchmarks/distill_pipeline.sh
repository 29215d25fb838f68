#!/usr/bin/env bash
# Graph-construction distillation end to end (MEGRAG, §"Graph Construction Distillation", Eq. 9) on a CPU:
# gold-teacher examples on every training signal of the shared data, a LoRA student, then on each evaluation set the
# base model with its usual prompt, the base model with the student's prompt (the w/o-SFT row: the same procedure as
# the student), the student, and native RAG, with the comparison table (experiments/distill-eval-*.toml). Every
# step resumes where a killed run stopped; run it again to finish. The triple view comes from the dependency parser (seconds, not hours, on a CPU)
# in collection and in every run alike.
#   N_EVAL=100 bash benchmarks/distill_pipeline.sh            (STEP=collect|train|eval runs one stage)
#   the experiment files name the adapter they evaluate (the shipped one, megrag_kit/data/students/smollm2-135m-gold)
set -euo pipefail
N_EVAL=${N_EVAL:-100}; STEP=${STEP:-all}; OUT=${OUT:-runs/distill/student}
mk() { python -c 'from megrag_kit.cli import main; main()' "$@"; }
mkdir -p runs/distill benchmarks/results
if [[ $STEP == all || $STEP == collect ]]; then
  for ds in musique-train hotpotqa-train 2wiki-dev-150; do      # disjoint from every evaluation set (--drop-overlap drops and counts)
    mk distill collect --teacher gold --dataset $ds --batch-size 8 --openie-backend parser --drop-overlap --out runs/distill/gold-$ds-parser.jsonl
  done
fi
if [[ $STEP == all || $STEP == train ]]; then mk distill train --out "$OUT"; fi       # the defaults: DEFAULT_DATA, TrainConfig
# the evaluation and its table are declared, not scripted: one experiment file per evaluation set (the base model with
# its usual prompt, with the student's prompt, the student, native RAG; the report with the paired differences)
if [[ $STEP == all || $STEP == eval || $STEP == compare ]]; then
  for ds in 2wikimultihopqa5 musique5; do
    mk experiment run experiments/distill-eval-$ds.toml --limit "$N_EVAL"
  done
fi
