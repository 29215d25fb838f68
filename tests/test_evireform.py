"""EviReform: the retrieval math on hand-worked examples, the LLM fallbacks and every control with a scripted fake LLM
and a hashing embedder (fast tier), and a real run of the offline models on three demo questions (slow)."""
import re
import json, uuid
import numpy as np
import pytest
import scipy.sparse as sp
from megrag_kit.data import load_dataset
from megrag_kit.core import Question
from megrag_kit.evireform import (EviReformConfig, PropositionIndex, PropositionVectors, clean_queries, combine, entity_propagation, evireform_summary,
                                  contrast_flag, gold_queries, gold_selection, is_select_all, no_propagation, normalize_entity, parse_propositions, proposition_view, propositions_path, readout,
                                  residual_signal, seed_signal, top_positive)
from megrag_kit.gold import GoldHop, gold_hops
from megrag_kit.method import ConfigError, Resources, build_method
from megrag_kit.runner import run
from conftest import ScriptedLLM
from fakes import HashEmbedder


# ---- the math, worked by hand

M4 = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 0]]))   # p3 isolated, e2 mentioned by nobody


def test_propagation_by_hand():
    """Off the diagonal A = M D_e^+ M^T has A01 = A10 = A02 = A20 = 1/2; A s0 = (.125, .25, .25, 0), row sums
    (1, .5, .5, 0): the transfer is (.125, .5, .5, 0) and s1 = s0 + that."""
    s1 = entity_propagation([0.5, 0.0, 0.25, 0.25], M4)
    assert np.allclose(s1, [0.625, 0.5, 0.75, 0.25])
    assert s1[3] == 0.25                                   # the proposition with no entity receives nothing
    assert np.allclose(entity_propagation([0, 0, 0, 1.0], M4), [0, 0, 0, 1.0])   # and passes nothing
    assert np.allclose(entity_propagation([0.5, 0, 0.25, 0.25], M4.toarray()), s1)   # dense input, same result
    assert np.allclose(no_propagation([0.5, 0, 0.25, 0.25], M4), [0.5, 0, 0.25, 0.25])
    assert np.allclose(entity_propagation([0.2, 0.3], sp.csr_matrix((2, 0))), [0.2, 0.3])   # no entity at all


def test_propagation_has_no_self_term():
    """An isolated proposition whose one entity nobody else mentions keeps its mass (the self term would double it);
    a shared-entity pair exchanges mass, each receiving only the other's."""
    M = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1]]))   # p0, p1 share e0; p2 alone holds e1
    s1 = entity_propagation([0.6, 0.0, 0.4], M)
    assert np.allclose(s1, [0.6, 0.6, 0.4])              # p1 receives p0's 0.6, p0 receives p1's 0; p2 unchanged (not 0.8)
    assert np.allclose(entity_propagation([0.0, 0.0, 1.0], M), [0.0, 0.0, 1.0])
    big = sp.csr_matrix(np.array([[1, 1], [1, 0], [1, 0], [0, 1]]))   # e0 held by three, e1 by p0 and p3
    t = entity_propagation([1.0, 0.0, 0.0, 0.0], big)      # p1: A10 = 1/3 over its row sum 1/3 + 1/3; p3: 1/2 over 1/2
    assert np.allclose(t, [1.0, 0.5, 0.5, 1.0]) and t[0] == 1.0


def test_readout_max_sum_and_tie_break():
    O = sp.csr_matrix((np.ones(4), ([0, 1, 2, 3], [5, 5, 3, 9])), shape=(4, 10))
    assert readout([0.8125, 0.25, 0.625, 0.25], O) == [(5, 0.8125), (3, 0.625), (9, 0.25)]
    assert readout([0.8125, 0.25, 0.625, 0.25], O, "sum")[0] == (5, 1.0625)
    assert readout([0.25, 0.0, 0.25, 0.25], O) == [(3, 0.25), (5, 0.25), (9, 0.25)]   # three-way tie: passage id order
    assert readout([0.1 + 0.2, 0.0, 0.3, 0.0], O) == [(3, 0.3), (5, 0.1 + 0.2)]         # equal up to float noise is a tie
    assert readout([0.0, 0.0, 0.0, 0.0], O) == []
    with pytest.raises(ValueError, match=re.escape("readout must be max|sum, got 'mean'")): readout([1.0], O[:1], "mean")


