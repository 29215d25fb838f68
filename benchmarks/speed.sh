#!/usr/bin/env bash
# The speed-and-scale suite in one command: every figure of benchmarks/README.md "Speed and scale", each script writing
# its file under benchmarks/results/ (and printing it). Run it on an otherwise idle machine; each file records the
# load average of its measurements. The 100k hashed index (bench_scale) is the longest part.
#   bash benchmarks/speed.sh                 (everything)
#   ONLY="generation embedding" bash benchmarks/speed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
R=benchmarks/results
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
want generation && OMP_NUM_THREADS=2 python benchmarks/bench_generation.py --out $R/generation.md      # OpenIE: HF fp32/bf16, batch, prefix KV, outlines, llama.cpp
want embedding  && OMP_NUM_THREADS=2 python benchmarks/bench_embedding.py --passages 1000 --out $R/embedding.md   # MiniLM fp32 vs bf16
want threads    && python benchmarks/bench_threads.py --threads 1,2 --burners 2 --questions 10 --passages 200 --out $R/threads.md
want methods    && python benchmarks/bench_methods.py --questions 4 --batch 4 --threads 2 --out $R/methods.md      # questions/minute per method (resumes)
want scale      && python benchmarks/bench_scale.py --sizes 1000,10000,100000 --embedder hash --threads 1 # 1k/10k/100k index, time, memory, HNSW/IVF, growth plot
want parser     && OMP_NUM_THREADS=1 python benchmarks/bench_openie_parser.py --out $R/openie_parser.md   # parser vs LLM OpenIE yield
want ray        && python benchmarks/bench_ray.py --questions 20 --methods native_rag,direct --workers 2 --md $R/ray.md   # grid and extraction on Ray
want llamacpp   && python benchmarks/bench_llamacpp_schema.py --out $R/llamacpp_schema.md               # free vs schema decoding (needs the llamacpp extra)
echo "speed suite done: $R"
