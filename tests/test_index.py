"""The evidence store with the real offline models (slow: MiniLM, SmolLM2) and the parser's OpenIE (slow: spaCy is
loaded, an optional extra it is skipped without). The other tests, with the shared stand-ins (`megrag_kit.testing`) and
MiniLM's tokenizer alone (no weights), are in the notebooks beside the code they test (nbs/03_retrievers.ipynb,
04_index, 04a_index_views, 04b_index_openie; the index stage of a run in 90_runner), run by nbdev_test."""
import json, re
import numpy as np
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore, IndexMismatchError, is_grounded, split_sentences
from megrag_kit.models import Embedder
from megrag_kit.retrievers import DenseIndex, slug
from conftest import needs_spacy


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.mark.slow
def test_dense_retrieval_finds_gold_on_demo(demo, minilm, tmp_path):
    store = EvidenceStore(demo, minilm, root=tmp_path, show_progress=False)
    hits = store.search([q.question for q in demo.questions], k=10)
    recall = sum(len(set(q.gold_pids) & {p for p, _ in h}) / len(q.gold_pids) for q, h in zip(demo.questions, hits)) / len(hits)
    assert recall > 0.6                                   # MiniLM on 10-paragraph contexts
    assert all(h[0][1] >= h[-1][1] for h in hits)         # best first
    assert minilm.model_id.startswith("all-MiniLM-L6-v2")
    meta = json.loads((tmp_path / "vectors" / slug(minilm.model_id) / "passages.meta.json").read_text())
    assert meta["model_id"] == minilm.model_id and meta["dim"] == 384 and meta["n"] == len(demo.corpus)
    # reloading reads the saved index instead of re-embedding
    again = EvidenceStore(demo, minilm, root=tmp_path, show_progress=False)
    (top3,) = again.search([demo.questions[0].question], 3)
    assert [p for p, _ in top3] == [p for p, _ in hits[0][:3]]
    assert [s for _, s in top3] == pytest.approx([s for _, s in hits[0][:3]], abs=1e-5)
    sims = again.dense.similarities([demo.questions[0].question])
    assert int(sims[0].argmax()) == top3[0][0]


@pytest.mark.slow
def test_vectors_of_another_model_are_refused(demo, minilm, demo_store):
    "MiniLM's saved demo vectors (the shared session copy), asked for by an embedder of the same name and another dim."
    class SameNameOtherDim(Embedder): model_id, dim = minilm.model_id, 768
    with pytest.raises(IndexMismatchError, match="dim 384"):
        EvidenceStore(demo, SameNameOtherDim(), root=demo_store).search(["x"], 1)


@pytest.mark.slow
def test_minilm_windows_find_the_tails_of_long_passages(demo, minilm, tmp_path):
    texts = [p.content for p in demo.corpus]
    lengths = [len(minilm.model.tokenizer(t)["input_ids"]) for t in texts]
    long = [i for i, n in enumerate(lengths) if n > 256]
    with pytest.warns(UserWarning, match=f"^{len(long)} of {len(texts)} texts are longer than the 256-token input limit"):
        cut = DenseIndex(texts, minilm, tmp_path, show_progress=False).build()
    win = DenseIndex(texts, minilm, tmp_path, chunking="window", show_progress=False).build()
    assert (cut.meta["max_tokens"], cut.meta["n_long"], cut.meta["n_truncated"], cut.meta["longest_tokens"]) == (256, len(long), len(long), max(lengths))
    assert (win.meta["n_long"], win.meta["n_truncated"]) == (len(long), 0) and win.meta["n_windows"] > len(texts) + len(long)
    # a passage that fits is one window holding the text itself: the same vector either way
    short = [i for i in range(len(texts)) if i not in long]
    first = np.searchsorted(win.owners, short)
    np.testing.assert_allclose(win.vectors()[first], cut.vectors()[short], atol=1e-5)
    # the last sentence of each long passage, past its first 256 word pieces, as a query: the windows see it
    tails = [split_sentences(demo.corpus[i].text)[-1] for i in long]
    sc, sw = cut.similarities(tails), win.similarities(tails)
    own_c, own_w = sc[np.arange(len(long)), long], sw[np.arange(len(long)), long]
    assert np.all(own_w >= own_c - 1e-5) and np.mean(own_w - own_c) > 0.1
    top1 = lambda s: sum(int(r.argmax()) == i for r, i in zip(s, long))
    assert top1(sw) > top1(sc)


