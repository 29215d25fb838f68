"""EviReform's retrieval table: Recall@5, Recall@10 and Chain@5 of finished runs with 95% bootstrap intervals, the
policy-health counters of each run beside them, and paired bootstrap differences (10,000 resamples, paired by question
id) of each run against the first one, each flagged when its two sides cannot differ (`contrast_flag`).

    python benchmarks/evireform_table.py RUN_DIR... [--save benchmarks/results/NAME.scores.json] [--common]
                                         [--pairs A:B ...]

`--save` writes the per-question scores (`{run name: {question id: {metric: 0..1}}}`) so the table can be rebuilt
without the run folders (the EviReform notebook reads that file). `--pairs A:B` adds the contrast run A minus run B
(run names, or folder names) to the paired differences against the first run."""
import argparse, json
from pathlib import Path
from megrag_kit.evireform import contrast_flag, evireform_summary
from megrag_kit.metrics import bootstrap_ci, paired_bootstrap
from megrag_kit.runner import read_predictions

METRICS = ("recall@5", "recall@10", "chain@5")
HEALTH = {"selector unparsed %": "selector_unparsed", "select-all %": "select_all", "seed fallback %": "seed_fallback",
          "writer unparsed %": "writer_unparsed", "copied queries": "copied_queries", "copy questions %": "copied_questions",
          "residual fallback %": "residual_fallback", "mean queries": "mean_queries", "chain initial %": "chain_initial",
          "chain expanded %": "chain_expanded", "became complete": "became_complete"}


def load(run_dirs) -> tuple[dict, dict, dict]:
    """`(scores, rows, params)`: `scores` `{run name: {qid: {metric: value}}}`, `rows` `{run name: {qid: prediction row}}`
    and `params` `{run name: run.json params}` from the runs (failed rows left out); a repeated run name is replaced by
    the folder's name."""
    sc, rows, params = {}, {}, {}
    for d in run_dirs:
        mf = json.loads((Path(d) / "run.json").read_text())
        rs = [r for r in read_predictions(Path(d) / "predictions.jsonl") if not r.get("failed")]
        name = mf.get("run_name", mf["method"])
        if name in sc: name = Path(d).name                    # two runs of one variant (a sweep): the folder tells them apart
        sc[name] = {r["id"]: {m: r[m] for m in METRICS if m in r} for r in rs}
        rows[name] = {r["id"]: r for r in rs}; params[name] = mf.get("params", {})
    return sc, rows, params


def scores(run_dirs) -> dict:
    "`{run name: {qid: {metric: value}}}` from the runs' predictions (see `load`)."
    return load(run_dirs)[0]


def _diff_row(sc, a, b, flag="") -> str | None:
    if not set(sc[a]) & set(sc[b]): return None                # nothing to pair (a run not started yet)
    cells, k = [], 0
    for m in METRICS:
        r = paired_bootstrap({q: 100 * v[m] for q, v in sc[a].items()}, {q: 100 * v[m] for q, v in sc[b].items()})
        cells.append(f"{r['diff']:+.2f} [{r['lo']:+.2f}, {r['hi']:+.2f}]"); k = r["n"]
    return f"| {a} minus {b} | {k} | " + " | ".join(cells) + f" | {flag or ''} |"


def table(sc: dict, rows: dict | None = None, params: dict | None = None, pairs=()) -> str:
    """Markdown: one row per run (mean and 95% interval per metric), the health counters of the runs that have them
    (from `evireform_summary` of their rows), then the paired differences, the first run minus each other run and
    each of `pairs` `(a, b)`, with `contrast_flag`'s reason where the sides cannot (or did not) differ."""
    names = list(sc); base = names[0]
    lines = ["| run | n | " + " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for n in names:
        cells = []
        for m in METRICS:
            mean, lo, hi = bootstrap_ci([v[m] for v in sc[n].values()])
            cells.append(f"{100 * mean:.2f} [{100 * lo:.2f}, {100 * hi:.2f}]")
        lines.append(f"| {n} | {len(sc[n])} | " + " | ".join(cells) + " |")
    if rows:
        summ = {n: evireform_summary([rows[n][q] for q in sc[n] if q in rows[n]]) for n in names}
        hl = [n for n in names if summ[n]]
        if hl:
            lines += ["", "Policy health (each a rule or an unusable reply standing in for an LLM decision; % of questions, "
                      "copied queries a count) and coverage:", "",
                      "| run | " + " | ".join(HEALTH) + " |", "|---|" + "---|" * len(HEALTH)]
            for n in hl: lines.append(f"| {n} | " + " | ".join("" if summ[n].get(k) is None else str(summ[n][k]) for k in HEALTH.values()) + " |")
    lines += ["", "Paired differences (points, 95% paired-bootstrap interval); `flag`: why the two sides cannot differ, or did not:", "",
              "| contrast | n | " + " | ".join(METRICS) + " | flag |", "|---|---|" + "---|" * len(METRICS) + "---|"]
    flag = lambda a, b: contrast_flag([rows[a][q] for q in sc[a]], [rows[b][q] for q in sc[b]], params[a], params[b]) if rows and params else ""
    for a, b in [(base, n) for n in names[1:]] + [tuple(p) for p in pairs]:
        if (line := _diff_row(sc, a, b, flag(a, b))): lines.append(line)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path); ap.add_argument("--save", type=Path)
    ap.add_argument("--common", action="store_true", help="keep only the questions every run answered (runs stopped at different counts)")
    ap.add_argument("--pairs", nargs="*", default=[], help="A:B contrasts (run names) beside those against the first run")
    a = ap.parse_args()
    sc, rows, params = load(a.runs)
    if a.common:
        ids = set.intersection(*(set(v) for v in sc.values()))
        sc = {n: {q: v for q, v in qs.items() if q in ids} for n, qs in sc.items()}
    pairs = [p.split(":") for p in a.pairs]
    if bad := [p for p in pairs if len(p) != 2 or not set(p) <= set(sc)]:
        raise SystemExit(f"--pairs: {bad} are not A:B with both among the runs {sorted(sc)}")
    if a.save: a.save.write_text(json.dumps(sc, indent=0))
    print(table(sc, rows, params, pairs))


if __name__ == "__main__": main()