def test_seed_and_residual_signals_by_hand():
    sims = np.array([0.4, -0.1, 0.2, 0.2])
    cand = top_positive(sims, 40)
    assert cand.tolist() == [0, 2, 3] and top_positive(sims, 2).tolist() == [0, 2]   # ties to the lower index
    s_x = seed_signal(sims, cand, [2], alpha=0.5)                # u_sel = e2; u_sim = (.5, 0, .25, .25)
    assert np.allclose(s_x, [0.25, 0, 0.625, 0.125])
    assert np.allclose(seed_signal(sims, cand, [2], alpha=1.0), [0, 0, 1, 0])
    s_r, seeds = residual_signal([[0.0, 0.3, 0.1, -0.2], [-0.5, -0.1, 0.0, -0.3], [0.0, 0.0, 0.0, 0.5]], k_r=1)
    assert [s.tolist() for s in seeds] == [[1], [], [3]] and np.allclose(s_r, [0, 0.5, 0, 0.5])   # the empty query is not averaged in
    assert np.allclose(combine(s_x, s_r, 0.5), [0.125, 0.25, 0.3125, 0.3125])
    assert np.allclose(combine(s_x, np.zeros(4), 0.25), s_x)      # no residual evidence: the seed alone


def test_proposition_parse_grounding_and_entity_rule():
    passage = "Lake Baikal\nLake Baikal is a rift lake in Siberia. The Selenga River flows into it."
    reply = json.dumps({"propositions": [{"text": "Lake Baikal is a rift lake in Siberia.", "entities": ["The Lake Baikal's", "SIBERIA", "Siberia", "Moscow"]},
                                         {"text": "Ada Lovelace was born on 10 December 1815.", "entities": ["Ada Lovelace"]},
                                         {"text": "short", "entities": []}, "not an object"]})
    assert parse_propositions(reply, passage) == [{"text": "Lake Baikal is a rift lake in Siberia.", "entities": ["lake baikal", "siberia"]}]
    assert [normalize_entity(s) for s in ("An  Apple", "“Imagine”", "...", "Lothair II's")] == ["apple", "imagine", "", "lothair ii"]


def test_index_matrices_grow_with_the_view():
    class View: extracted = {3: [{"text": "A b c d e f g.", "entities": ["a", "b"]}], 1: [{"text": "B c d e f g h.", "entities": ["b"]}, {"text": "No entity here.", "entities": []}]}
    v = View(); idx = PropositionIndex(v, 5, HashEmbedder())
    assert (idx.M.toarray() == [[1, 0], [0, 0], [1, 1]]).all() and idx.entities == ["b", "a"]   # rows in passage order: x1.0, x1.1, x3.0
    assert idx.O.indices.tolist() == [1, 1, 3] and idx.rows([3, 1]).tolist() == [2, 0, 1] and idx.unit(2) == "x3.0"
    v.extracted = {**v.extracted, 4: [{"text": "C a d.", "entities": ["a"]}]}
    assert idx.M.shape == (4, 2) and idx.M[3].toarray().tolist() == [[0, 1]] and idx.O.shape == (4, 5)
    sims = idx.similarities(["A b c d e f g."], idx.rows([3, 4]))
    assert sims.shape == (1, 2) and np.isclose(sims[0, 0], 1.0, atol=1e-5)


class CountingEmbedder(HashEmbedder):
    "A `HashEmbedder` that counts the texts it encodes."
    def __init__(self): self.calls = []
    def encode(self, texts, batch_size=64): self.calls.append(list(texts)); return super().encode(texts, batch_size)


def test_proposition_vectors_persist_and_grow(tmp_path):
    emb = CountingEmbedder()
    pv = PropositionVectors(emb, tmp_path, "propositions-x")
    v = pv.get(["Alpha is a river.", "Beta is a town.", "Alpha is a river."])
    assert v.shape == (3, 256) and np.allclose(v[0], v[2]) and emb.calls == [["Alpha is a river.", "Beta is a town."]] and pv.encoded == 2
    assert sorted(f.name for f in (tmp_path / "hash-bow-256").iterdir()) == ["propositions-x.f32", "propositions-x.keys", "propositions-x.meta.json"]
    again = PropositionVectors(emb, tmp_path, "propositions-x")             # a second build loads instead of embedding
    w = again.get(["Beta is a town.", "Gamma is a lake."])
    assert len(emb.calls) == 2 and emb.calls[1] == ["Gamma is a lake."] and again.encoded == 1 and len(again) == 3
    assert np.array_equal(w[0], v[1]) and np.allclose(w[1], emb.encode(["Gamma is a lake."])[0])
    with open(again.path, "ab") as fh: fh.write(b"\0" * 100)                # a torn tail (a killed append) is cut off
    torn = PropositionVectors(emb, tmp_path, "propositions-x")
    assert len(torn) == 3 and again.path.stat().st_size == 3 * 256 * 4
    class Other(HashEmbedder): model_id, dim = "hash-bow-256", 128          # same id, other dimension: start afresh
    assert len(PropositionVectors(Other(), tmp_path, "propositions-x")) == 0