@pytest.mark.slow
def test_lazy_triples_with_the_real_model_are_grounded(demo, smollm, tmp_path):
    # one passage per call: greedy outputs of a padded batch can differ from single ones; 0 yields triples, 1 and 8 fail
    store = EvidenceStore(demo, llm=smollm, root=tmp_path, openie_batch=1, show_progress=False)
    pids = [0, 1, 8]
    c = store.extract_triples(pids)
    assert c["done"] == len(pids) and c["failed"] == len(store.openie_failures)
    kept = {p: store.triples(p) for p in pids}
    assert sum(bool(t) for t in kept.values()) >= 1              # the real model yields grounded triples for some passage
    for p, triples in kept.items():
        content = demo.corpus[p].content
        assert all(is_grounded(t, content) for _, t in triples)  # every kept triple names words of its passage
        assert [tid for tid, _ in triples] == [f"t{p}.{j}" for j in range(len(triples))]
        assert bool(triples) != (p in store.openie_failures)     # a passage with nothing kept is a recorded failure
    # the file holds one line per passage, failures with their reason
    rows = [json.loads(l) for l in store.triples_path().read_text().splitlines()]
    assert sorted(r["pid"] for r in rows) == sorted(pids)
    assert {r["pid"]: r["error"] for r in rows if r["error"]} == store.openie_failures


@needs_spacy
@pytest.mark.slow
def test_parser_openie_rules_give_these_triples():
    from megrag_kit.index import default_parser
    got = default_parser().extract([
        "Pirates of Treasure Island\nPirates of Treasure Island is a 2006 American film produced by The Asylum. It was directed by Leigh Scott.",
        "Mordechai Rotenberg\nMordechai Rotenberg is an Israeli professor of social work at the Hebrew University of Jerusalem.",
        "Nothing\nOh."])
    assert got[0] == [("Pirates of Treasure Island", "is", "2006 American film"), ("Pirates of Treasure Island", "produced by", "The Asylum"),
                      ("Pirates of Treasure Island", "was directed by", "Leigh Scott")]
    assert got[1] == [("Mordechai Rotenberg", "is", "Israeli professor of social work"),
                      ("Mordechai Rotenberg", "professor at", "Hebrew University of Jerusalem")]
    assert got[2] == []


@needs_spacy
@pytest.mark.slow
def test_parser_backend_of_the_store_writes_its_own_file_and_resumes(tmp_path):
    from megrag_kit.index import default_parser
    demo = load_dataset("demo")
    store = EvidenceStore(demo, root=tmp_path, show_progress=False, openie_backend="parser")
    assert store.triples_path() == tmp_path / "triples" / f"{slug(default_parser().model_id)}.jsonl"
    rep = store.build(["triple"], pids=[7, 8, 9])
    assert rep["passages_with_openie"] == 3 and rep["openie_done"] == 3
    ts = store.triples(7)
    assert ts and all(is_grounded(t, demo.corpus[7].content) for _, t in ts)
    lines = store.triples_path().read_text().splitlines()
    assert [json.loads(x)["pid"] for x in lines] == [7, 8, 9]
    again = EvidenceStore(demo, root=tmp_path, show_progress=False, openie_backend="parser")
    assert again.triples(7) == ts and again.extract_triples([7, 8, 9])["done"] == 0
    assert store.triples_path().read_text().splitlines() == lines       # nothing parsed twice
    with pytest.raises(ValueError, match=re.escape("openie_backend must be llm|parser, got 'spacy'")): EvidenceStore(demo, root=tmp_path, openie_backend="spacy")
