"""Save one question of a CARA run with node names resolved, for the notebook's walk-through (runs/traces/cara_trace_2wiki.json).

    python experiments/steps/cara_trace.py runs/2wiki3-cara-full [question index, default 0]
Reads the run's predictions.jsonl and run.json, rebuilds (or loads the kept) corpus graph of the dataset's store."""
import json, sys
from pathlib import Path
from megrag_kit.data import load_dataset
from megrag_kit.method import Resources, build_method, get_method
from megrag_kit.runner import read_predictions

run = Path(sys.argv[1]); i = int(sys.argv[2]) if len(sys.argv) > 2 else 0
mf = json.loads((run / "run.json").read_text())
row = read_predictions(run / "predictions.jsonl")[i]
ds = load_dataset(mf["dataset"])
m = build_method("cara", get_method("cara").Config.recorded(mf["params"]), Resources(ds, mf["llm"], None, device="cpu", openie_backend=mf.get("openie_backend", "llm")))
kg = m.kg
name = lambda v: [v, kg.type_of(v), kg.names[v]]
for agent in row["trace"]["agents"]:
    for st in agent:
        if "results" in st: st["results"] = [name(v) for v in st["results"]]
        if "node" in st: st["node"] = name(st["node"])
        if "appended" in st: st["appended"] = [name(v) for v in st["appended"]]
row["agent_lists"] = [[name(v) for v in l] for l in row["agent_lists"]]
row["retrieved_named"] = [name(v) for v in row["retrieved"][:10]]
row["params"] = mf["params"]
out = Path(__file__).resolve().parents[2] / "runs" / "traces" / "cara_trace_2wiki.json"
out.write_text(json.dumps(row, indent=1, ensure_ascii=False)); print("wrote", out)
