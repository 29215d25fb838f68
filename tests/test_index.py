import json
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore, IndexMismatchError, split_sentences
from megrag_kit.models import Embedder
from conftest import ScriptedLLM


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


def test_dense_retrieval_finds_gold_on_demo(demo, minilm, tmp_path):
    store = EvidenceStore(demo, minilm, root=tmp_path, show_progress=False)
    hits = store.search([q.question for q in demo.questions], k=10)
    recall = sum(len(set(q.gold_pids) & {p for p, _ in h}) / len(q.gold_pids) for q, h in zip(demo.questions, hits)) / len(hits)
    assert recall > 0.6                                   # MiniLM on 10-paragraph contexts
    assert all(h[0][1] >= h[-1][1] for h in hits)         # best first
    meta = json.loads((tmp_path / "vectors" / "all-MiniLM-L6-v2" / "meta.json").read_text())
    assert meta["model_id"] == "all-MiniLM-L6-v2" and meta["dim"] == 384 and meta["n"] == len(demo.corpus)
    # reloading reads the saved index instead of re-embedding
    again = EvidenceStore(demo, minilm, root=tmp_path, show_progress=False)
    (top3,) = again.search([demo.questions[0].question], 3)
    assert [p for p, _ in top3] == [p for p, _ in hits[0][:3]]
    assert [s for _, s in top3] == pytest.approx([s for _, s in hits[0][:3]], abs=1e-5)


def test_vectors_of_another_model_are_refused(demo, minilm, tmp_path):
    EvidenceStore(demo, minilm, root=tmp_path, show_progress=False).passage_index()
    class SameNameOtherDim(Embedder): model_id, dim = "all-MiniLM-L6-v2", 768
    with pytest.raises(IndexMismatchError, match="dim 384"):
        EvidenceStore(demo, SameNameOtherDim(), root=tmp_path).passage_index()


def test_sentence_view_and_cross_granularity_index(demo, tmp_path):
    store = EvidenceStore(demo, root=tmp_path, show_progress=False)
    sents = store.sentences(7)
    assert sents[0][0] == "s7.0" and sents[0][1].startswith("Charles James Mathew, CBE, KC (24 October 1872")
    assert " ".join(s for _, s in sents).replace(" ", "") == demo.corpus[7].text.replace(" ", "")
    assert store.unit_text("s7.1") == sents[1][1] and store.unit_text("p7") == demo.corpus[7].content
    assert split_sentences("He was born in St. Louis, Mo. in 1950. He left.") == ["He was born in St. Louis, Mo. in 1950.", "He left."]


def test_openie_failures_are_counted_and_resumed(demo, tmp_path):
    good = '{"triples": [["Charles James Mathew", "born on", "24 October 1872"]]}'
    llm = ScriptedLLM(lambda prompt: good if "Charles James Mathew" in prompt else "I am not sure.")
    store = EvidenceStore(demo, llm=llm, root=tmp_path, show_progress=False)
    counts = store.extract_triples([7, 8])
    assert counts["done"] == 2 and counts["failed"] == 1 and 8 in store.openie_failures and 7 not in store.openie_failures
    assert store.triples(7) == [("t7.0", ("Charles James Mathew", "born on", "24 October 1872"))] and store.triples(8) == []
    assert store.units(7)["triple"] == ["t7.0"] and store.unit_text("t7.0") == "Charles James Mathew | born on | 24 October 1872"
    # a crash mid-line: the cut line is ignored, finished passages are not asked again
    f = store._triples_file(); f.write_text(f.read_text() + '{"pid": 9, "tri')
    llm2 = ScriptedLLM(lambda prompt: good)
    store2 = EvidenceStore(demo, llm=llm2, root=tmp_path, show_progress=False)
    store2.triples(7); assert llm2.seen == []
    store2.triples(9); assert len(llm2.seen) == 1 and 8 in store2.openie_failures


def test_build_triples_for_some_passages_only(demo, tmp_path):
    llm = ScriptedLLM(lambda prompt: '{"triples": [["Charles James Mathew", "born on", "24 October 1872"]]}')
    store = EvidenceStore(demo, llm=llm, root=tmp_path, show_progress=False)
    rep = store.build(["sentence", "triple"], pids=[7, 8, 7])
    assert rep["openie_done"] == 2 and len(llm.seen) == 2 and sorted(store._triples) == [7, 8]
    assert rep["sentences"] == sum(len(store.sentences(p)) for p in range(len(demo.corpus)))


def test_two_processes_share_a_triple_view(demo, tmp_path):
    good = '{"triples": [["Charles James Mathew", "born on", "24 October 1872"]]}'
    a, b = ScriptedLLM(lambda prompt: good), ScriptedLLM(lambda prompt: good)
    sa = EvidenceStore(demo, llm=a, root=tmp_path, show_progress=False)
    sb = EvidenceStore(demo, llm=b, root=tmp_path, show_progress=False)
    sb.extract_triples([]); sa.extract_triples([7])         # b loaded the (empty) file before a wrote passage 7
    assert sb.extract_triples([7, 8])["done"] == 1 and len(b.seen) == 1 and sb.triples(7) == sa.triples(7)


def test_lazy_triples_with_the_real_model_are_grounded(demo, smollm, tmp_path):
    store = EvidenceStore(demo, llm=smollm, root=tmp_path, show_progress=False)
    c = store.extract_triples([7])
    triples = store.triples(7)
    assert c["done"] == 1
    if triples:   # every kept triple names words of its passage
        words = demo.corpus[7].content.lower()
        assert all(any(w in words for w in t[0].lower().split()) for _, t in triples)
    else:
        assert 7 in store.openie_failures
