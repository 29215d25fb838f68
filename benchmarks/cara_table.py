"""CARA's side-by-side table from finished run folders: Hit@1, Recall@20, MRR (x100, 95% bootstrap interval), paired
bootstrap differences of CARA against each other configuration (10,000 resamples, seed 0), and the per-query cost
table (the paper's Table 4 counts). Prints Markdown.

    python benchmarks/cara_table.py runs/2wiki20-cara-full runs/2wiki20-cara-no_causal runs/2wiki20-cara-count runs/2wiki20-cara-global_search
The first folder is the reference of the paired differences.
"""
import sys
from pathlib import Path
from megrag_kit.report import load_summary
from megrag_kit.runner import compare_runs

METRICS = ("hit@1", "recall@20", "mrr")
runs = [Path(a) for a in sys.argv[1:]]
if not runs: sys.exit(__doc__)
sums = {d: load_summary(d) for d in runs}
ci = lambda s, k: f"{s[k]:.1f} [{s['ci'][k][0]:.1f}, {s['ci'][k][1]:.1f}]" if k in s else "–"
print("| run | n | Hit@1 | Recall@20 | MRR |\n|---|---|---|---|---|")
for d, s in sums.items(): print(f"| {d.name} | {s['n']} | " + " | ".join(ci(s, m) for m in METRICS) + " |")
ref = runs[0]
print(f"\nPaired bootstrap, `{ref.name}` minus each run (x100, 95% interval; P = share of resamples <= 0):\n")
print("| against | " + " | ".join(METRICS) + " |\n|---|" + "---|" * len(METRICS))
for d in runs[1:]:
    r = compare_runs(ref, d, METRICS)
    print(f"| {d.name} | " + " | ".join(f"{r[m]['diff']:+.1f} [{r[m]['lo']:+.1f}, {r[m]['hi']:+.1f}] P={r[m]['p_le_0']:.2f}" for m in METRICS) + " |")
cols = [("agent calls", "agent_calls"), ("causal calls", "causal_calls"), ("tokens", "tokens"), ("GlobalSearch", "global_search_calls"),
        ("Neighbors", "neighbors_calls"), ("nodes examined", "nodes_examined"), ("latency s", "latency_s"),
        ("agent unparsed %", "agent_unparsed_pct"), ("causal missing %", "causal_missing_pct"), ("appended", "appended")]
print("\nCost per query (means; summed over the agents):\n")
print("| run | " + " | ".join(c for c, _ in cols) + " |\n|---|" + "---|" * len(cols))
fmt = lambda v: "–" if v is None else (f"{v:,.0f}" if isinstance(v, (int, float)) and abs(v) >= 100 else f"{v:g}")
for d, s in sums.items(): print(f"| {d.name} | " + " | ".join(fmt(s.get(k)) for _, k in cols) + " |")
