"""Count-based fusion (the paper's Table 3 ablation) from a finished CARA run: the same agents' lists (saved in each
row as `agent_lists`), aggregated by `count_fusion` instead of RRF and filled with the question's BM25 GlobalSearch
order (taken from a `variant=global_search` run of the same questions), as `CARA(variant=count)` would rank them with
the same seeds. The agents are not run again: on a CPU this halves the cost of the ablation. Writes a run folder
(run.json, predictions.jsonl, summary.json) that `megrag-kit report` reads like any other
(a step of experiments/cara-*.toml).

    python experiments/steps/cara_refuse.py runs/2wiki3-cara-full runs/2wiki3-cara-global_search runs/2wiki3-cara-count
"""
import json, sys
from pathlib import Path
from megrag_kit.cara import cara_summary, count_fusion
from megrag_kit.core import Question
from megrag_kit.jsonl import JsonlAppender
from megrag_kit.runner import read_predictions, score, summarize

full, gs, out = map(Path, sys.argv[1:4])
mf = json.loads((full / "run.json").read_text())
if mf["params"]["variant"] != "full": sys.exit(f"{full} is not a variant=full run")
base = {r["id"]: r["retrieved"] for r in read_predictions(gs / "predictions.jsonl")}
out.mkdir(parents=True, exist_ok=True)
(out / "predictions.jsonl").unlink(missing_ok=True)
(out / "predictions.jsonl.gz").unlink(missing_ok=True)      # a compressed earlier result: the appender would restore it
rows = []
with JsonlAppender(out / "predictions.jsonl", what="prediction") as log:
    for r in read_predictions(full / "predictions.jsonl"):
        if r.get("failed"): continue
        fused = [v for v, _ in count_fusion(r["agent_lists"])]
        depth = mf["params"]["depth"]
        rank = (fused + [v for v in base[r["id"]] if v not in set(fused)])[:depth]
        q = Question(r["id"], r["question"], r["gold_answers"], r["gold_pids"], r.get("qtype"))
        keep = {k: v for k, v in r.items() if k not in ("retrieved",) and "@" not in k and k not in ("mrr", "em", "f1", "acc")}
        row = {**keep, "retrieved": rank, "derived_from": str(full), **score(q, r["prediction"], rank)}
        log.write(row); rows.append(row)
mf = {**mf, "params": {**mf["params"], "variant": "count"}, "run_name": "cara-count", "derived_from": str(full)}
(out / "run.json").write_text(json.dumps(mf, indent=1))
(out / "summary.json").write_text(json.dumps({**summarize(rows), **cara_summary(rows), "manifest": mf}, indent=1))
print(f"wrote {out} ({len(rows)} questions)")
