"""F1 and Recall of native RAG runs of the same questions in fp32 and bf16, and how many answers and top-5 lists differ.

    python benchmarks/speed/compare_precision.py FP32_RUN BF16_RUN [BF16_RUN ...] [--limit N]

Each argument is a run folder of `megrag-kit run` (`predictions.jsonl`), e.g. made by

    megrag-kit --threads 1 run native_rag --dataset 2wikimultihopqa --limit 20 --out runs/x-fp32
    megrag-kit --threads 1 run native_rag --dataset 2wikimultihopqa --limit 20 --llm smollm2-135m@bf16 --out runs/x-bf16llm
    megrag-kit --threads 1 run native_rag --dataset 2wikimultihopqa --limit 20 --precision bf16 --out runs/x-bf16

The rows of the questions every folder answered (the first `--limit` of them) are scored with the kit's `summarize`;
printed per folder: its LLM and embedder specs, EM, F1, Recall@2/@5, LLM seconds per question, and against the first
folder the number of predictions and of top-5 passage lists that differ."""
import argparse, json
from pathlib import Path

from megrag_kit.runner import read_predictions, summarize


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+"); ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()
    rows = {r: {x["id"]: x for x in read_predictions(Path(r) / "predictions.jsonl")} for r in a.runs}
    ids = [i for i in rows[a.runs[0]] if all(i in rs for rs in rows.values())][:a.limit]
    base = rows[a.runs[0]]
    print(f"{len(ids)} questions answered in every folder\n")
    print("| run | llm | embedder | EM | F1 | Recall@2 | Recall@5 | LLM s/question | answers differing | top-5 differing |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in a.runs:
        mf = json.loads((Path(r) / "run.json").read_text())
        s = summarize([rows[r][i] for i in ids])
        diff = sum(rows[r][i]["prediction"] != base[i]["prediction"] for i in ids)
        top = sum(rows[r][i]["retrieved"][:5] != base[i]["retrieved"][:5] for i in ids)
        print(f"| {Path(r).name} | {mf['llm']} | {mf['embedder']} | {s['em']:.1f} | {s['f1']:.2f} | {s['recall@2']:.1f} | "
              f"{s['recall@5']:.1f} | {s['llm_seconds']:.1f} | {diff} of {len(ids)} | {top} of {len(ids)} |")


if __name__ == "__main__": main()
