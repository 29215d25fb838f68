import json
import numpy as np
import pytest
from megrag_kit.core import parse_unit_id
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore, ExtractedView, IndexMismatchError, is_grounded, openie_prompt, split_sentences
from megrag_kit.models import CostMeter, Embedder, StructuredOutputError, parse_json
from megrag_kit.retrievers import BM25Index, DenseIndex, Retriever, rrf, slug, text_fingerprint
from conftest import ScriptedLLM

GOOD = '{"triples": [["Charles James Mathew", "born on", "24 October 1872"]]}'


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


class HashEmbedder(Embedder):
    "Deterministic bag-of-words vectors (no model): enough to test the index bookkeeping."
    def __init__(self, model_id="hash@1", dim=64): self.model_id, self.dim, self.calls = model_id, dim, 0
    def encode(self, texts, batch_size=64):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split(): out[i, hash(w) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


# ---- dense index

def test_dense_index_saves_reloads_and_refuses_mismatches(demo, tmp_path):
    texts = [p.content for p in demo.corpus]
    e = HashEmbedder()
    d = DenseIndex(texts, e, tmp_path, show_progress=False)
    assert isinstance(d, Retriever) and e.calls == 0              # built on first use only
    hits = d.search(["Charles James Mathew", "Teutberga"], 3)
    assert len(hits) == 2 and all(len(h) == 3 for h in hits) and hits[0][0][1] >= hits[0][-1][1]
    assert d.path == tmp_path / "hash_1" / "passages.faiss" and d.path.exists()
    meta = json.loads(d.meta_path.read_text())
    assert meta["model_id"] == "hash@1" and meta["dim"] == 64 and meta["n"] == len(texts) and meta["fingerprint"] == demo.fingerprint()
    assert not list(d.path.parent.glob("*.tmp*"))
    # reload: no re-embedding of the texts, same answers
    e2 = HashEmbedder(); again = DenseIndex(texts, e2, tmp_path)
    (re,) = again.search(["Charles James Mathew"], 3)
    assert [i for i, _ in re] == [i for i, _ in hits[0]] and [s for _, s in re] == pytest.approx([s for _, s in hits[0]])
    assert e2.calls == 1                                            # the query only
    sims = again.similarities(["Charles James Mathew"])
    assert sims.shape == (1, len(texts)) and sims[0, hits[0][0][0]] == pytest.approx(hits[0][0][1], abs=1e-5)
    assert len(again.search(["x"], 10_000)[0]) == len(texts)        # k clipped
    assert again.search([], 3) == [] and again.search(["x"], 0) == [[]]
    # other texts, other dimension, same folder: refused with a message naming file, held and wanted
    with pytest.raises(IndexMismatchError, match=r"passages\.faiss holds vectors of model hash@1 \(dim 64\) for n=254.*wanted .*n=253"):
        DenseIndex(texts[:-1], HashEmbedder(), tmp_path).build()
    with pytest.raises(IndexMismatchError, match=r"\(dim 64\).*wanted model hash@1 \(dim 32\)"):
        DenseIndex(texts, HashEmbedder(dim=32), tmp_path).build()
    changed = texts[:-1] + [texts[-1] + " (edited)"]
    with pytest.raises(IndexMismatchError, match="fingerprint"):
        DenseIndex(changed, HashEmbedder(), tmp_path).build()
    # another model id gets its own folder
    DenseIndex(texts, HashEmbedder("other/model"), tmp_path, show_progress=False).build()
    assert (tmp_path / "other_model" / "passages.meta.json").exists()


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
def test_vectors_of_another_model_are_refused(demo, minilm, tmp_path):
    EvidenceStore(demo, minilm, root=tmp_path, show_progress=False).dense.build()
    class SameNameOtherDim(Embedder): model_id, dim = minilm.model_id, 768
    with pytest.raises(IndexMismatchError, match="dim 384"):
        EvidenceStore(demo, SameNameOtherDim(), root=tmp_path).search(["x"], 1)


# ---- BM25

def test_bm25_agrees_with_rank_bm25(demo, tmp_path):
    import bm25s
    from rank_bm25 import BM25Okapi
    texts = [p.content for p in demo.corpus[:60]]
    bm = BM25Index(texts, tmp_path)
    assert isinstance(bm, Retriever)
    tok = lambda xs: bm25s.tokenize(xs, stopwords="en", return_ids=False, show_progress=False)
    okapi = BM25Okapi(tok(texts))
    queries = ["Charles James Mathew barrister", "Teutberga queen of Lotharingia", "film directed by", "Who was born in Cork?",
               "football club founded", "American actress"]
    queries += [q.question for q in demo.questions if max(q.gold_pids) < 60]
    agree = 0
    for q, hits in zip(queries, bm.search(queries, 5)):
        ref = okapi.get_scores(tok([q])[0])
        agree += hits[0][0] == int(np.argmax(ref))
        assert all(s > 0 for _, s in hits) and [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert agree >= len(queries) - 1, (agree, len(queries))


def test_bm25_no_known_token_positive_only_and_reload(tmp_path):
    toy = ["Cork is a city in the south of Ireland.", "Dublin is the capital of Ireland.",
           "The river Lee flows through Cork.", "Paris is the capital of France."]
    bm = BM25Index(toy, tmp_path)
    assert bm.search(["the of and", "zanzibar", ""], 3) == [[], [], []]
    (hits,) = bm.search(["Which river flows through Cork?"], 10)
    assert [i for i, _ in hits] == [2, 0]                  # doc 1 and 3 share no word: left out
    meta = json.loads((tmp_path / "bm25" / "passages" / "meta.json").read_text())
    assert meta == dict(n=4, fingerprint=text_fingerprint(toy), k1=1.5, b=0.75, method="lucene", stopwords="en")
    assert BM25Index(toy, tmp_path).search(["Which river flows through Cork?"], 10) == [hits]
    with pytest.raises(IndexMismatchError, match="bm25/passages holds BM25"):
        BM25Index(toy[::-1], tmp_path).build()
    with pytest.raises(IndexMismatchError, match="'b': 0.5"):
        BM25Index(toy, tmp_path, b=0.5).build()
    assert BM25Index(toy, tmp_path, name="other", b=0.5).search(["Paris"], 1)[0][0][0] == 3


def test_search_within_ranks_only_the_subset(tmp_path):
    toy = ["Cork is a city in the south of Ireland.", "Dublin is the capital of Ireland.",
           "The river Lee flows through Cork.", "Paris is the capital of France."]
    bm = BM25Index(toy, tmp_path)
    full = dict(bm.search(["capital of France"], 4)[0])
    got = bm.search_within("capital of France", [1, 0, 3, 1])
    assert [i for i, _ in got] == [3, 1] and got[0][1] == pytest.approx(full[3])
    assert bm.search_within("capital of France", [0, 2, 1], positive_only=False) == [(1, pytest.approx(full[1])), (0, 0.0), (2, 0.0)]
    assert bm.search_within("capital of France", [1, 3], k=1) == [(3, pytest.approx(full[3]))]
    with pytest.raises(IndexError, match="outside"):
        bm.search_within("Cork", [-1])


def test_store_bm25_search(demo, tmp_path):
    store = EvidenceStore(demo, root=tmp_path, show_progress=False)
    (hits,) = store.search_bm25(["barrister and Labour politician for Whitechapel"], 3)
    assert hits[0][0] == 7 and (tmp_path / "bm25" / "passages" / "meta.json").exists()
    assert store.build(["bm25"]) == {"bm25_passages": len(demo.corpus)}


# ---- rank fusion

def test_rrf_hand_computed():
    fused = rrf([["a", "b", "c"], ["b", "a", "d"], ["c", "b"]])
    assert [v for v, _ in fused] == ["b", "a", "c", "d"]
    assert [s for _, s in fused] == pytest.approx([1/62 + 1/61 + 1/62, 1/61 + 1/62, 1/63 + 1/61, 1/63])
    assert rrf([["y", "x"], ["z", "x"]], k0=0) == [("y", 1.0), ("z", 1.0), ("x", 1.0)]   # ties: best rank, then first seen
    assert rrf([[3, 3, 1]], k0=0) == [(3, 1.0), (1, 1/3)]                                 # a repeat counts once
    assert rrf([[1, 2], [2, 1]], top=1) == [(1, pytest.approx(1/61 + 1/62))] and rrf([]) == []
    with pytest.raises(ValueError): rrf([[1]], k0=-1)


# ---- sentence view and cross-granularity index

def test_sentence_view_and_cross_granularity_index(demo, tmp_path):
    store = EvidenceStore(demo, root=tmp_path, show_progress=False)
    sents = store.sentences(7)
    assert sents[0][0] == "s7.0" and sents[0][1].startswith("Charles James Mathew, CBE, KC (24 October 1872")
    assert all(parse_unit_id(s) == ("s", 7, j) for j, (s, _) in enumerate(sents))
    assert " ".join(s for _, s in sents).replace(" ", "") == demo.corpus[7].text.replace(" ", "")
    assert store.unit_text("s7.1") == sents[1][1] and store.unit_text("p7") == demo.corpus[7].content
    assert store.units(7, ["passage", "sentence"]) == {"passage": ["p7"], "sentence": [s for s, _ in sents]}
    assert (tmp_path / "sentences.json").exists()
    assert split_sentences("He was born in St. Louis, Mo. in 1950. He left.") == ["He was born in St. Louis, Mo. in 1950.", "He left."]
    with pytest.raises(ValueError, match="an LLM is needed"): store.units(7)
    with pytest.raises(ValueError, match="an LLM is needed"): store.unit_text("t7.0")
    with pytest.raises(KeyError): store.unit_text("x7.0")
    with pytest.raises(KeyError): store.unit_text("s7.99")
    with pytest.raises(ValueError, match="malformed"): store.unit_text("7")
    with pytest.raises(ValueError, match="embedder"): store.search(["x"], 1)
    with pytest.raises(ValueError, match="unknown views"): store.build(["sentences"])


def test_store_touches_no_model_until_used(demo, tmp_path):
    class Untouchable:
        def __getattr__(self, name): raise AssertionError(f"touched {name}")
    store = EvidenceStore(demo, Untouchable(), Untouchable(), root=tmp_path, show_progress=False)
    assert store.unit_text("s7.0") == store.sentences(7)[0][1] and store.openie_failures == {}


# ---- LLM-extracted views

def _claims(text, passage):
    out = [c for c in parse_json(text, list) if isinstance(c, str) and c.strip()]
    if not out: raise StructuredOutputError("no claim")
    return out


def test_extracted_view_resume_cut_line_failures_and_cost_phase(demo, tmp_path):
    texts = [p.content for p in demo.corpus]
    f = tmp_path / "claims.jsonl"
    llm = ScriptedLLM(lambda m: '["Charles James Mathew was a barrister."]' if "Charles James Mathew" in m else '["", 3]')
    make = lambda llm, **kw: ExtractedView("claim", "x", llm, lambda t: [{"role": "user", "content": t}], _claims, texts, f, batch=2, **kw)
    v = make(llm)
    with CostMeter() as m:
        c = v.extract([7, 8, 9, 7])
    assert c == dict(done=3, failed=2, prompt_tokens=30, completion_tokens=9, cache_hits=0)
    assert m["indexing"].llm_calls == 3 and m["answering"].llm_calls == 0
    assert v.failures == {8: "no claim", 9: "no claim"} and v.items(8) == [] and v.count() == 1
    assert v.units(7) == [("x7.0", "Charles James Mathew was a barrister.")] and v.unit_text("x7.0") == "Charles James Mathew was a barrister."
    lines = [json.loads(l) for l in f.read_text().splitlines()]
    assert lines[0] == {"pid": 7, "claims": ["Charles James Mathew was a barrister."], "error": None} and [l["pid"] for l in lines] == [7, 8, 9]
    # a crash mid-line: the cut line is ignored, that passage is redone, finished ones are not asked again
    f.write_text(f.read_text() + '{"pid": 10, "cla')
    llm2 = ScriptedLLM(lambda m: '["x"]')
    w = make(llm2)
    assert sorted(w.extracted) == [7, 8, 9] and w.failures == {8: "no claim", 9: "no claim"} and llm2.seen == []
    assert w.items(10) == ["x"] and len(llm2.seen) == 1
    assert f.read_text().splitlines()[-1].startswith('{"pid": 10, "cla{"pid": 10, "claims": ["x"]')   # glued to the cut line
    assert sorted(make(llm2).extracted) == [7, 8, 9, 10] and len(llm2.seen) == 1                     # and still read
    # eager: the whole corpus on first use
    e = ExtractedView("claim", "x", ScriptedLLM(lambda m: '["y"]'), lambda t: [{"role": "user", "content": t}], _claims, texts[:5],
                      tmp_path / "eager.jsonl", mode="eager", show_progress=False)
    assert sorted(e.extracted) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="lazy|eager"): make(llm, mode="later")
    with pytest.raises(ValueError, match="unit kind"): ExtractedView("claim", "q", llm, str, _claims, texts, f)


def test_openie_failures_are_counted_and_resumed(demo, tmp_path):
    llm = ScriptedLLM(lambda prompt: GOOD if "Charles James Mathew" in prompt else "I am not sure.")
    store = EvidenceStore(demo, llm=llm, root=tmp_path, show_progress=False)
    counts = store.extract_triples([7, 8])
    assert counts["done"] == 2 and counts["failed"] == 1 and 8 in store.openie_failures and 7 not in store.openie_failures
    assert store.triples(7) == [("t7.0", ("Charles James Mathew", "born on", "24 October 1872"))] and store.triples(8) == []
    assert store.units(7)["triple"] == ["t7.0"] and store.unit_text("t7.0") == "Charles James Mathew | born on | 24 October 1872"
    # the file layout the cache and earlier builds rely on
    f = store.triples_path()
    assert f == tmp_path / "triples" / "scripted.jsonl"
    assert json.loads(f.read_text().splitlines()[0]) == {"pid": 7, "triples": [["Charles James Mathew", "born on", "24 October 1872"]], "error": None}
    # a crash mid-line: the cut line is ignored, finished passages are not asked again
    f.write_text(f.read_text() + '{"pid": 9, "tri')
    llm2 = ScriptedLLM(lambda prompt: GOOD)
    store2 = EvidenceStore(demo, llm=llm2, root=tmp_path, show_progress=False)
    store2.triples(7); assert llm2.seen == []
    store2.triples(9); assert len(llm2.seen) == 1 and 8 in store2.openie_failures


def test_openie_prompt_and_decoding_are_unchanged(demo, tmp_path):
    "The cache keys of OpenIE calls (and so every earlier extraction) depend on these exact values."
    seen = []
    class Rec(ScriptedLLM):
        def generate(self, prompts, **kw): seen.append(kw); return super().generate(prompts, **kw)
    for schema, name in ((False, "scripted.jsonl"), (True, "scripted-schema.jsonl")):
        store = EvidenceStore(demo, llm=Rec(lambda p: GOOD), root=tmp_path, openie_schema=schema, show_progress=False)
        store.extract_triples([7])
        assert store.triples_path().name == name
    from megrag_kit.index import OPENIE_STOP, TRIPLE_SCHEMA
    assert seen == [dict(max_new_tokens=320, stop=["]]}", "\n\n"]), dict(max_new_tokens=320, json_schema=TRIPLE_SCHEMA)] and OPENIE_STOP == ["]]}", "\n\n"]
    msgs = openie_prompt("P")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"] and msgs[-1]["content"] == "Passage:\nP"
    assert msgs[0]["content"].startswith("Extract factual (subject, relation, object) triples from the passage. Use the full name")


def test_build_triples_for_some_passages_only(demo, tmp_path):
    llm = ScriptedLLM(lambda prompt: GOOD)
    store = EvidenceStore(demo, llm=llm, root=tmp_path, show_progress=False)
    rep = store.build(["sentence", "triple"], pids=[7, 8, 7])
    assert rep["openie_done"] == 2 and len(llm.seen) == 2 and sorted(store.triple_view.extracted) == [7, 8]
    assert rep["passages_with_openie"] == 2 and rep["triples"] == 1 and rep["openie_failures_total"] == 1   # 8: not grounded
    assert rep["sentences"] == sum(len(store.sentences(p)) for p in range(len(demo.corpus)))


def test_two_processes_share_a_triple_view(demo, tmp_path):
    a, b = ScriptedLLM(lambda prompt: GOOD), ScriptedLLM(lambda prompt: GOOD)
    sa = EvidenceStore(demo, llm=a, root=tmp_path, show_progress=False)
    sb = EvidenceStore(demo, llm=b, root=tmp_path, show_progress=False)
    sb.extract_triples([]); sa.extract_triples([7])         # b loaded the (empty) file before a wrote passage 7
    assert sb.extract_triples([7, 8])["done"] == 1 and len(b.seen) == 1 and sb.triples(7) == sa.triples(7)


def test_add_view_and_unit_text_of_a_new_kind(demo, tmp_path):
    store = EvidenceStore(demo, llm=ScriptedLLM(lambda p: '["a proposition"]'), root=tmp_path, show_progress=False)
    v = store.add_view(ExtractedView("proposition", "x", store.llm, lambda t: [{"role": "user", "content": t}], _claims,
                                     store.contents, tmp_path / "propositions.jsonl", show_progress=False))
    assert store.unit_text("x3.0") == "a proposition" and store.units(3, ["proposition"]) == {"proposition": ["x3.0"]}
    rep = store.build(["proposition"], pids=[3, 4])
    assert rep["propositions"] == 2 and rep["proposition_done"] == 1 and v.path.exists()
    with pytest.raises(ValueError, match="already has"):
        store.add_view(ExtractedView("other", "t", store.llm, str, _claims, store.contents, tmp_path / "o.jsonl"))


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