def test_index_reads_persisted_vectors_and_embeds_only_new_propositions(tmp_path):
    class View: extracted = {0: [{"text": "Alpha is a river.", "entities": ["alpha"]}], 2: [{"text": "Beta is a town.", "entities": []}]}
    emb = CountingEmbedder(); v = View()
    first = PropositionIndex(v, 3, emb, PropositionVectors(emb, tmp_path, "p"))
    s1 = first.similarities(["river"], first.rows([0, 2]))
    assert emb.calls[0] == ["Alpha is a river.", "Beta is a town."]
    v.extracted = {**v.extracted, 1: [{"text": "Gamma is a lake.", "entities": []}]}      # the proposition file grew
    second = PropositionIndex(v, 3, emb, PropositionVectors(emb, tmp_path, "p"))
    s2 = second.similarities(["river"], second.rows([0, 1, 2]))
    assert emb.calls[1:] == [["river"], ["Gamma is a lake."], ["river"]] and second.store_vectors.encoded == 1
    assert np.allclose(s2[0, [0, 2]], s1[0])


# ---- the method with a scripted LLM over the demo corpus

class Script(ScriptedLLM):
    """Routes by prompt kind: extraction (each passage's first sentence, its title as entity), selector, writer, reorder, reader."""
    def __init__(self, selected=(1,), queries=(("Sir James Charles Mathew",),), order=(3, 1), fail_pids=()):
        self.selected, self.queries, self.order, self.kinds = selected if isinstance(selected, str) else list(selected), list(queries), list(order), []
        self.fail_titles = set(fail_pids)
        super().__init__(self.route)
        self.model_id = f"scripted-{uuid.uuid4().hex}"          # a fresh proposition file per test

    def route(self, msg):
        if msg.startswith("Passage:"):
            self.kinds.append("extract"); lines = msg.split("\n")
            if lines[1] in self.fail_titles: return "no propositions here"
            return json.dumps({"propositions": [{"text": lines[2].split(". ")[0], "entities": [lines[1]]}]})
        if msg.startswith("That reply is not usable"):
            self.kinds.append("reask"); return "still not JSON"
        if "Observed passages:" in msg:
            self.kinds.append("write"); qs = self.queries.pop(0) if self.queries else ()
            return qs if isinstance(qs, str) else json.dumps({"queries": list(qs)})     # a str: the raw reply (prose)
        if "\nPassages:\n" in msg: self.kinds.append("reorder"); return json.dumps({"order": self.order})
        if "\nStatements:\n" in msg:
            self.kinds.append("select"); return self.selected if isinstance(self.selected, str) else json.dumps({"selected": self.selected})
        self.kinds.append("read"); return "Cork"


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.fixture(scope="module")
def root(tmp_path_factory): return tmp_path_factory.mktemp("store")


def make(demo, root, llm, **params):
    return build_method("evireform", params, Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=root))


def test_full_run_traces_every_quantity(demo, root):
    llm = Script()
    (a,) = make(demo, root, llm, scope="pool").answer(demo.questions[:1])
    t = a.trace
    assert llm.kinds.count("select") == 1 and llm.kinds.count("write") == 1 and llm.kinds[-1] == "read"
    assert len(t["candidates"]) == 10 and t["selected"] == [t["candidates"][0][:2]] and not t["selector"]["fallback"]
    assert t["rounds"][0]["queries"] == ["Sir James Charles Mathew"] and len(t["rounds"][0]["seeds"][0]) == 4
    assert set(t["signals"]) == {"s_x", "s_r", "s0", "s1"} and all(t["signals"][k] for k in t["signals"])
    assert len(t["pool"]) > 10 and {int(u[1:].split(".")[0]) for u, *_ in t["candidates"]} == set(t["pool"][:10])   # one proposition per passage
    assert a.retrieved[:len(t["ranking"])] == [p for p, _ in t["ranking"]] and len(a.retrieved) == 20 and len(set(a.retrieved)) == 20
    scored = [s for _, s in t["ranking"] if s is not None]
    assert scored == sorted(scored, reverse=True)
    assert a.prediction == "Cork" and a.cost.llm_calls == 3 and a.fields["n_queries"] == 1 and a.fields["extracted_new"] == len(t["pool"])
    json.dumps(t)


def test_selector_falls_back_to_the_best_positive_proposition(demo, root):
    for reply in ([], [0, 99], "I pick the first"):                 # empty, out of range, not JSON (re-asked once)
        llm = Script(selected=reply)
        (a,) = make(demo, root, llm, scope="pool").answer(demo.questions[:1])
        assert a.trace["selector"]["fallback"] and a.fields["seed_fallback"]
        assert a.trace["selected"] == [a.trace["candidates"][0][:2]]
        assert llm.kinds.count("reask") == (1 if isinstance(reply, str) else 0)


