import json, re, shutil, types, warnings
import numpy as np
import pytest
from megrag_kit.core import Dataset, Passage, parse_unit_id
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore, ExtractedView, IndexMismatchError, is_grounded, openie_prompt, split_sentences
from megrag_kit.method import Resources
from megrag_kit.models import CostMeter, Embedder, StructuredOutputError, minilm_path, parse_json
from megrag_kit.retrievers import BM25Index, DenseIndex, Retriever, embedder_tokenizer, slug, text_fingerprint, token_lengths, token_windows
from conftest import ScriptedLLM, needs_spacy
from fakes import HashEmbedder

GOOD = '{"triples": [["Charles James Mathew", "born on", "24 October 1872"]]}'


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


def small_embedder(model_id="hash@1", dim=64) -> HashEmbedder:
    "The shared bag-of-words stand-in (tests/fakes.py), small: enough to test the index bookkeeping."
    return HashEmbedder(model_id, dim)


@pytest.fixture(scope="module")
def tok():
    "MiniLM's word-piece tokenizer alone (no model weights)."
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(minilm_path())


class PieceEmbedder(Embedder):
    """Word-piece count vectors over the tokenizer's vocabulary, reading only the first `limit` pieces of each input
    (special tokens counted) the way a sentence-transformers model cuts it; carries `model.tokenizer` and
    `model.max_seq_length` like one. No model weights."""
    def __init__(self, tok, limit=32, model_id="pieces@1"):
        self.tok, self.model_id, self.dim, self.calls = tok, model_id, len(tok), 0
        self.model = types.SimpleNamespace(tokenizer=tok, max_seq_length=limit)
    def encode(self, texts, batch_size=64):
        self.calls += 1
        keep = self.model.max_seq_length - self.tok.num_special_tokens_to_add()
        x = np.zeros((len(texts), self.dim), np.float32)
        for i, ids in enumerate(self.tok(list(texts), add_special_tokens=False)["input_ids"]): np.add.at(x[i], ids[:keep], 1.0)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


# ---- dense index

def test_dense_index_saves_reloads_and_refuses_mismatches(demo, tmp_path):
    texts = [p.content for p in demo.corpus]
    e = small_embedder()
    d = DenseIndex(texts, e, tmp_path, show_progress=False)
    assert isinstance(d, Retriever) and e.encode_calls == 0              # built on first use only
    hits = d.search(["Charles James Mathew", "Teutberga"], 3)
    assert len(hits) == 2 and all(len(h) == 3 for h in hits) and hits[0][0][1] >= hits[0][-1][1]
    assert d.path == tmp_path / "hash_1" / "passages.faiss" and d.path.exists()
    meta = json.loads(d.meta_path.read_text())
    assert meta["model_id"] == "hash@1" and meta["dim"] == 64 and meta["n"] == len(texts) and meta["fingerprint"] == demo.fingerprint()
    assert not list(d.path.parent.glob("*.tmp*"))
    # reload: no re-embedding of the texts, same answers
    e2 = small_embedder(); again = DenseIndex(texts, e2, tmp_path)
    (re,) = again.search(["Charles James Mathew"], 3)
    assert [i for i, _ in re] == [i for i, _ in hits[0]] and [s for _, s in re] == pytest.approx([s for _, s in hits[0]])
    assert e2.encode_calls == 1                                            # the query only
    sims = again.similarities(["Charles James Mathew"])
    assert sims.shape == (1, len(texts)) and sims[0, hits[0][0][0]] == pytest.approx(hits[0][0][1], abs=1e-5)
    assert len(again.search(["x"], 10_000)[0]) == len(texts)        # k clipped
    assert again.search([], 3) == []
    # other texts, other dimension, same folder: refused with a message naming file, held and wanted
    with pytest.raises(IndexMismatchError, match=r"passages\.faiss holds vectors of model hash@1 \(dim 64\) for n=254.*wanted .*n=253"):
        DenseIndex(texts[:-1], small_embedder(), tmp_path).build()
    with pytest.raises(IndexMismatchError, match=r"\(dim 64\).*wanted model hash@1 \(dim 32\)"):
        DenseIndex(texts, small_embedder(dim=32), tmp_path).build()
    changed = texts[:-1] + [texts[-1] + " (edited)"]
    with pytest.raises(IndexMismatchError, match="fingerprint"):
        DenseIndex(changed, small_embedder(), tmp_path).build()
    # another model id gets its own folder
    DenseIndex(texts, small_embedder("other/model"), tmp_path, show_progress=False).build()
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
def test_vectors_of_another_model_are_refused(demo, minilm, demo_store):
    "MiniLM's saved demo vectors (the shared session copy), asked for by an embedder of the same name and another dim."
    class SameNameOtherDim(Embedder): model_id, dim = minilm.model_id, 768
    with pytest.raises(IndexMismatchError, match="dim 384"):
        EvidenceStore(demo, SameNameOtherDim(), root=demo_store).search(["x"], 1)


