"""Re-read the answers of finished baseline runs with the current `extract_answer` and re-score them, without asking
any model: every free-form prediction row keeps the reader's raw output in `trace.raw`.

    python experiments/steps/rescore_extraction.py runs/2wiki100-direct runs/2wiki100-native_rag runs/2wiki100-oracle

Prints, per run, EM/F1 before and after and the rows whose prediction changed; writes
`runs/reports/<run>.rescored.summary.json`. Rows answered under an options enum (A-or-B and yes/no questions
with `reader_constrain_options`) are not free-form and are left as they are."""
import json, sys
from pathlib import Path
from megrag_kit.core import Question
from megrag_kit.reader import answer_options, extract_answer
from megrag_kit.runner import read_predictions, score, summarize

RESULTS = Path(__file__).resolve().parents[2] / "runs" / "reports"


def rescore(folder: Path) -> dict:
    mf = json.loads((folder / "run.json").read_text())
    constrained = mf["params"].get("reader_constrain_options", True)
    rows, changed = [], []
    for r in read_predictions(folder / "predictions.jsonl"):
        raw = (r.get("trace") or {}).get("raw")
        if raw is not None and not (constrained and answer_options(r["question"])):
            new = extract_answer(raw, r["question"])
            if new != r["prediction"]: changed.append((r["id"], raw, r["prediction"], new, r["gold_answers"][0]))
            q = Question(r["id"], r["question"], r["gold_answers"], r.get("gold_pids") or [])
            r = {**r, "prediction": new, **score(q, new, r.get("retrieved") or [])}
        rows.append(r)
    before, after = summarize(read_predictions(folder / "predictions.jsonl")), summarize(rows)
    out = {**after, "manifest": {**mf, "rescored_with": "megrag_kit.reader.extract_answer (pysbd sentences, lead-ins, yes/no)"}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{folder.name}.rescored.summary.json").write_text(json.dumps(out, indent=1))
    print(f"{folder.name}: n={after['n']}  EM {before['em']:.2f} -> {after['em']:.2f}  F1 {before['f1']:.2f} -> {after['f1']:.2f}  "
          f"({len(changed)} predictions changed)")
    for qid, raw, old, new, gold in changed:
        print(f"    {raw[:90]!r}\n        {old!r} -> {new!r}   (gold {gold!r})")
    return out


if __name__ == "__main__":
    for f in sys.argv[1:] or ["runs/2wiki100-direct", "runs/2wiki100-native_rag", "runs/2wiki100-oracle"]: rescore(Path(f))