def test_residual_fallback_is_the_seed_alone(demo, root):
    base = make(demo, root, Script(), variant="no_reformulation").answer(demo.questions[:1])[0]
    for queries in ((), ("", "   ", "?!", "Where was the place of burial of Charles Mathew's father?")):
        llm = Script(queries=[queries])
        (a,) = make(demo, root, llm).answer(demo.questions[:1])
        r = a.trace["rounds"][0]
        assert a.fields["residual_fallback"] and r["queries"] == [] and a.trace["signals"]["s_r"] == []
        assert [x for _, x in r["dropped"]] == (["empty", "empty", "no content word", "repeats the question"] if queries else [])
        assert a.retrieved == base.retrieved and a.trace["signals"]["s0"] == a.trace["signals"]["s_x"]


def test_residual_query_reaches_a_passage_outside_the_initial_pool(demo, root):
    q = demo.questions[0]
    m = make(demo, root, Script(queries=[("Sir James Charles Mathew Irish-born judge",)]), pool_x=1, scope="pool")
    (a,) = m.answer([q])
    t = a.trace
    assert len(t["pool"]) > 1 and t["pool"][0] == m.store.search([q.question], 1)[0][0][0]
    assert set(t["coverage"]["expanded"]) > set(t["coverage"]["initial"])
    assert a.fields["recall_expanded"] >= a.fields["recall_initial"]


def test_repeat_question_matches_the_retrieval_count_without_a_writer(demo, root):
    llm = Script()
    (a,) = make(demo, root, llm, variant="repeat_question", L=2, k_r=3).answer(demo.questions[:1])
    r = a.trace["rounds"][0]
    assert "write" not in llm.kinds and r["queries"] == [demo.questions[0].question] and r["k"] == 6 and len(r["seeds"][0]) == 6


def test_no_propagation_keeps_s0(demo, root):
    (a,) = make(demo, root, Script(), variant="no_propagation").answer(demo.questions[:1])
    assert a.trace["signals"]["s1"] == a.trace["signals"]["s0"]
    (b,) = make(demo, root, Script(), variant="residual_only").answer(demo.questions[:1])
    assert b.trace["signals"]["s0"] == b.trace["signals"]["s_r"]


def test_reorder_control_cannot_add_a_passage(demo, root):
    llm = Script(order=[3, 1, 77, 3])
    m = make(demo, root, llm, variant="reorder", reorder_k=10)
    (a,) = m.answer(demo.questions[:1])
    dense = [p for p, _ in m.store.search([demo.questions[0].question], 20)[0]]
    assert a.retrieved[:2] == [dense[2], dense[0]] and set(a.retrieved[:10]) == set(dense[:10]) and a.retrieved[10:] == dense[10:]
    assert a.trace["reorder"]["valid"] == [3, 1] and "write" not in llm.kinds


def test_passage_baselines(demo, root):
    for variant, search in (("dense", "search"), ("bm25", "search_bm25")):
        llm = Script()
        m = make(demo, root, llm, variant=variant)
        (a,) = m.answer(demo.questions[:1])
        assert a.retrieved == [p for p, _ in getattr(m.store, search)([demo.questions[0].question], 20)[0]]
        assert llm.kinds == ["read"] and a.fields == {}


def test_later_rounds_stop_when_nothing_is_missing(demo, root):
    llm = Script(queries=[("Sir James Charles Mathew",), ("Irish-born judge burial",), ()])
    (a,) = make(demo, root, llm, rounds=3).answer(demo.questions[:1])
    rs = a.trace["rounds"]
    assert [r["queries"] for r in rs] == [["Sir James Charles Mathew"], ["Irish-born judge burial"], []]
    assert a.fields["rounds_used"] == 2 and not a.fields["residual_fallback"] and rs[0]["ranking"] and rs[2]["ranking"] is None
    assert a.fields["rounds_entered"] == 3                          # the third writer was asked, and named nothing new
    llm2 = Script(queries=[("Sir James Charles Mathew",), ("sir james charles MATHEW",)])       # a repeat of round one is dropped
    (b,) = make(demo, root, llm2, rounds=2).answer(demo.questions[:1])
    assert b.trace["rounds"][1]["dropped"] == [["sir james charles MATHEW", "duplicate"]] and b.fields["rounds_used"] == 1
    assert b.fields["rounds_entered"] == 2
    (c,) = make(demo, root, Script(queries=[()]), rounds=3).answer(demo.questions[:1])   # nothing missing after round one: it stops there
    assert (c.fields["rounds_entered"], c.fields["rounds_used"]) == (1, 0)
    (d,) = make(demo, root, Script(), variant="reorder").answer(demo.questions[:1])
    assert (d.fields["rounds_entered"], d.fields["rounds_used"]) == (0, 0)


def test_failed_extractions_are_counted_not_dropped(demo, root):
    q = demo.questions[0]
    fail = [demo.corpus[p].title for p in q.gold_pids]
    llm = Script(fail_pids=fail)
    m = make(demo, root, llm, pool_x=10, pool_r=1, scope="pool")
    (a,) = m.answer([q])
    failed_in_pool = [p for p in a.trace["pool"] if demo.corpus[p].title in fail]
    assert failed_in_pool and a.fields["pool_failed"] == len(failed_in_pool) and set(failed_in_pool) <= set(m.view.failures)
    assert llm.kinds.count("reask") >= len(failed_in_pool)            # each failed passage was re-asked once
    assert a.fields["pool_propositions"] == a.fields["pool_passages"] - a.fields["pool_failed"]