# ---- long texts: truncation counted, or windows

def test_truncation_is_counted_in_the_manifest_and_warned_once(tok, tmp_path):
    texts = ["one two three", "alpha " * 30, "beta " * 100]        # 5, 32 and 102 word pieces with [CLS] and [SEP]
    e = PieceEmbedder(tok, limit=32)
    with pytest.warns(UserWarning, match=r"^1 of 3 texts are longer than the 32-token input limit of pieces@1 \(longest 102\)"):
        d = DenseIndex(texts, e, tmp_path, show_progress=False).build()
    meta = json.loads(d.meta_path.read_text())
    assert {k: v for k, v in meta.items() if k != "seconds"} == dict(
        model_id="pieces@1", dim=len(tok), n=3, fingerprint=text_fingerprint(texts), chunking="truncate",
        max_tokens=32, longest_tokens=102, n_long=1, n_truncated=1, index_type="flat", embed_order="longest_first")
    assert d.meta == meta and d.path == tmp_path / "pieces_1" / "passages.faiss"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                # reopening the files says nothing again
        DenseIndex(texts, PieceEmbedder(tok, limit=32), tmp_path).build()
        short = DenseIndex(texts[:2], PieceEmbedder(tok, limit=32), tmp_path / "short").build()   # 32 pieces fit in 32
    assert (short.meta["n_long"], short.meta["n_truncated"], short.meta["longest_tokens"]) == (0, 0, 32)
    # an embedder with no tokenizer (a server, a stand-in): the counts are unknown, written as null, never 0
    u = DenseIndex(texts, small_embedder(), tmp_path / "unknown").build()
    raw = u.meta_path.read_text()
    assert [json.loads(raw)[k] for k in ("max_tokens", "longest_tokens", "n_long", "n_truncated")] == [None] * 4 and '"n_truncated": null' in raw
    assert embedder_tokenizer(small_embedder()) == (None, None) and embedder_tokenizer(e) == (tok, 32)


def test_truncate_files_are_todays_files_and_old_manifests_still_open(demo, tmp_path):
    import faiss
    texts = [p.content for p in demo.corpus]
    d = DenseIndex(texts, small_embedder(), tmp_path, show_progress=False).build()
    ref = faiss.IndexFlatIP(64); ref.add(small_embedder().encode(texts))
    faiss.write_index(ref, str(tmp_path / "ref.faiss"))
    assert d.path.read_bytes() == (tmp_path / "ref.faiss").read_bytes()       # the same vectors in the same file as before chunking existed
    # a manifest written before chunking existed (no chunking, no token counts) opens as truncation
    old = {k: d.meta[k] for k in ("model_id", "dim", "n", "fingerprint", "seconds")}
    d.meta_path.write_text(json.dumps(old))
    e = small_embedder(); again = DenseIndex(texts, e, tmp_path)
    assert again.search(["Teutberga"], 2) == d.search(["Teutberga"], 2) and e.encode_calls == 1 and again.meta == old


