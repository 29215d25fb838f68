"""Extract EviReform's propositions over a whole corpus and report time and yield (EviReform paper, Appendix: proposition
index; the cost note of the EviReform notebook).

    python experiments/steps/evireform_extract.py [--dataset 2wikimultihopqa] [--openie-backend parser] [--out FILE.json]

Fills the evidence store's proposition view eagerly (resumable: passages already in the proposition file are kept) and
prints, as JSON, the file, the passages extracted by this call and the seconds it took, the yield over the file
(propositions per passage that has any, passages with none and the share of them) and the distinct entities. With
`--openie-backend llm` it would run the offline LLM over every passage (hours); the parser backend takes seconds."""
import argparse, json, time
from pathlib import Path
from megrag_kit.data import load_dataset
from megrag_kit.evireform import PropositionIndex, proposition_view
from megrag_kit.method import Resources


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="2wikimultihopqa"); ap.add_argument("--openie-backend", default="parser", choices=("llm", "parser"))
    ap.add_argument("--llm", default="smollm2-135m"); ap.add_argument("--device", default="cpu"); ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    ds = load_dataset(a.dataset)
    res = Resources(ds, llm=a.llm, embedder=None, device=a.device, openie_backend=a.openie_backend)
    view = proposition_view(res.store, "lazy")
    before = len(view.extracted)
    t0 = time.perf_counter(); c = view.extract(range(len(ds.corpus))); dt = time.perf_counter() - t0
    idx = PropositionIndex(view, len(ds.corpus))
    ok = [p for p in view.extracted if p not in view.failures]
    rep = dict(dataset=a.dataset, backend=a.openie_backend, file=view.path.name, passages=len(ds.corpus), already_done=before,
               extracted_now=c["done"], seconds=round(dt, 1), s_per_passage=round(dt / max(c["done"], 1), 4),
               propositions=len(idx), propositions_per_passage=round(len(idx) / max(len(ok), 1), 3),
               passages_without=len(view.failures), passages_without_pct=round(100 * len(view.failures) / max(len(view.extracted), 1), 2),
               entities=len(idx.entities), entities_per_proposition=round(sum(map(len, idx.ents)) / max(len(idx), 1), 3))
    print(json.dumps(rep, indent=1))
    if a.out: Path(a.out).write_text(json.dumps(rep, indent=1) + "\n")


if __name__ == "__main__":
    main()
