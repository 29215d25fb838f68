"""CARA's sweep table and figure from the run folders of `benchmarks/cara_sweeps.sh N`: MRR, Hit@1, Recall@20 (x100)
and the cost per question for each value of lambda (Eq. 3), alpha (Eq. 4) and each budget (agents x T_max); the
figure plots MRR against the LLM calls per question for the budget grid, one line per number of agents.

    python benchmarks/cara_sweep_table.py N [DECODING]     # prints Markdown; writes benchmarks/results/2wiki<N>-cara-budget-<DECODING>.png
"""
import sys
from pathlib import Path
from megrag_kit.report import load_summary

if len(sys.argv) < 2: sys.exit(__doc__)
N, D = int(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "schema")
root = Path("runs")
def row(name, label):
    d = root / f"2wiki{N}-cara-sweep-{D}-{name}"
    if not (d / "summary.json").exists(): return None
    s = load_summary(d)
    return dict(label=label, n=s["n"], mrr=s["mrr"], hit1=s["hit@1"], r20=s["recall@20"], calls=s["llm_calls"],
                agent=s.get("agent_calls"), causal=s.get("causal_calls"), missing=s.get("causal_missing_pct"), tokens=s["tokens"], lat=s["latency_s"])
head = "| {} | n | MRR | Hit@1 | Recall@20 | LLM calls/q | causal calls/q | causal missing % | tokens/q | latency s/q |\n|---|---|---|---|---|---|---|---|---|---|"
fmt = lambda r: (f"| {r['label']} | {r['n']} | {r['mrr']:.1f} | {r['hit1']:.1f} | {r['r20']:.1f} | {r['calls']:.1f} | {r['causal'] or 0:.1f} | "
                 f"{'–' if r['missing'] is None else format(r['missing'], '.1f')} | {r['tokens']:,.0f} | {r['lat']:.1f} |")
print(f"CARA sweeps on the first {N} 2WikiMultiHopQA questions (corpus graph, SmolLM2-135M, decoding={D}); "
      "base: 2 agents, T_max 3, lambda = alpha = 0.5.\n")
for title, items in [("lambda (Eq. 3)", [(f"lam{v}", f"lambda = {v}") for v in ("0", "0.25", "0.5", "0.75", "1")]),
                     ("alpha (Eq. 4)", [(f"alpha{v}", f"alpha = {v}") for v in ("0", "0.25", "0.75", "1")]),
                     ("budget", [(f"m{m}t{t}", f"{m} agents, T_max {t}") for m in (1, 2, 3) for t in (3, 5, 10)])]:
    rows = [r for r in (row(n, l) for n, l in items) if r]
    if not rows: continue
    print(head.format(title)); [print(fmt(r)) for r in rows]; print()
budget = [(m, t, row(f"m{m}t{t}", "")) for m in (1, 2, 3) for t in (3, 5, 10)]
budget = [(m, t, r) for m, t, r in budget if r]
if budget:
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt, seaborn as sns
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sns.lineplot(x=[r["calls"] for _, _, r in budget], y=[r["mrr"] for _, _, r in budget], hue=[f"{m} agent{'s' * (m > 1)}" for m, _, _ in budget],
                 marker="o", ax=ax)
    for m, t, r in budget: ax.annotate(f"T={t}", (r["calls"], r["mrr"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xlabel="LLM calls per question (agents + causal module)", ylabel="MRR (x100)",
           title=f"CARA budget sweep, 2Wiki, n = {budget[0][2]['n']} questions ({D} decoding)")
    out = Path("benchmarks/results") / f"2wiki{N}-cara-budget-{D}.png"
    fig.tight_layout(); fig.savefig(out, dpi=130); print(f"figure: {out}")