def test_token_windows_fit_the_limit_and_cover_the_text(demo, tok):
    assert token_windows("Cork is a city.", tok, 16, 4) == ["Cork is a city."]     # fits: the text itself, unchanged
    n_split = 0
    for p in demo.corpus:
        text, pieces = p.content, tok.tokenize(p.content)
        wins = token_windows(text, tok, 32, 8)
        assert (len(wins) > 1) == (len(pieces) > 30)
        if len(wins) == 1: assert wins == [text]; continue
        n_split += 1
        assert all(n <= 32 for n in token_lengths(wins, tok))
        # each window re-tokenizes to a run of the text's own pieces (it starts and ends on whole words), the runs
        # start in order, neighbours share at least 8 pieces, and together they hold every piece
        starts, ends, c = [], [], -1
        for w in wins:
            wp, c = tok.tokenize(w), text.index(w, c + 1)
            at = next(i for i in range(starts[-1] + 1 if starts else 0, len(pieces)) if pieces[i:i + len(wp)] == wp)
            starts.append(at); ends.append(at + len(wp))
            inside = lambda j: 0 < j < len(text) and text[j - 1].isalnum() and text[j].isalnum()
            assert not inside(c) and not inside(c + len(w))             # no window starts or ends inside a word
        assert starts[0] == 0 and ends[-1] == len(pieces)
        assert all(e0 - s1 >= 8 for e0, s1 in zip(ends, starts[1:])) and all(e0 < e1 for e0, e1 in zip(ends, ends[1:]))
    assert n_split == sum(len(tok.tokenize(p.content)) > 30 for p in demo.corpus) > 100
    with pytest.raises(ValueError, match=r"overlap must be in \[0, 14\) for 16-token inputs, got 14"):
        token_windows("word " * 40, tok, 16, 14)


def test_window_chunking_max_pools_windows_back_to_passages(demo, tok, tmp_path):
    texts = [p.content for p in demo.corpus]
    e = PieceEmbedder(tok, limit=32)
    win = DenseIndex(texts, e, tmp_path, chunking="window", overlap=8, show_progress=False)
    assert win.path == tmp_path / "pieces_1" / "passages.window-overlap8.faiss" and len(win) == len(texts)
    queries = [q.question for q in demo.questions[:6]]
    hits = win.search(queries, 5)
    counts = [len(token_windows(t, tok, 32, 8)) for t in texts]
    meta = json.loads(win.meta_path.read_text())
    assert (meta["chunking"], meta["overlap"], meta["max_tokens"], meta["n_windows"], meta["n_truncated"]) == ("window", 8, 32, sum(counts), 0)
    assert meta["n_long"] == sum(c > 1 for c in counts) > 100
    # rows are windows, labelled with their passage in passage order
    assert win.vectors().shape == (sum(counts), len(tok)) and win.owners.tolist() == [i for i, c in enumerate(counts) for _ in range(c)]
    # similarities: [queries, passages], each the best of the passage's windows; search ranks by it, one hit per passage
    rows = win.encode(queries) @ win.vectors().T
    sims = win.similarities(queries)
    assert sims.shape == (len(queries), len(texts))
    np.testing.assert_array_equal(sims, np.stack([rows[:, win.owners == j].max(axis=1) for j in range(len(texts))], axis=1))
    for h, row in zip(hits, sims):
        assert len(h) == 5 == len({p for p, _ in h})
        assert [s for _, s in h] == pytest.approx(sorted(row, reverse=True)[:5], abs=1e-6)
        assert all(s == pytest.approx(row[p], abs=1e-6) for p, s in h)
    # a passage whose windows all beat every other passage does not crowd the others out of the top k
    crowd = ["Cork Cork Cork. " * 40, "Cork is a city in Ireland.", "Paris is in France."]
    (top,) = DenseIndex(crowd, PieceEmbedder(tok, limit=16), tmp_path / "crowd", chunking="window", overlap=2).search(["Cork"], 2)
    assert [p for p, _ in top] == [0, 1]
    # reopened from disk: no text is embedded again, same answers
    e2 = PieceEmbedder(tok, limit=32)
    again = DenseIndex(texts, e2, tmp_path, chunking="window", overlap=8)
    assert again.search(queries, 5) == hits and e2.calls == 1


