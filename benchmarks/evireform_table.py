"""EviReform's retrieval table: Recall@5, Recall@10 and Chain@5 of finished runs with 95% bootstrap intervals, and paired
bootstrap differences (10,000 resamples, paired by question id) of each run against the first one.

    python benchmarks/evireform_table.py RUN_DIR... [--save benchmarks/results/NAME.scores.json] [--common]

`--save` writes the per-question scores (`{run name: {question id: {metric: 0..1}}}`) so the table can be rebuilt
without the run folders (the EviReform notebook reads that file)."""
import argparse, json
from pathlib import Path
from megrag_kit.metrics import bootstrap_ci, paired_bootstrap
from megrag_kit.runner import read_predictions

METRICS = ("recall@5", "recall@10", "chain@5")


def scores(run_dirs) -> dict:
    "`{run name: {qid: {metric: value}}}` from the runs' predictions (failed rows left out); a repeated run name is replaced by the folder's name."
    out = {}
    for d in run_dirs:
        mf = json.loads((Path(d) / "run.json").read_text())
        rows = [r for r in read_predictions(Path(d) / "predictions.jsonl") if not r.get("failed")]
        name = mf.get("run_name", mf["method"])
        if name in out: name = Path(d).name                    # two runs of one variant (a sweep): the folder tells them apart
        out[name] = {r["id"]: {m: r[m] for m in METRICS if m in r} for r in rows}
    return out


def table(sc: dict) -> str:
    "Markdown: one row per run (mean and 95% interval per metric), then the paired differences against the first run."
    names = list(sc); base = names[0]
    lines = ["| run | n | " + " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for n in names:
        cells = []
        for m in METRICS:
            mean, lo, hi = bootstrap_ci([v[m] for v in sc[n].values()])
            cells.append(f"{100 * mean:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]")
        lines.append(f"| {n} | {len(sc[n])} | " + " | ".join(cells) + " |")
    lines += ["", f"Paired differences, {base} minus each run (points, 95% interval):", "",
              "| against | n | " + " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for n in names[1:]:
        if not set(sc[base]) & set(sc[n]): continue          # nothing to pair (a run not started yet)
        cells, k = [], 0
        for m in METRICS:
            r = paired_bootstrap({q: 100 * v[m] for q, v in sc[base].items()}, {q: 100 * v[m] for q, v in sc[n].items()})
            cells.append(f"{r['diff']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]"); k = r["n"]
        lines.append(f"| {n} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path); ap.add_argument("--save", type=Path)
    ap.add_argument("--common", action="store_true", help="keep only the questions every run answered (runs stopped at different counts)")
    a = ap.parse_args()
    sc = scores(a.runs)
    if a.common:
        ids = set.intersection(*(set(v) for v in sc.values()))
        sc = {n: {q: v for q, v in qs.items() if q in ids} for n, qs in sc.items()}
    if a.save: a.save.write_text(json.dumps(sc, indent=0))
    print(table(sc))


if __name__ == "__main__": main()
