"""Markdown table of finished runs, with paired bootstrap differences against reference runs.

    python benchmarks/report_runs.py RUN_DIR... [--against runs/2wiki100-native_rag runs/2wiki100-direct]

Each RUN_DIR holds a `summary.json` and `predictions.jsonl` (`megrag-kit run`). Rows: F1 and EM with their 95%
intervals, n, LLM calls and tokens per question, and for MEGRAG runs mean steps, budget-exhausted %, composition
shares, outputs parsed without repair and evidence recall. Then F1 by question type. The differences are paired on the questions both
runs answered (`megrag-kit compare`), so a 16-question ablation is compared on those 16 questions."""
import argparse, json
from pathlib import Path
from megrag_kit.cli import compare_runs, read_predictions
from megrag_kit.baselines import answer_options


def row(d: Path) -> str:
    s = json.loads((d / "summary.json").read_text())
    m = s["manifest"]; name = m["method"] + (f" ({m['params']['variant']})" if m["params"].get("variant") else "")
    ci = lambda k: f"{s[k]:.2f} [{s['ci'][k][0]:.2f}, {s['ci'][k][1]:.2f}]"
    comp = ", ".join(f"{k} {v:g}" for k, v in s.get("composition", {}).items()) or "–"
    g = lambda k, f="{}": f.format(s[k]) if s.get(k) is not None else "–"
    return (f"| {name} | {s['n']} | {ci('f1')} | {ci('em')} | {s['llm_calls']:.1f} | {s['tokens']:,.0f} | {g('mean_steps')} | "
            f"{g('budget_exhausted')} | {comp} | {g('parsed_without_repair')} | {g('evidence_recall')} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path); ap.add_argument("--against", nargs="*", type=Path, default=[])
    a = ap.parse_args()
    print("| run | n | F1 | EM | LLM calls/q | tokens/q | mean steps | budget exhausted % | composition % | parsed w/o repair % | evidence recall % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in a.runs: print(row(d))
    print("\nF1 by question type, or by answer form where the data has no type (n):\n")
    per = {d: {} for d in a.runs}
    for d in a.runs:
        for r in read_predictions(d / "predictions.jsonl"):   # without a qtype (the 2Wiki 1,000 set has none), group by answer form
            t = r.get("qtype") or ("options (A or B, yes/no)" if answer_options(r["question"]) else "open answer")
            per[d].setdefault(t, []).append(r["f1"])
    types = sorted({t for v in per.values() for t in v})
    print("| run | " + " | ".join(types) + " |"); print("|---|" + "---|" * len(types))
    for d in a.runs:
        cell = lambda t: f"{100 * sum(per[d][t]) / len(per[d][t]):.1f} ({len(per[d][t])})" if per[d].get(t) else "–"
        print(f"| {d.name} | " + " | ".join(cell(t) for t in types) + " |")
    for ref in a.against:
        print(f"\nPaired bootstrap against `{ref.name}` (same questions; difference, 95% CI):\n")
        for d in a.runs:
            if d == ref: continue
            r = compare_runs(d, ref, ("f1", "em"))
            print(f"- {d.name}: F1 {r['f1']['diff']:+.2f} [{r['f1']['lo']:+.2f}, {r['f1']['hi']:+.2f}], "
                  f"EM {r['em']['diff']:+.2f} [{r['em']['lo']:+.2f}, {r['em']['hi']:+.2f}] (n={r['f1']['n']})")


if __name__ == "__main__": main()
