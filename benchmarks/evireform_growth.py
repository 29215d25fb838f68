"""EviReform's index-growth experiment (EviReform paper, Appendix: index growth, Figure A.3): MuSiQue questions in five
cumulative groups, the index at level g = the context paragraphs of groups 1..g, retrieval always evaluated on group 1.

    python benchmarks/evireform_growth.py [--dataset musique] [--groups 5] [--limit N] [--variants dense bm25 full]
                                          [--set k=v ...] [--out runs/musique-growth] [--device cpu] [--batch-size 4]

Each (level, variant) is an ordinary resumable run folder `OUT/g{level}-{variant}` (the manifest records the level and
the index size); a killed run continues where it stopped, and propositions extracted at one level are reused at every
other (one evidence store over the whole corpus, searched through `RestrictedStore`). Prints, per variant, Recall@5,
Recall@10 and Chain@5 against the number of indexed passages, and writes the table to `OUT/growth.md`."""
import argparse, json
from pathlib import Path
from megrag_kit.core import Dataset
from megrag_kit.data import load_dataset
from megrag_kit.evireform import growth_levels, restrict
from megrag_kit.method import Resources, build_method
from megrag_kit.metrics import bootstrap_ci
from megrag_kit.runner import read_predictions, run

METRICS = ("recall@5", "recall@10", "chain@5")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="musique"); ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None, help="evaluate only the first N questions of group 1")
    ap.add_argument("--variants", nargs="+", default=["dense", "bm25", "full"])
    ap.add_argument("--set", nargs="*", default=["pool_x=6", "pool_r=3"], help="EviReform parameters k=v for every variant")
    ap.add_argument("--out", default="runs/musique-growth"); ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=4); ap.add_argument("--llm", default="smollm2-135m"); ap.add_argument("--embedder", default="minilm")
    a = ap.parse_args(argv)
    ds = load_dataset(a.dataset)
    levels = growth_levels(ds, a.groups)
    group1 = Dataset(ds.name, ds.questions[:levels[0]["index_questions"]], ds.corpus, ds.source, ds.license)
    params = dict(kv.split("=", 1) for kv in a.set)
    rows = []
    for lv in levels:
        for v in a.variants:
            res = restrict(Resources(ds, llm=a.llm, embedder=a.embedder, device=a.device, batch_size=a.batch_size), lv["passages"])
            m = build_method("evireform", {**params, "variant": v}, res)
            out = Path(a.out) / f"g{lv['level']}-{v}"
            info = dict(level=lv["level"], groups=a.groups, index_questions=lv["index_questions"], index_passages=lv["n_passages"])
            run(m, group1, out, limit=a.limit, batch_size=a.batch_size, manifest=dict(index_growth=info))
            got = [r for r in read_predictions(out / "predictions.jsonl") if not r.get("failed")][:a.limit or None]
            rows.append(dict(**info, variant=v, n=len(got), **{k: [100 * x for x in bootstrap_ci([r[k] for r in got])] for k in METRICS}))
            print(json.dumps({k: rows[-1][k] for k in ("level", "index_passages", "variant", "n")} | {k: round(rows[-1][k][0], 2) for k in METRICS}), flush=True)
    lines = [f"Index growth on {ds.name}: retrieval of group 1 ({levels[0]['index_questions']} questions"
             + (f", first {a.limit} evaluated" if a.limit else "") + f") as the index grows; {a.groups} cumulative groups; "
             "mean and 95% bootstrap interval, percent", "",
             "| level | indexed questions | indexed passages | variant | n | " + " | ".join(METRICS) + " |", "|---|---|---|---|---|" + "---|" * len(METRICS)]
    for r in rows:
        lines.append(f"| {r['level']} | {r['index_questions']} | {r['index_passages']} | {r['variant']} | {r['n']} | "
                     + " | ".join(f"{r[k][0]:.2f} [{r[k][1]:.2f}, {r[k][2]:.2f}]" for k in METRICS) + " |")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "growth.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
