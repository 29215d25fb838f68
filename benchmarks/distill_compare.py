"""Base model vs distilled student (MEGRAG `policy=single`, the same inference procedure: the paper's w/o-SFT row
against the distilled row, Table 3), from two finished run folders on the same questions.

    python benchmarks/distill_compare.py RUN_BASE RUN_STUDENT [--native RUN_NATIVE_RAG] [--out benchmarks/results/distill.md]

Prints (and writes with --out) a Markdown table: F1, EM, parse-repair rate (% of steps whose first output was
unusable), evidence recall, mean steps, stop-step distribution, calls and tokens per question, and the paired
bootstrap (10,000 resamples, seed 0) of student minus base (and student minus native RAG when given), on the
questions both runs answered."""
import argparse, json
from collections import Counter
from pathlib import Path
from megrag_kit.runner import compare_runs, read_predictions


def stats(run: Path, ids=None) -> dict:
    rows = [r for r in read_predictions(run / "predictions.jsonl") if ids is None or r["id"] in ids]
    n = len(rows)
    steps = sum(r.get("steps", 0) for r in rows)
    rec = [r["evidence_recall"] for r in rows if r.get("evidence_recall") is not None]
    mean = lambda k: sum((r.get(k) or 0) for r in rows) / max(n, 1)
    return dict(n=n, f1=100 * mean("f1"), em=100 * mean("em"),
                repair=100 * sum(r.get("steps", 0) - r.get("parsed_ok_steps", 0) for r in rows) / max(steps, 1),
                coerced=sum(r.get("coerced", 0) for r in rows), evidence_recall=100 * sum(rec) / max(len(rec), 1),
                mean_steps=steps / max(n, 1), budget_exhausted=sum(bool(r.get("budget_exhausted")) for r in rows),
                stop_step=dict(sorted(Counter(str(r["steps"]) for r in rows if not r.get("budget_exhausted")).items())),
                calls=mean("llm_calls"), tokens=mean("tokens"), prompt_tokens=mean("prompt_tokens"),
                compositions=dict(Counter(c for r in rows for c in r.get("compositions", []))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base", type=Path); ap.add_argument("student", type=Path)
    ap.add_argument("--native", type=Path); ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    ids = {r["id"] for r in read_predictions(a.base / "predictions.jsonl")} & {r["id"] for r in read_predictions(a.student / "predictions.jsonl")}
    runs = {"base (w/o SFT)": a.base, "student (distilled)": a.student, **({"native_rag": a.native} if a.native else {})}
    S = {k: stats(v, ids) for k, v in runs.items()}
    cols = ["n", "f1", "em", "repair", "coerced", "evidence_recall", "mean_steps", "budget_exhausted", "stop_step", "calls", "tokens",
            "prompt_tokens", "compositions"]
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else (json.dumps(v) if isinstance(v, dict) else str(v))
    lines = ["| run | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += [f"| {k} ({runs[k]}) | " + " | ".join(fmt(s[c]) for c in cols) + " |" for k, s in S.items()]
    lines.append("")
    for other in [a.base] + ([a.native] if a.native else []):
        for m, r in compare_runs(a.student, other, ["f1", "em"]).items():
            lines.append(f"- {m}: student - {other.name} = {r['diff']:+.2f}, 95% CI [{r['lo']:+.2f}, {r['hi']:+.2f}] (n={r['n']}, P(diff<=0)={r['p_le_0']:.4f})")
    text = "\n".join(lines)
    print(text)
    if a.out: a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
