#!/usr/bin/env bash
# Graph-construction distillation end to end (MEGRAG, §"Graph Construction Distillation", Eq. 9) on a CPU:
# gold-teacher examples on every training signal of the shared data, a LoRA student, then on each evaluation set the
# base model with its usual prompt, the base model with the student's prompt (the w/o-SFT row: the same procedure as
# the student), the student, and native RAG, followed by the comparison table. Every step resumes where a killed run
# stopped; run it again to finish. The triple view comes from the dependency parser (seconds, not hours, on a CPU)
# in collection and in every run alike.
#   N_EVAL=100 bash benchmarks/distill_pipeline.sh            (STEP=collect|train|eval|compare runs one stage)
#   STUDENT=megrag_kit/data/students/smollm2-135m-gold       the adapter to evaluate (default: the one trained here)
set -euo pipefail
N_EVAL=${N_EVAL:-100}; STEP=${STEP:-all}; OUT=${OUT:-runs/distill/student}; STUDENT=${STUDENT:-$OUT}
mk() { python -c 'from megrag_kit.cli import main; main()' "$@"; }
# the student's inference procedure (distill_config / DISTILL_DEFAULTS), and the same candidate sets with the usual prompt
SETS=$(python -c 'from megrag_kit.distill import distill_sets; print(" ".join("--set " + s for s in distill_sets()))')
USUAL="--set policy=single --set n_p=3 --set n_s=8 --set n_t=8 --set max_selected=4"
mkdir -p runs/distill benchmarks/results
if [[ $STEP == all || $STEP == collect ]]; then
  for ds in musique-train hotpotqa-train 2wiki-dev-150; do      # disjoint from every evaluation set (--drop-overlap drops and counts)
    mk distill collect --teacher gold --dataset $ds --batch-size 8 --openie-backend parser --drop-overlap --out runs/distill/gold-$ds-parser.jsonl
  done
fi
if [[ $STEP == all || $STEP == train ]]; then mk distill train --out "$OUT"; fi       # the defaults: DEFAULT_DATA, TrainConfig
if [[ $STEP == all || $STEP == eval ]]; then
  for ds in 2wikimultihopqa musique; do
    R=runs/distill/$ds$N_EVAL
    mk run megrag $USUAL --dataset $ds --limit "$N_EVAL" --device cpu --batch-size 4 --openie-backend parser --out $R-base-usual
    mk run megrag $SETS --dataset $ds --limit "$N_EVAL" --device cpu --batch-size 4 --openie-backend parser --out $R-base-student-prompt
    mk run megrag $SETS --dataset $ds --limit "$N_EVAL" --device cpu --batch-size 4 --openie-backend parser \
       --llm "smollm2-135m+lora:$STUDENT" --out $R-student
    mk run native_rag --dataset $ds --limit "$N_EVAL" --device cpu --batch-size 4 --out $R-native_rag
  done
fi
if [[ $STEP == all || $STEP == compare ]]; then
  for ds in 2wikimultihopqa musique; do
    R=runs/distill/$ds$N_EVAL
    python benchmarks/distill_compare.py --title "$ds, first $N_EVAL questions" --student "student (distilled)" \
      --run "base (usual prompt)=$R-base-usual" --run "base, student prompt (w/o SFT)=$R-base-student-prompt" \
      --run "student (distilled)=$R-student" --run "native_rag=$R-native_rag" --out benchmarks/results/distill-$ds$N_EVAL.md
  done
fi