def test_config_rules():
    assert EviReformConfig.from_dict({"reformulation": "none", "propagation": "none"}).variant == "no_reformulation_no_propagation"
    assert EviReformConfig.from_dict({"variant": "residual_only"}).combination == "residual_only"
    assert EviReformConfig().reader_max_passages == 5
    for bad, msg in (({"rounds": 2, "variant": "no_reformulation"}, "rounds=2"), ({"alpha": 1.5}, "alpha must be <= 1.0"),
                     ({"combination": "residual_only", "reformulation": "none"}, "residual_only"), ({"variant": "bm25", "retrieval": "dense"}, "variant=bm25")):
        with pytest.raises(ConfigError, match=re.escape(msg)): EviReformConfig.from_dict(bad)


def test_runner_summary_has_coverage_and_yield(demo, root, tmp_path):
    m = make(demo, root, Script(queries=[("Sir James Charles Mathew",)] * 3))
    s = run(m, demo, tmp_path / "run", limit=3, batch_size=2, show_progress=False)
    assert s["n"] == 3 and {"recall@5", "chain@5", "hit@20", "mrr", "f1"} <= set(s)
    for k in ("chain_initial", "chain_expanded", "incomplete_initial", "became_complete", "propositions_per_passage", "failed_passages", "extracted_new"):
        assert k in s, k
    assert s["propositions_per_passage"] == 1.0 and s["failed_passages"] == 0.0 and s["mean_queries"] <= 1
    assert evireform_summary([{"f1": 0.0}]) == {}


def test_retrieval_only_run_makes_no_reader_call(demo, root):
    llm = Script()
    full = make(demo, root, Script()).answer(demo.questions[:1])[0]
    (a,) = make(demo, root, llm, read=False).answer(demo.questions[:1])
    assert a.prediction == "" and "read" not in llm.kinds and a.cost.llm_calls == 2 and a.retrieved == full.retrieved


@pytest.mark.slow
def test_parser_propositions_rule_on_a_hand_written_passage():
    from megrag_kit.evireform import default_proposition_parser
    text = ("Lothair II\nLothair II (835 \u2013 8 August 869) was the king of Lotharingia. He was the second son of Emperor Lothair I; "
            "his mother was Ermengarde of Tours. It is near the Rhine. In 855 he married Teutberga.")
    got, none = default_proposition_parser().extract([text, "Untitled\n1999."])
    assert got == [
        {"text": "Lothair II (835 \u2013 8 August 869) was the king of Lotharingia.", "entities": ["lothair ii", "lotharingia"]},
        {"text": "Lothair II was the second son of Emperor Lothair I", "entities": ["lothair ii", "lothair"]},   # split at ';', He -> title
        {"text": "Lothair II's mother was Ermengarde of Tours.", "entities": ["lothair ii", "ermengarde of tours"]},  # his -> title's
        {"text": "Lothair II is near the Rhine.", "entities": ["lothair ii"]},
        {"text": "In 855 he married Teutberga.", "entities": ["teutberga"]}]      # a pronoun that does not start the piece stays
    assert none == []


@pytest.mark.slow
def test_parser_backend_switches_the_proposition_view(demo, tmp_path):
    from megrag_kit.index import ParsedView
    res = Resources(demo, llm=Script(), embedder=HashEmbedder(), store_root=tmp_path, openie_backend="parser")
    m = build_method("evireform", dict(propositions="eager"), res)
    assert isinstance(m.view, ParsedView) and propositions_path(res.store).name.endswith("-propositions1.jsonl")
    assert len(m.view.extracted) == len(demo.corpus) and m.view.path.exists()               # the whole corpus, eagerly
    (a,) = m.answer(demo.questions[:1])
    assert "extract" not in m.llm.kinds and m.llm.kinds.count("select") == 1 and a.fields["pool_propositions"] > a.fields["pool_passages"]
    vec = tmp_path / "vectors" / "hash-bow-256" / f"propositions-{m.view.path.stem}.keys"
    assert len(vec.read_text().split()) == m.index.store_vectors.encoded > 0                 # the vectors it searched are on disk
    llm_res = Resources(demo, llm=Script(), embedder=HashEmbedder(), store_root=tmp_path)
    assert propositions_path(llm_res.store) != propositions_path(res.store)                  # never the LLM's file


# ---- the real offline models

