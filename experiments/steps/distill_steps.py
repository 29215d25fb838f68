"""What a MEGRAG policy does with its steps, from finished run folders (the distillation note's "what the student gets
wrong"): for each run, the steps that continued (a node that did not stop and wrote a next query) split by what that
next query is, and, where the dataset has gold decompositions (MuSiQue), how often the first step's intermediate
answer is the first gold sub-answer.

    python experiments/steps/distill_steps.py runs/distill/musique100-student-v2 runs/distill/musique100-base-student-prompt

Next-query classes (exclusive, in this order): `repeats` the step's own query; `answer`: is, or starts with, the
step's intermediate answer; `no question`: does not end with "?"; `new question`: the rest. `hop-1 answer`: the
first node's intermediate answer has token F1 >= 0.5 with the first gold sub-question's answer (questions with a
decomposition only). `step-1 gold`: questions whose first step was shown at least one gold passage. Reads the dataset named in each run's run.json (`MEGRAG_KIT_DATA` where it is not shipped)."""
import json, sys
from collections import Counter
from pathlib import Path
from megrag_kit.data import load_dataset
from megrag_kit.metrics import f1_score
from megrag_kit.runner import read_predictions


def next_query_class(node: dict) -> str:
    nq, q = (node.get("next_query") or "").strip(), (node.get("query") or "").strip()
    b = (node.get("intermediate_answer") or "").strip()
    if nq == q: return "repeats"
    if b and nq.startswith(b): return "answer"
    if not nq.endswith("?"): return "no question"
    return "new question"


def main(folders):
    print("| run | n | continued steps | repeats its query | is its answer | no question | new question | "
          "hop-1 answer right / with decomposition | step-1 gold |")
    print("|---|---|---|---|---|---|---|---|---|")
    cache = {}
    for f in map(Path, folders):
        ds_name = json.loads((f / "run.json").read_text())["dataset"]
        if ds_name not in cache: cache[ds_name] = {q.qid: q for q in load_dataset(ds_name).questions}
        qs, rows = cache[ds_name], [r for r in read_predictions(f / "predictions.jsonl") if not r.get("failed")]
        c, hop1, n_dec, seen = Counter(), 0, 0, 0
        for r in rows:
            nodes = r["trace"]["nodes"]
            seen += bool(set(map(str, r["gold_pids"])) & set(map(str, nodes[0].get("retrieved") or [])))
            for nd in nodes:
                if not nd.get("stop") and (nd.get("next_query") or "").strip(): c[next_query_class(nd)] += 1
            dec = getattr(qs.get(r["id"]), "decomposition", None)
            if dec:
                n_dec += 1
                hop1 += f1_score(nodes[0].get("intermediate_answer") or "", [dec[0]["answer"]]) >= 0.5
        tot = sum(c.values())
        pct = lambda k: f"{c[k]} ({100 * c[k] / tot:.0f}%)" if tot else "0"
        print(f"| {f.name} | {len(rows)} | {tot} | {pct('repeats')} | {pct('answer')} | {pct('no question')} | "
              f"{pct('new question')} | " + (f"{hop1} / {n_dec}" if n_dec else "–") + f" | {seen} |")


if __name__ == "__main__":
    main(sys.argv[1:])
