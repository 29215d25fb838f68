"""What CARA's causal module did in a finished run: `causal_distribution` of its prediction rows (assessed Neighbors
results, candidates scored and unassessed, the Eq. 4 scores by the paper's scale band, the c/e/p levels, the gold
passages' scores for evaluation, the fill from BM25), written as a Markdown table (a step of
experiments/cara-musique100-gold-search.toml).

    python experiments/steps/cara_causal_scores.py runs/musique100-cara-gold_search-full runs/reports/X.md
"""
import json, sys
from pathlib import Path
from megrag_kit.cara import causal_distribution
from megrag_kit.runner import read_predictions

run, out = Path(sys.argv[1]), Path(sys.argv[2])
rows = [r for r in read_predictions(run / "predictions.jsonl") if not r.get("failed")]
d = causal_distribution(rows)
mf = json.loads((run / "run.json").read_text())
p = mf["params"]
lines = [f"# The causal module's scores in `{run.name}`", "",
         f"{d['questions']} questions of {mf['dataset']} (first {mf.get('limit')}), policy={p['policy']}, "
         f"variant={p['variant']}, decoding={p['decoding']}, {mf['llm']} as the causal module, neighbors_k="
         f"{p['neighbors_k']}. Regenerate: `python experiments/steps/cara_causal_scores.py {run} {out}`.", "",
         "| assessed Neighbors results | failed (no candidate scored) | candidates | scored | unassessed (no score, "
         "never a 0) |", "|---|---|---|---|---|",
         f"| {d['calls']} | {d['failed_calls']} | {d['candidates']} | {d['scored']} | {d['unassessed']} |", "",
         "Eq. 4 score of the scored candidates, by the paper's scale band:", "",
         "| " + " | ".join(d["scores"]) + " |", "|" + "---|" * len(d["scores"]),
         "| " + " | ".join(str(v) for v in d["scores"].values()) + " |", "",
         "Levels of the three scores (c consequentiality, e essentiality, p path consistency; the schema allows 0, "
         "0.25, 0.5, 0.75, 1):", "", "| score | " + " | ".join(str(x) for x in (0, 0.25, 0.5, 0.75, 1)) + " |",
         "|---|" + "---|" * 5]
for k in "cep":
    lv = {float(a): b for a, b in d["levels"][k].items()}
    lines.append(f"| {k} | " + " | ".join(str(lv.get(x, 0)) for x in (0, 0.25, 0.5, 0.75, 1)) + " |")
lines += ["", "Against the gold passages (evaluation only; the method never reads them):", "",
          "| gold candidates | mean score, gold | mean score, other | Neighbors results holding a gold passage | "
          "causal top is gold % | BM25 top is gold % |", "|---|---|---|---|---|---|",
          f"| {d['gold_candidates']} | {d['gold_mean_score']} | {d['other_mean_score']} | {d['calls_with_gold']} | "
          f"{d['causal_top_gold_pct']} | {d['bm25_top_gold_pct']} |", "",
          "The fill (ranking positions after the fused list, from the question's BM25 GlobalSearch order, depth "
          f"{p['depth']}): appended {d['appended']} nodes per question, filled {d['filled']}, "
          f"{d['questions_all_bm25']} rankings with no appended node.", ""]
out.write_text("\n".join(lines))
print("\n".join(lines))