def test_the_chunking_option_names_and_guards_the_files(demo, tok, tmp_path):
    texts = [p.content for p in demo.corpus[:40]]
    assert sum(n > 96 for n in token_lengths(texts, tok)) > 5
    with pytest.warns(UserWarning, match="longer than the 96-token"):
        cut = DenseIndex(texts, PieceEmbedder(tok, 96), tmp_path).build()
    win = DenseIndex(texts, PieceEmbedder(tok, 96), tmp_path, chunking="window").build()          # the default overlap, 64
    assert sorted(p.name for p in cut.path.parent.iterdir()) == ["passages.faiss", "passages.meta.json", "passages.vectors.npy",
                                                                "passages.window-overlap64.faiss", "passages.window-overlap64.meta.json",
                                                                "passages.window-overlap64.vectors.npy"]
    assert cut.meta["chunking"] == "truncate" and win.meta["chunking"] == "window" and win.meta["overlap"] == 64
    q = [texts[3][-60:]]
    assert DenseIndex(texts, PieceEmbedder(tok, 96), tmp_path).search(q, 3) == cut.search(q, 3)   # each opens its own files
    # files built with the other option, under the expected names: refused, naming what differs
    other = tmp_path / "swapped" / "pieces_1"; other.mkdir(parents=True)
    shutil.copy(win.path, other / "passages.faiss"); shutil.copy(win.meta_path, other / "passages.meta.json")
    with pytest.raises(IndexMismatchError, match=r"passages\.faiss holds vectors built with chunking='window' \(wanted 'truncate'\)"):
        DenseIndex(texts, PieceEmbedder(tok, 96), tmp_path / "swapped").build()
    # windows cut for another input limit are refused too
    with pytest.raises(IndexMismatchError, match=r"max_tokens=96 \(wanted 128\)"):
        DenseIndex(texts, PieceEmbedder(tok, 128), tmp_path, chunking="window").build()
    with pytest.raises(ValueError, match="window chunking needs the embedder's tokenizer"):
        DenseIndex(texts, small_embedder(), tmp_path, chunking="window").build()
    with pytest.raises(ValueError, match=r"chunking must be truncate\|window, got 'chunks'"):
        DenseIndex(texts, small_embedder(), tmp_path, chunking="chunks")
    with pytest.raises(ValueError, match=r"overlap must be in \[0, 94\) for 96-token inputs, got 94"):    # even when no text is long
        DenseIndex(["short"], PieceEmbedder(tok, 96), tmp_path / "o", chunking="window", overlap=94).build()
    with pytest.raises(ValueError, match="overlap must be >= 0, got -1"):
        DenseIndex(texts, small_embedder(), tmp_path, chunking="window", overlap=-1)


def test_store_and_resources_take_the_chunking_option(demo, tok, tmp_path):
    e = PieceEmbedder(tok, 96)
    store = Resources(demo, None, e, store_root=tmp_path, chunking="window").store
    assert store.chunking == "window" and store.dense.chunking == "window"
    (hits,) = store.search([demo.questions[0].question], 3)
    assert len({p for p, _ in hits}) == 3 and (tmp_path / "vectors" / "pieces_1" / "passages.window-overlap64.faiss").exists()
    assert store.build(["passage"]) == {"passages": len(demo.corpus)}
    assert EvidenceStore(demo, e, root=tmp_path).dense.chunking == Resources(demo, None, e).chunking == "truncate"
    with pytest.raises(ValueError, match=r"chunking must be truncate\|window, got 'windows'"): Resources(demo, None, e, chunking="windows")
    with pytest.raises(ValueError, match=r"chunking must be truncate\|window, got 'windows'"): EvidenceStore(demo, e, root=tmp_path, chunking="windows")


# ---- k and empty inputs