@pytest.mark.slow
def test_real_offline_models_on_two_questions(demo, minilm, smollm, demo_store):
    """SmolLM2-135M extracts, selects, writes and reads; MiniLM ranks. Two questions (one batch of two) and small pools
    (2 passages of x, 1 per residual query) keep it near a minute on the CPU: what only the real models show is that
    their replies pass through every stage, which one batch shows as well as many."""
    res = Resources(demo, llm=smollm, embedder=minilm, store_root=demo_store)
    m = build_method("evireform", dict(pool_x=2, pool_r=1, L=1, scope="pool"), res)
    answers = m.answer(demo.questions[:2])
    for q, a in zip(demo.questions[:2], answers):
        assert len(a.retrieved) == 20 and len(set(a.retrieved)) == 20 and a.prediction.strip()
        t = a.trace
        assert t["pool"][:2] == [p for p, _ in m.store.search([q.question], 2)[0]] and len(t["pool"]) <= 2 + 2 * 1
        assert t["selected"] or a.fields["pool_propositions"] == 0
        assert a.fields["pool_passages"] == len(t["pool"]) and a.cost.llm_calls >= 2
        json.dumps(t)
    done = m.view.extracted
    assert sum(map(len, done.values())) > 0 and all(it["text"] and isinstance(it["entities"], list) for its in done.values() for it in its)


# ---- issue 24: the whole index, worked-example copies, select-all, the health counters, the gold policy

def test_index_scope_searches_every_proposition(demo, root):
    """The question's candidates are its top K_s propositions over the whole index (not only its dense top passages'),
    and a residual query's seeds are its top k_r over the whole index too."""
    q = demo.questions[0]
    m = make(demo, root, Script(queries=[("Sir James Charles Mathew Irish-born judge",)]), pool_x=1, pool_r=1)
    (a,) = m.answer([q])
    idx, t = m.index, a.trace
    assert len(m.view.extracted) == len(demo.corpus)                     # the whole corpus is in the index
    sims = idx.similarities([q.question], None)[0]
    assert len(sims) == len(idx) and [u for u, *_ in t["candidates"]] == [idx.unit(int(i)) for i in top_positive(sims, 40)]
    dense1 = m.store.search([q.question], 1)[0][0][0]
    assert {int(u[1:].split(".")[0]) for u, *_ in t["candidates"]} - {dense1}   # candidates from passages outside x's top pool_x
    rq = t["rounds"][0]["queries"][0]
    want = [idx.unit(int(i)) for i in top_positive(idx.similarities([rq], None)[0], 4)]
    assert [u for u, _ in t["rounds"][0]["seeds"][0]] == want and t["rounds"][0]["pools"] == []
    assert t["universe"]["propositions"] == len(idx) and set(t["pool"]) == set(t["coverage"]["expanded"])
    assert a.fields["pool_passages"] == len(t["pool"]) and a.fields["chain_pool"] == a.fields["chain_expanded"]


def test_copied_worked_example_queries_are_dropped_and_counted(demo, root):
    llm = Script(queries=[("Where was Lord Byron born?", "Where was Sir James Charles Mathew buried?")])
    (a,) = make(demo, root, llm).answer(demo.questions[:1])
    r = a.trace["rounds"][0]
    assert r["queries"] == ["Where was Sir James Charles Mathew buried?"] and r["dropped"] == [["Where was Lord Byron born?", "copies the worked example"]]
    assert a.fields["copied_queries"] == 1 and not a.fields["residual_fallback"]
    (b,) = make(demo, root, Script(queries=[("Where was the father of Ada Lovelace born?",)])).answer(demo.questions[:1])
    assert b.fields["copied_queries"] == 1 and b.fields["residual_fallback"] and b.trace["rounds"][0]["queries"] == []
    ctx = "Question: Who was Lord Byron's daughter?"                    # the question itself names Byron: not a copy
    assert clean_queries({"queries": ["Who was the daughter of Lord Byron?"]}, "Who was Lord Byron's daughter?", 2, context=ctx)[0] == \
        ["Who was the daughter of Lord Byron?"]
    assert clean_queries({"queries": ["where was lord byron born"]}, "Where did the poet die?", 2)[1] == [["where was lord byron born", "copies the worked example"]]


def test_select_all_replies_are_recognised(demo, root):
    every = list(range(1, 13))                                          # the 135M model's usual reply: it counts
    (a,) = make(demo, root, Script(selected=every)).answer(demo.questions[:1])
    t = a.trace
    assert t["selector"]["select_all"] and t["selector"]["valid"] == list(range(1, 9)) and a.fields["select_all"]
    assert a.fields["seed_fallback"] and t["selected"] == [t["candidates"][0][:2]]      # no decision: the design's fallback
    (b,) = make(demo, root, Script(selected=every), select_all="keep").answer(demo.questions[:1])
    assert b.fields["select_all"] and not b.fields["seed_fallback"] and len(b.trace["selected"]) == 8
    (c,) = make(demo, root, Script(selected=[2, 5])).answer(demo.questions[:1])
    assert not c.fields["select_all"] and not c.fields["seed_fallback"] and len(c.trace["selected"]) == 2
    assert is_select_all([0, 1], 2, 8) and not is_select_all([0], 1, 8) and not is_select_all([0, 2], 40, 8) and is_select_all(list(range(8)), 40, 8)


