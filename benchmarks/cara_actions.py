"""The agents' actions in CARA run folders: how often each tool was chosen (a `*` marks the fallback that replaced a
reply that was not an action), how many Neighbors calls returned candidates, and the causal module's parse counts.

    python benchmarks/cara_actions.py runs/2wiki-cara-schema-full runs/2wiki100-cara-full
"""
import json, sys
from collections import Counter
from pathlib import Path

if len(sys.argv) < 2: sys.exit(__doc__)
print("| run | questions | agent steps | " + " | ".join(["GlobalSearch", "Neighbors", "Append", "Finish", "fallbacks", "Neighbors with results", "causal lines parsed / missing"]) + " |")
print("|---" * 10 + "|")
for d in map(Path, sys.argv[1:]):
    rows = [json.loads(l) for l in (d / "predictions.jsonl").read_text().splitlines() if l.strip()]
    n_run = json.loads((d / "summary.json").read_text())["n"]
    rows = [r for r in rows if not r.get("failed")][:n_run]        # the questions the summary scores
    tools, fb, nb, parsed, missing = Counter(), 0, 0, 0, 0
    for r in rows:
        for agent in r["trace"]["agents"]:
            for s in agent:
                tools[s["action"]["tool"]] += 1; fb += bool(s["action"].get("fallback"))
                nb += bool(s["action"]["tool"] == "Neighbors" and s.get("results"))
                cc = s.get("causal_counts") or {}; parsed += cc.get("parsed", 0); missing += cc.get("missing", 0)
    steps = sum(tools.values())
    print(f"| {d.name} | {len(rows)} | {steps} | " + " | ".join(str(tools[t]) for t in ("GlobalSearch", "Neighbors", "Append", "Finish")) +
          f" | {fb} | {nb} | {parsed} / {missing} |")