def test_k_below_one_and_empty_text_lists_are_refused_with_value_errors(demo, tmp_path):
    texts = [p.content for p in demo.corpus[:20]]
    d, bm = DenseIndex(texts, small_embedder(), tmp_path, show_progress=False), BM25Index(texts, tmp_path)
    for k in (0, -3):
        for search in (d.search, bm.search):
            with pytest.raises(ValueError, match=f"^k must be >= 1, got {k}$"): search(["Cork"], k)
    with pytest.raises(ValueError, match="^k must be >= 1, got 0$"): bm.search_within("Cork", [1, 2], k=0)
    assert len(d.search(["Cork"], 1)[0]) == 1 and len(bm.search(["the"], 1)) == 1
    class Untouchable:
        def __getattr__(self, name): raise AssertionError(f"touched {name}")
    store = EvidenceStore(demo, Untouchable(), root=tmp_path, show_progress=False)
    with pytest.raises(ValueError, match="^k must be >= 1, got 0$"): store.search(["x"], 0)        # before the model is touched
    with pytest.raises(ValueError, match="^k must be >= 1, got 0$"): store.search_bm25(["x"], 0)
    with pytest.raises(ValueError, match=r"^DenseIndex 'passages' needs at least one text: the text list is empty$"):
        DenseIndex([], small_embedder(), tmp_path)
    with pytest.raises(ValueError, match=r"^BM25Index 'passages' needs at least one text: the text list is empty$"):
        BM25Index([], tmp_path)
    with pytest.raises(ValueError, match=r"^dataset 'empty' has no passages: its corpus is empty$"):
        EvidenceStore(Dataset("empty", [], []), small_embedder(), root=tmp_path)


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


# ---- BM25

def test_store_bm25_search(demo, tmp_path):
    store = EvidenceStore(demo, root=tmp_path, show_progress=False)
    (hits,) = store.search_bm25(["barrister and Labour politician for Whitechapel"], 3)
    assert hits[0][0] == 7 and (tmp_path / "bm25" / "passages" / "meta.json").exists()
    assert store.build(["bm25"]) == {"bm25_passages": len(demo.corpus)}


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
    assert c == dict(done=3, failed=2, prompt_tokens=50, completion_tokens=15, cache_hits=0)   # 8 and 9 re-asked once
    assert m["indexing"].llm_calls == 5 and m["indexing"].unparsed == 4 and m["indexing"].reasks == 2 and m["answering"].llm_calls == 0
    assert v.failures == {8: "no claim", 9: "no claim"} and v.items(8) == [] and v.count() == 1
    assert v.units(7) == [("x7.0", "Charles James Mathew was a barrister.")] and v.unit_text("x7.0") == "Charles James Mathew was a barrister."
    lines = [json.loads(l) for l in f.read_text().splitlines()]
    assert lines[0] == {"pid": 7, "claims": ["Charles James Mathew was a barrister."], "error": None} and [l["pid"] for l in lines] == [7, 8, 9]
    # a kill mid-line: the cut line is ignored, that passage is redone, finished ones are not asked again, and the
    # torn tail is cut away (with a warning) before the next line is appended
    f.write_text(f.read_text() + '{"pid": 10, "cla')
    llm2 = ScriptedLLM(lambda m: '["x"]')
    w = make(llm2)
    assert sorted(w.extracted) == [7, 8, 9] and w.failures == {8: "no claim", 9: "no claim"} and llm2.seen == []
    with pytest.warns(RuntimeWarning, match="dropped a torn last line"): assert w.items(10) == ["x"]
    assert len(llm2.seen) == 1 and f.read_text().splitlines()[-1] == '{"pid": 10, "claims": ["x"], "error": null}'
    assert sorted(make(llm2).extracted) == [7, 8, 9, 10] and len(llm2.seen) == 1
    # a file from an older writer, with a record glued onto a cut line: the record is kept, with a warning
    g = tmp_path / "old.jsonl"
    g.write_text('{"pid": 1, "claims": ["a"], "error": null}\n{"pid": 2, "cla{"pid": 3, "claims": ["c"], "error": null}\n')
    old = ExtractedView("claim", "x", llm2, lambda t: [{"role": "user", "content": t}], _claims, texts, g)
    with pytest.warns(RuntimeWarning, match="glued onto a line cut"): assert sorted(old.extracted) == [1, 3]
    # eager: the whole corpus on first use
    e = ExtractedView("claim", "x", ScriptedLLM(lambda m: '["y"]'), lambda t: [{"role": "user", "content": t}], _claims, texts[:5],
                      tmp_path / "eager.jsonl", mode="eager", show_progress=False)
    assert sorted(e.extracted) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match=re.escape("mode must be lazy|eager, got 'later'")): make(llm, mode="later")
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
    store2.triples(9); assert len(llm2.seen) == 2 and 8 in store2.openie_failures     # 9's answer is not grounded: re-asked once