def test_health_counters_in_the_summary(demo, root, tmp_path):
    "Scripted replies: prose from the selector (unparsed), a copied example query, a usable query, prose from the writer."
    llm = Script(selected="I pick the first", queries=[("Where was Lord Byron born?",), ("Where is Sir James Charles Mathew buried?",),
                                                        "I would search for the father."])
    m = make(demo, root, llm, read=False)
    s = run(m, demo, tmp_path / "run", limit=3, batch_size=3, show_progress=False)
    assert (s["selector_unparsed"], s["seed_fallback"], s["select_all"]) == (100.0, 100.0, 0.0)
    assert (s["copied_queries"], s["copied_questions"], s["residual_fallback"]) == (1, 33.33, 66.67)
    assert s["writer_unparsed"] == 33.33 and s["mean_queries"] == round(1 / 3, 3)
    assert {k for cols in type(m).report_tables.values() for k in cols.values()} <= set(s)  # every declared column is summarized
    assert list(type(m).metrics.values()) == ["recall@5", "recall@10", "chain@5"] and {"recall@5", "chain@5"} <= set(s)


HOPS = [GoldHop(1, "Who is the father of Charles Mathew?", "Sir James Charles Mathew", 7), GoldHop(2, "Where was #1 buried?", "Cork", 8)]


def test_gold_writer_and_selector_by_hand():
    assert gold_queries(HOPS, []) == (["Who is the father of Charles Mathew?"], [["Where was #1 buried?", "needs an unobserved hop's answer"]])
    assert gold_queries(HOPS, [7, 30]) == (["Where was Sir James Charles Mathew buried?"], [])
    assert gold_queries(HOPS, [8]) == (["Who is the father of Charles Mathew?"], [])
    assert gold_queries(HOPS, [8, 7]) == ([], [])
    three = [GoldHop(1, "Who directed Alpha?", "Bo", 1), GoldHop(2, "Who is the spouse of #1?", "Cy", 2),
             GoldHop(3, "Where was #2 born?", "Dee", None)]                 # hop 3's passage is unknown: never observed
    assert gold_queries(three, [1]) == (["Who is the spouse of Bo?"], [["Where was #2 born?", "needs an unobserved hop's answer"]])
    assert gold_queries(three, [1, 2]) == (["Where was Cy born?"], [])
    assert gold_selection(three, [5, 2, 2, 9, 1]) == [1, 2, 4] and gold_selection([], [1, 2]) == []


GOLD_X = "Where was Charles James Mathew's father, the British barrister and Labour politician's father, buried?"


def _gold_question(demo, hops=HOPS, **kw):
    "Demo question 0 reworded so that the hashing embedder ranks passage 7 first, with a hand-made decomposition."
    q = demo.questions[0]
    dec = [{"question": h.template, "answer": h.answer, "support_pid": h.pid} for h in hops]
    return Question(q.qid, GOLD_X, kw.get("answers", q.answers), kw.get("gold_pids", q.gold_pids), decomposition=dec)


def _cand_pids(t): return [int(u[1:].split(".")[0]) for u, *_ in t["candidates"]]


def test_gold_policy_in_the_method_reads_only_the_hops(demo, root):
    "Both gold passages among the candidates: their propositions are selected, nothing is missing, no LLM call."
    llm = Script()
    (a,) = make(demo, root, llm, variant="gold", read=False).answer([_gold_question(demo)])
    t = a.trace
    assert "select" not in llm.kinds and "write" not in llm.kinds and a.cost.llm_calls == 0
    cand = _cand_pids(t)
    assert cand[0] == 7 and 8 in cand
    assert t["selector"]["valid"] == [i + 1 for i, p in enumerate(cand) if p in (7, 8)] and not a.fields["seed_fallback"]
    assert t["observed"] == [7, 8] and t["rounds"][0]["queries"] == [] and a.fields["residual_fallback"]


def test_gold_policy_asks_the_missing_hop_with_the_observed_answer(demo, root):
    "Only hop 1's passage among the candidates: the gold writer asks hop 2 with #1 filled by hop 1's gold answer."
    cand = _cand_pids(make(demo, root, Script(), variant="gold", read=False).answer([_gold_question(demo)])[0].trace)
    far = next(p for p in range(len(demo.corpus)) if p not in cand)          # a passage no candidate comes from
    hops = [HOPS[0], GoldHop(2, "Where was #1 buried?", "Cork", far)]
    (a,) = make(demo, root, Script(), variant="gold", read=False).answer([_gold_question(demo, hops)])
    t = a.trace
    assert t["observed"][0] == 7 and t["rounds"][0]["queries"] == ["Where was Sir James Charles Mathew buried?"]
    assert len(t["rounds"][0]["seeds"][0]) == 4 and a.fields["n_queries"] == 1 and a.cost.llm_calls == 0
    (b,) = make(demo, root, Script(), variant="gold", read=False).answer([_gold_question(demo, hops, answers=[""], gold_pids=[])])
    for k in ("candidates", "selector", "selected", "observed", "rounds", "ranking", "signals"):
        assert b.trace[k] == t[k], k                                         # blanked answers and gold passages: same decisions
    assert b.retrieved == a.retrieved


