"""CARA's side-by-side table from finished run folders: Hit@1, Recall@20, MRR (x100, 95% bootstrap interval), paired
bootstrap differences of the first run against each other one (10,000 resamples, seed 0; a contrast that cannot
differ under its settings is flagged by `contrast_note` instead of printed as a zero difference), the per-query cost
table (the paper's Table 4 counts) and the policy-health counters (who decided the steps, unparsed replies by kind,
fallback uses, failed causal calls). Prints Markdown.

    python benchmarks/cara_table.py runs/musique200-cara-gold runs/musique200-cara-global_search
The first folder is the reference of the paired differences.
"""

import sys
from pathlib import Path
from megrag_kit.cara import contrast_note
from megrag_kit.report import load_summary
from megrag_kit.runner import compare_runs

METRICS = ("hit@1", "recall@20", "mrr")
runs = [Path(a) for a in sys.argv[1:]]
if not runs:
    sys.exit(__doc__)
sums = {d: load_summary(d) for d in runs}
ci = lambda s, k: f"{s[k]:.1f} [{s['ci'][k][0]:.1f}, {s['ci'][k][1]:.1f}]" if k in s else "–"
print("| run | n | Hit@1 | Recall@20 | MRR |\n|---|---|---|---|---|")
for d, s in sums.items():
    print(f"| {d.name} | {s['n']} | " + " | ".join(ci(s, m) for m in METRICS) + " |")
ref = runs[0]
if runs[1:]:
    print(f"\nPaired bootstrap, `{ref.name}` minus each run (x100, 95% interval; P = share of resamples <= 0):\n")
    print("| against | n | " + " | ".join(METRICS) + " | note |\n|---|---|" + "---|" * len(METRICS) + "---|")
for d in runs[1:]:
    note = contrast_note(ref, d)
    if note.startswith("identical by construction"):
        print(f"| {d.name} | – | " + " | ".join("–" for _ in METRICS) + f" | {note} |")
        continue
    r = compare_runs(ref, d, METRICS)
    print(
        f"| {d.name} | {r[METRICS[0]]['n']} | "
        + " | ".join(
            f"{r[m]['diff']:+.1f} [{r[m]['lo']:+.1f}, {r[m]['hi']:+.1f}] P={r[m]['p_le_0']:.2f}" for m in METRICS
        )
        + f" | {note} |"
    )
fmt = lambda v: "–" if v is None else (f"{v:,.0f}" if isinstance(v, (int, float)) and abs(v) >= 100 else f"{v:g}")
cols = [
    ("agent calls", "agent_calls"),
    ("causal calls", "causal_calls"),
    ("tokens", "tokens"),
    ("GlobalSearch", "global_search_calls"),
    ("Neighbors", "neighbors_calls"),
    ("nodes examined", "nodes_examined"),
    ("latency s", "latency_s"),
    ("appended", "appended"),
]
print("\nCost per query (means; summed over the agents):\n")
print("| run | " + " | ".join(c for c, _ in cols) + " |\n|---|" + "---|" * len(cols))
for d, s in sums.items():
    print(f"| {d.name} | " + " | ".join(fmt(s.get(k)) for _, k in cols) + " |")
health = [
    ("steps by model %", "steps_by_model_pct"),
    ("by rule %", "steps_by_rule_pct"),
    ("by gold %", "steps_by_gold_pct"),
    ("lost %", "steps_lost_pct"),
    ("unparsed %", "agent_unparsed_pct"),
    ("prose %", "agent_prose_pct"),
    ("tool-word prose %", "agent_tool_word_pct"),
    ("invalid %", "agent_invalid_pct"),
    ("fallback uses", "fallback_uses"),
    ("causal failed %", "causal_failed_pct"),
    ("causal missing %", "causal_missing_pct"),
    ("appended by model", "appended_by_model"),
    ("by rule", "appended_by_rule"),
    ("by gold", "appended_by_gold"),
]
print(
    "\nPolicy health (steps: % of agent steps; replies: % of agent calls; causal: % of causal calls / of assessed candidates; "
    "appended: target nodes per question):\n"
)
print("| run | " + " | ".join(c for c, _ in health) + " | actions per question |\n|---|" + "---|" * (len(health) + 1))
for d, s in sums.items():
    acts = (
        "; ".join(
            f"{w}: " + ", ".join(f"{a} {v:g}" for a, v in d_.items()) for w, d_ in (s.get("actions") or {}).items()
        )
        or "–"
    )
    print(f"| {d.name} | " + " | ".join(fmt(s.get(k)) for _, k in health) + f" | {acts} |")