def test_openie_prompt_and_decoding_are_unchanged(demo, tmp_path):
    "The cache keys of OpenIE calls (and so every earlier extraction) depend on these exact values."
    seen = []
    class Rec(ScriptedLLM):
        def generate(self, prompts, **kw):       # `validate` (a check per prompt) is not part of a cache key
            assert len(kw.get("validate") or []) == len(prompts)
            seen.append({k: v for k, v in kw.items() if k != "validate"}); return super().generate(prompts, **kw)
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
    assert rep["openie_done"] == 2 and len(llm.seen) == 3 and sorted(store.triple_view.extracted) == [7, 8]   # 8 re-asked
    assert rep["passages_with_openie"] == 2 and rep["triples"] == 1 and rep["openie_failures_total"] == 1   # 8: not grounded
    assert rep["sentences"] == sum(len(store.sentences(p)) for p in range(len(demo.corpus)))


def test_two_processes_share_a_triple_view(demo, tmp_path):
    a, b = ScriptedLLM(lambda prompt: GOOD), ScriptedLLM(lambda prompt: GOOD)
    sa = EvidenceStore(demo, llm=a, root=tmp_path, show_progress=False)
    sb = EvidenceStore(demo, llm=b, root=tmp_path, show_progress=False)
    sb.extract_triples([]); sa.extract_triples([7])         # b loaded the (empty) file before a wrote passage 7
    assert sb.extract_triples([7, 8])["done"] == 1 and len(b.seen) == 2 and sb.triples(7) == sa.triples(7)   # 8 only (asked twice)


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


def test_streamed_build_gives_the_vectors_and_hits_of_the_in_memory_build(demo, tmp_path):
    import faiss
    texts = [f"{p.content} ({r})" for r in range(3) for p in demo.corpus]          # 762 texts: three batches of 256
    d = DenseIndex(texts, small_embedder(), tmp_path, show_progress=False).build()
    ref_vecs = np.concatenate([small_embedder().encode(texts[b:b + 256]) for b in range(0, len(texts), 256)])   # the old path: batches in a list, joined
    ref = faiss.IndexFlatIP(64); ref.add(ref_vecs)
    v = d.vectors()
    assert isinstance(v, np.memmap) and v.shape == (762, 64) and np.array_equal(np.asarray(v), ref_vecs)
    assert np.array_equal(np.load(d.vectors_path), ref_vecs) and not list(d.path.parent.glob("*.tmp*"))
    assert np.array_equal(faiss.downcast_index(d._index).reconstruct_n(0, 762), ref_vecs)
    qs = ["Charles James Mathew", "Teutberga", "Aretha Franklin father"]
    scores, ids = ref.search(small_embedder().encode(qs), 10)
    assert d.search(qs, 10) == [[(int(i), float(s)) for i, s in zip(ri, rs)] for ri, rs in zip(ids, scores)]
    d.vectors_path.unlink()                                                      # an index from before the file: read back from faiss
    again = DenseIndex(texts, small_embedder(), tmp_path)
    assert np.array_equal(again.vectors(), ref_vecs) and again.search(qs, 10) == d.search(qs, 10)


def test_the_store_and_resources_pass_index_type_to_the_passage_index(demo, tmp_path):
    "`EvidenceStore(index_type=...)` (and `Resources`, which the CLI's --index-type fills) builds that faiss index beside the flat one."
    qs = [p.content[:80] for p in demo.corpus[::25]]
    flat = EvidenceStore(demo, small_embedder(), root=tmp_path, show_progress=False)
    hnsw = Resources(demo, None, small_embedder(), store_root=tmp_path, index_type="hnsw").store
    hnsw.show_progress = False
    assert hnsw.index_type == "hnsw" and [h[0][0] for h in hnsw.search(qs, 5)] == [h[0][0] for h in flat.search(qs, 5)]
    assert hnsw.dense.path.name == "passages.hnsw.faiss" and flat.dense.path.name == "passages.faiss" and hnsw.dense.meta["index_type"] == "hnsw"
    with pytest.raises(ValueError, match=re.escape("index_type must be flat|hnsw|ivf, got 'annoy'")): EvidenceStore(demo, small_embedder(), root=tmp_path, index_type="annoy")
    with pytest.raises(ValueError, match=re.escape("index_type must be flat|hnsw|ivf, got 'annoy'")): Resources(demo, None, small_embedder(), index_type="annoy")