MUSIQUE_EXPECTED = {   # the first three MuSiQue dev questions: hop 2's query once hop 1's passage is observed
    "2hop__82713_84616": "what did Audrey Hepburn won a tony for",
    "2hop__269766_43945": "common sense which was written by Thomas Paine was an important work because it",
    "2hop__519160_78303": "what was Chuck Norris name in walker texas ranger",
}


@pytest.mark.data            # reads MuSiQue through the default data folder (skips without it)
def test_gold_writer_on_three_real_musique_questions():
    try: ds = load_dataset("musique")
    except (FileNotFoundError, ValueError) as e: pytest.skip(f"MuSiQue data not available: {e}")
    for q in ds.questions[:3]:
        hops = gold_hops(q)
        assert len(hops) == 2 and all(h.pid is not None for h in hops)
        first, _ = gold_queries(hops, [])
        assert first == [hops[0].template]                                # nothing observed: hop 1 only (#1 unknown)
        assert gold_queries(hops, [hops[0].pid]) == ([MUSIQUE_EXPECTED[q.qid]], [])
        assert gold_queries(hops, [h.pid for h in hops]) == ([], [])
        blank = Question(q.qid, q.question, [""], [], q.qtype, q.decomposition)
        assert gold_queries(gold_hops(blank), [hops[0].pid]) == gold_queries(hops, [hops[0].pid])
        assert gold_selection(gold_hops(blank), [hops[1].pid, -1, hops[0].pid]) == [0, 2]


def test_contrast_flag_says_when_the_sides_cannot_differ():
    full, noref = dict(variant="full", reformulation="residual", beta=0.5), dict(variant="no_reformulation", reformulation="none")
    a = [dict(id="q1", n_queries=0, retrieved=[1, 2]), dict(id="q2", n_queries=0, retrieved=[3, 4])]
    b = [dict(id="q1", n_queries=0, retrieved=[1, 2]), dict(id="q2", n_queries=0, retrieved=[4, 3])]
    assert contrast_flag(a, b, full, noref) == "A keeps no residual query"           # zero by construction, rankings aside
    a[0]["n_queries"] = 1
    assert contrast_flag(a, b, full, noref) == ""
    assert contrast_flag(a, a, full, {**full, "variant": "custom", "read": False}) == "same settings; identical rankings on all 2 paired questions"
    assert contrast_flag(a, b, {**full, "beta": 1.0}, noref) == "beta = 1 on A"


def test_gold_policy_refuses_a_question_without_a_decomposition(demo, root):
    with pytest.raises(ValueError, match="has no gold decomposition"):
        make(demo, root, Script(), variant="gold", read=False).answer(demo.questions[:1])
    with pytest.raises(ValueError, match="policy=gold_residual: question .* has no gold decomposition"):
        make(demo, root, Script(), variant="gold_residual", read=False).answer(demo.questions[:1])


def test_gold_residual_keeps_the_model_selection_and_writes_the_gold_queries(demo, root):
    "policy=gold_residual: the LLM selector decides (its candidate 2, not a gold passage's); the writer is gold."
    cand = _cand_pids(make(demo, root, Script(), variant="gold", read=False).answer([_gold_question(demo)])[0].trace)
    pick = next(i for i, p in enumerate(cand) if p not in (7, 8))            # a candidate of neither gold passage
    llm = Script(selected=(pick + 1,))
    (a,) = make(demo, root, llm, variant="gold_residual", read=False).answer([_gold_question(demo)])
    t = a.trace
    assert llm.kinds.count("select") == 1 and "write" not in llm.kinds and a.cost.llm_calls == 1
    assert t["selector"]["valid"] == [pick + 1] and t["observed"][0] == cand[pick]    # then the residual seeds' sources
    assert t["rounds"][0]["policy"] == "gold" and t["rounds"][0]["queries"] == ["Who is the father of Charles Mathew?"]
    cfg = EviReformConfig(variant="gold_residual")
    assert (cfg.policy, cfg.retrieval, cfg.reformulation) == ("gold_residual", "evireform", "residual")
    with pytest.raises(ConfigError, match="policy=gold_residual .* retrieval=dense has none"):
        EviReformConfig(policy="gold_residual", retrieval="dense")
