#!/usr/bin/env bash
# Graph-construction distillation end to end (MEGRAG, Eq. 9): gold-teacher examples, a LoRA student, and the
# base model vs the student with the same inference procedure (policy=single), then the comparison table.
# Every step resumes where a killed run stopped; run it again to finish. CPU: run under `nice -n 10`.
#   N_EVAL=20 STEPS=200 bash benchmarks/distill_pipeline.sh
#   OPENIE_BACKEND=parser ...   the triple view from the dependency parser (seconds, not hours, on a CPU), for
#                               collection and both runs alike; its files get a -parser suffix
set -euo pipefail
N_EVAL=${N_EVAL:-20}; STEPS=${STEPS:-200}; LIMIT_TRAIN=${LIMIT_TRAIN:-100}; OB=${OPENIE_BACKEND:-llm}
SFX=$([ "$OB" = llm ] && echo "" || echo "-$OB"); OBO="--openie-backend $OB"
CFG="--set policy=single --set n_p=3 --set n_s=8 --set n_t=8 --set max_selected=4"
mk() { python -c 'from megrag_kit.cli import main; main()' "$@"; }
mkdir -p runs/distill benchmarks/results
# 1. examples from the gold teacher (MuSiQue train fixture; add --dataset 2wiki-dev --drop-overlap for 2Wiki dev)
mk distill collect --teacher gold --dataset musique-train --limit "$LIMIT_TRAIN" --batch-size 8 $OBO --out runs/distill/gold-musique-train$SFX.jsonl
# 2. the LoRA student
mk distill train --data runs/distill/gold-musique-train$SFX.jsonl --out runs/distill/student$SFX --steps "$STEPS" --batch 4 --rank 8 --max-len 2048
# 3. base and student, same procedure, same questions
mk run megrag $CFG --dataset 2wikimultihopqa --limit "$N_EVAL" --device cpu --batch-size 4 $OBO --out "runs/distill/2wiki${N_EVAL}-megrag-single-base$SFX"
mk run megrag $CFG --dataset 2wikimultihopqa --limit "$N_EVAL" --device cpu --batch-size 4 $OBO --llm smollm2-135m+lora:runs/distill/student$SFX \
   --out "runs/distill/2wiki${N_EVAL}-megrag-single-student$SFX"
# 4. the table (student - base, student - native_rag, paired bootstrap)
python benchmarks/distill_compare.py "runs/distill/2wiki${N_EVAL}-megrag-single-base$SFX" "runs/distill/2wiki${N_EVAL}-megrag-single-student$SFX" \
   --native runs/2wiki20-native_rag --out "benchmarks/results/distill-2wiki${N_EVAL}$SFX.md"