def test_hnsw_and_ivf_find_the_flat_top_1_and_keep_their_own_files(demo, tmp_path):
    texts = [p.content for p in demo.corpus]
    qs = [t[:80] for t in texts[::10]]                                           # each query is the start of a passage: an easy case
    flat = DenseIndex(texts, small_embedder(), tmp_path, show_progress=False)
    top = [h[0] for h in flat.search(qs, 10)]
    for kind in ("hnsw", "ivf"):
        d = DenseIndex(texts, small_embedder(), tmp_path, show_progress=False, index_type=kind).build()
        assert d.path.name == f"passages.{kind}.faiss" and d.meta["index_type"] == kind
        hits = d.search(qs, 10)
        assert [h[0][0] for h in hits] == [i for i, _ in top]
        assert [h[0][1] for h in hits] == pytest.approx([s for _, s in top], abs=1e-5)
        assert np.array_equal(d.vectors(), flat.vectors())
    ivf = DenseIndex(texts, small_embedder(), tmp_path, index_type="ivf", nprobe=2).build()   # the search setting applies on load
    assert ivf.meta["nlist"] == 6 and ivf._index.nprobe == 2                         # clip(4 sqrt(254), 1, 254 // 39)
    hnsw = DenseIndex(texts, small_embedder(), tmp_path, index_type="hnsw", ef_search=16).build()
    assert hnsw.meta["hnsw_m"] == 32 and hnsw._index.hnsw.efSearch == 16
    with pytest.raises(IndexMismatchError, match=r"hnsw_m=32 \(wanted 8\)"):
        DenseIndex(texts, small_embedder(), tmp_path, index_type="hnsw", hnsw_m=8).build()
    with pytest.raises(ValueError, match=re.escape("index_type must be flat|hnsw|ivf, got 'annoy'")):
        DenseIndex(texts, small_embedder(), tmp_path, index_type="annoy")
    with pytest.raises(ValueError, match="nprobe must be >= 1, got 0"):
        DenseIndex(texts, small_embedder(), tmp_path, index_type="ivf", nprobe=0)


# -- OpenIE by the dependency parser (skipped without spaCy's en_core_web_sm)

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


def test_a_run_builds_its_index_as_a_stage_and_reports_its_time(tmp_path, capsys):
    "Issue 33: indexing is its own stage before the questions; its seconds are in the summary, and a cache hit says so."
    from megrag_kit.method import build_method
    from megrag_kit.runner import format_summary, run
    ds = load_dataset("demo")
    small = Dataset("small", ds.questions[:2], ds.corpus)
    llm = ScriptedLLM(lambda m: "Paris")
    res = Resources(small, llm, small_embedder(), store_root=tmp_path / "store")
    s = run(build_method("native_rag", {"k": 5}, res), small, tmp_path / "a", show_progress=True)
    ib = s["index_build"]
    assert (ib["status"], ib["built"], ib["passages"]) == ("built", ["passage"], len(ds.corpus)) and ib["seconds"] > 0
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["index_build"]["seconds"] == ib["seconds"]
    assert ib["answering_s"] >= 0 and ib["during_answering_s"] == 0
    out = capsys.readouterr()
    assert f"indexing: {len(ds.corpus)} passages in " in out.out and "(built: passage)" in out.out
    assert "index: embed passages" in out.err and "answering " in out.err and " s/q" in out.err   # the two bars
    assert "indexing           254 passages in " in format_summary(s)
    res2 = Resources(small, llm, small_embedder(), store_root=tmp_path / "store")      # another run, the same store
    s2 = run(build_method("native_rag", {"k": 3}, res2), small, tmp_path / "b", show_progress=True)
    assert s2["index_build"]["status"] == "cache" and s2["index_build"]["cached"] == ["passage"]
    assert "indexing: from cache (" in capsys.readouterr().out and "from cache (" in format_summary(s2)
    s3 = run(build_method("native_rag", {"k": 3}, res2), small, tmp_path / "b", show_progress=False)   # complete: read
    assert "index_build" not in s3
