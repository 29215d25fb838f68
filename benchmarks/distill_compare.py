"""Base model vs distilled student (MEGRAG `policy=single`): the paper's w/o-SFT row against the distilled row
(Table 3), beside the base model with its usual prompt and native RAG, from finished run folders on the same questions.

    python benchmarks/distill_compare.py --run "base (usual prompt)=RUN" --run "base, student prompt (w/o SFT)=RUN" \
        --run "student (distilled)=RUN" --run native_rag=RUN --student "student (distilled)" [--out FILE.md]

Prints (and writes with --out) a Markdown table on the questions every run answered: F1, EM, Recall@10 of the ranked
list, evidence recall, the policy-health counters (parse-repair rate = % of steps whose first output was unusable,
steps coerced after the re-ask, unit ids dropped as not candidates, budget exhausted), mean steps, the stop-step
distribution, the compositions chosen, LLM calls, tokens and seconds per question; then the paired bootstrap
(10,000 resamples, seed 0) of the `--student` run minus every other run, for F1, EM and Recall@10."""
import argparse, json
from collections import Counter
from pathlib import Path
from megrag_kit.metrics import paired_bootstrap
from megrag_kit.runner import read_predictions


def stats(rows: list[dict]) -> dict:
    n = len(rows)
    steps = sum(r.get("steps", 0) for r in rows)
    rec = [r["evidence_recall"] for r in rows if r.get("evidence_recall") is not None]
    mean = lambda k: sum((r.get(k) or 0) for r in rows) / max(n, 1)
    dropped = sum(len(nd.get("dropped_ids") or []) for r in rows for nd in (r.get("trace") or {}).get("nodes", []))
    return dict(n=n, f1=100 * mean("f1"), em=100 * mean("em"), recall10=100 * mean("recall@10"),
                evidence_recall=100 * sum(rec) / max(len(rec), 1) if rec else None,
                repair=100 * sum(r.get("steps", 0) - r.get("parsed_ok_steps", 0) for r in rows) / max(steps, 1) if steps else None,
                coerced=sum(r.get("coerced", 0) for r in rows), dropped_ids=dropped,
                budget_exhausted=sum(bool(r.get("budget_exhausted")) for r in rows),
                mean_steps=steps / max(n, 1) if steps else None,
                stop_step=dict(sorted(Counter(str(r["steps"]) for r in rows if "steps" in r and not r.get("budget_exhausted")).items())),
                compositions=dict(Counter(c for r in rows for c in r.get("compositions", []))),
                calls=mean("llm_calls"), tokens=mean("tokens"), prompt_tokens=mean("prompt_tokens"), seconds=mean("latency_s"))


COLS = ["n", "f1", "em", "recall10", "evidence_recall", "repair", "coerced", "dropped_ids", "budget_exhausted", "mean_steps",
        "stop_step", "compositions", "calls", "tokens", "prompt_tokens", "seconds"]
HEAD = ["n", "F1", "EM", "R@10", "evidence recall %", "parse-repair %", "coerced", "dropped ids", "budget exhausted", "mean steps",
        "stop step", "compositions", "calls/q", "tokens/q", "prompt tokens/q", "s/q"]


def fmt(v):
    if v is None: return "-"
    if isinstance(v, float): return f"{v:.2f}"
    return json.dumps(v) if isinstance(v, dict) else str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="append", required=True, help="NAME=RUN_FOLDER (repeatable)")
    ap.add_argument("--student", required=True, help="the NAME whose differences to the others are bootstrapped")
    ap.add_argument("--title", default=""); ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    runs = dict(x.split("=", 1) for x in a.run)
    rows = {k: {r["id"]: r for r in read_predictions(Path(v) / "predictions.jsonl") if not r.get("failed")} for k, v in runs.items()}
    ids = set.intersection(*(set(r) for r in rows.values()))
    order = [q for q in rows[a.student] if q in ids]
    S = {k: stats([r[q] for q in order]) for k, r in rows.items()}
    lines = ([f"## {a.title}", ""] if a.title else []) + [
        f"On the {len(order)} questions every run answered. F1, EM, R@10, evidence recall and parse-repair are %.", "",
        "| run | " + " | ".join(HEAD) + " |", "|---" * (len(HEAD) + 1) + "|"]
    lines += [f"| {k} (`{runs[k]}`) | " + " | ".join(fmt(s[c]) for c in COLS) + " |" for k, s in S.items()]
    lines.append("")
    st = rows[a.student]
    for k, r in rows.items():
        if k == a.student: continue
        for m, label in (("f1", "F1"), ("em", "EM"), ("recall@10", "R@10")):
            res = paired_bootstrap({q: 100 * st[q][m] for q in order}, {q: 100 * r[q][m] for q in order})
            lines.append(f"- {label}: {a.student} - {k} = {res['diff']:+.2f}, 95% CI [{res['lo']:+.2f}, {res['hi']:+.2f}] "
                         f"(n={res['n']}, P(diff<=0)={res['p_le_0']:.4f})")
    text = "\n".join(lines)
    print(text)
    if a.out: a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
