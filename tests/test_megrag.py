"""MEGRAG control flow with a scripted fake LLM and a hashing embedder (fast tier), and real runs of the offline models (slow)."""
import re
import json, uuid
from dataclasses import asdict
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore
from megrag_kit.megrag import EvidenceGraph, node_errors, megrag_summary, collect_candidates
from megrag_kit.method import Resources, build_method
from megrag_kit.runner import run
from conftest import ScriptedLLM
from fakes import HashEmbedder


def stop(ans): return json.dumps(dict(intermediate_answer=ans, resolved_path=f"-> {ans}", stop=True, answer=ans, missing="none", next_query="", relation=""))
def cont(b, nq, rel="then the next hop"): return json.dumps(dict(intermediate_answer=b, resolved_path=f"-> {b}", stop=False, answer="", missing=f"about {b}", next_query=nq, relation=rel))


class _Endless:
    "A node script that never runs out: `pop(0)` answers the last node prompt with `script(prompt)`."
    def __init__(self, script): self.script, self.last = script, ""
    def pop(self, _): return self.script(self.last)


class Policy(ScriptedLLM):
    """Routes by prompt kind: OpenIE, sufficiency judge, node call, repair, final resolver."""
    def __init__(self, nodes, sufficient=False, resolver="Resolved"):
        self.nodes = nodes if isinstance(nodes, _Endless) else list(nodes)
        self.sufficient, self.resolver, self.kinds = sufficient, resolver, []
        super().__init__(self.route)
    def route(self, msg):
        if msg.startswith("Passage:"):
            title = msg.split("\n")[1]; self.kinds.append("openie")
            return json.dumps({"triples": [[title, "has title", title]]})
        if "Is the evidence sufficient" in msg: self.kinds.append("judge"); return json.dumps({"sufficient": self.sufficient})
        if "Candidate answer from the last step" in msg: self.kinds.append("resolver"); return self.resolver
        self.kinds.append("repair" if msg.startswith("Your JSON broke") else "node")
        if isinstance(self.nodes, _Endless): self.nodes.last = msg
        return self.nodes.pop(0)


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    return tmp_path_factory.mktemp("store")     # one store folder per module: the hashed passage vectors are built once


def resources(demo, vectors, policy, embedder=None):
    policy.model_id = f"scripted-{uuid.uuid4().hex}"   # a fresh triple file per test (the scripted OpenIE)
    return Resources(demo, llm=policy, embedder=embedder or HashEmbedder(), store_root=vectors)


def make(demo, vectors, llm, **params):
    return build_method("megrag", params, resources(demo, vectors, llm))


def test_stop_at_step_one(demo, vectors):
    p = Policy([stop("Cork")])
    (r,) = make(demo, vectors, p).answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    assert r.prediction == "Cork"
    assert len(g.nodes) == 1 and g.edges == [[1, "STOP"]] and not g.budget_exhausted
    assert p.kinds.count("judge") == 2 and g.nodes[0].composition == "T+S+P"    # neither T nor T+S judged sufficient
    assert len(g.nodes[0].evidence["passages"]) == 10 and len(g.nodes[0].evidence["triples"]) == 10  # one scripted triple per passage
    assert r.cost.llm_calls == 3 and r.fields["steps"] == 1 and r.cost.prompt_tokens == 30 and r.cost.completion_tokens == 9


def test_an_unparsed_sufficiency_verdict_is_re_asked_and_counted(demo, vectors):
    "A verdict that is not {\"sufficient\": bool} is re-asked once; still unusable, it is read as insufficient and recorded as None."
    p = Policy([stop("Cork")])
    p.route = lambda msg, route=p.route: "I think it might be." if "Is the evidence sufficient" in msg or msg.startswith("That reply is not usable") else route(msg)
    p.script = p.route
    (r,) = make(demo, vectors, p).answer(demo.questions[:1])
    n = EvidenceGraph.from_dict(r.trace).nodes[0]
    assert n.sufficiency == [["T", None], ["T+S", None]] and n.composition == "T+S+P"
    assert (r.cost.llm_calls, r.cost.unparsed, r.cost.reasks) == (5, 4, 2)      # 2 levels x (ask + re-ask) + the node call


def test_sufficient_triples_stop_the_cascade(demo, vectors):
    p = Policy([stop("Cork")], sufficient=True)
    (r,) = make(demo, vectors, p).answer(demo.questions[:1])
    n = EvidenceGraph.from_dict(r.trace).nodes[0]
    assert n.composition == "T" and list(n.evidence) == ["triples"] and n.sufficiency == [["T", True]]
    assert p.kinds.count("judge") == 1


def test_continue_then_stop_builds_a_path(demo, vectors):
    p = Policy([cont("James Charles Mathew", "Where was James Charles Mathew buried?", "father -> burial place"), stop("Cork")])
    (r,) = make(demo, vectors, p).answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    assert [n.query for n in g.nodes] == [demo.questions[0].question, "Where was James Charles Mathew buried?"]
    assert g.edges == [[1, "father -> burial place", 2], [2, "STOP"]]
    node2_prompt = [m for m in p.seen if m[-1]["content"].startswith("Initial Query")][-1][-1]["content"]
    assert "Step 1: query: Where was the place of burial" in node2_prompt and "relation to next query: father -> burial place" in node2_prompt
    assert r.prediction == "Cork" and all(node_errors(asdict(n)) == [] for n in g.nodes)
    G = g.to_networkx()
    assert list(G.edges(data="relation")) == [("v1", "v2", "father -> burial place"), ("v2", "STOP", "STOP")]


def test_budget_exhaustion_calls_the_resolver_with_ordered_evidence(demo, vectors):
    p = Policy([cont("A", "query two"), cont("B", "query three")], resolver="Cork")
    (r,) = make(demo, vectors, p, budget=2).answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    assert g.budget_exhausted and len(g.nodes) == 2 and g.edges == [[1, "then the next hop", 2]]
    assert r.prediction == "Cork" and g.resolver["clue"] == "B"
    ctx = [m for m in p.seen if "Candidate answer from the last step" in m[-1]["content"]][0][-1]["content"]
    assert ctx.index("Step 1 evidence") < ctx.index("Step 2 evidence") < ctx.index("Candidate answer from the last step: B")


def test_invalid_output_is_repaired_then_coerced(demo, vectors):
    bad = json.dumps(dict(intermediate_answer="Cork", resolved_path="", stop=True, answer="", missing="", next_query="", relation=""))
    p = Policy([bad, stop("Cork")])
    (r,) = make(demo, vectors, p).answer(demo.questions[:1])
    n = EvidenceGraph.from_dict(r.trace).nodes[0]
    assert n.repaired and not n.coerced and not n.parsed_ok and r.prediction == "Cork" and "repair" in p.kinds
    p2 = Policy(["not json", "still not json"])
    (r2,) = make(demo, vectors, p2, budget=1).answer(demo.questions[:1])
    n2 = EvidenceGraph.from_dict(r2.trace).nodes[0]
    assert n2.coerced and node_errors(asdict(n2)) == [] and not n2.stop and n2.next_query == demo.questions[0].question
    assert r2.fields["budget_exhausted"] and megrag_summary([{**r2.fields, "gold_pids": [1]}])["coerced"] == 1


@pytest.mark.parametrize("params,check", [
    ({"variant": "triples_only"}, lambda p, g: "judge" not in p.kinds and list(g.nodes[0].evidence) == ["triples"]),
    ({"evidence": "S"}, lambda p, g: "judge" not in p.kinds and list(g.nodes[0].evidence) == ["sentences"] and "openie" not in p.kinds),
    ({"variant": "passages_only"}, lambda p, g: list(g.nodes[0].evidence) == ["passages"] and "openie" not in p.kinds),
    ({"history": "evidence"}, lambda p, g: "Step 1: query" not in p.node_prompts[1] and "[t" in p.node_prompts[1].split("History:")[1].split("Evidence:")[0]),
    ({"variant": "no_relation"}, lambda p, g: "relation to next query" not in p.node_prompts[1] and g.nodes[0].relation == ""),
    ({}, lambda p, g: "relation to next query: then the next hop" in p.node_prompts[1]),
])
def test_variants_change_the_prompt(demo, vectors, params, check):
    p = Policy([cont("A", "query two"), stop("Cork")])
    (r,) = make(demo, vectors, p, **params).answer(demo.questions[:1])
    p.node_prompts = [m[-1]["content"] for m in p.seen if m[-1]["content"].startswith("Initial Query")]
    assert check(p, EvidenceGraph.from_dict(r.trace))


def test_each_ablation_removes_only_what_it_names(demo, vectors):
    "no_history keeps the relation-free evidence list; no_relation keeps the structured history; both keep the same evidence."
    prompts = {}
    for params in ({}, {"history": "evidence"}, {"relation": "none"}):
        p = Policy([cont("A", "query two"), stop("Cork")])
        make(demo, vectors, p, **params).answer(demo.questions[:1])
        prompts[json.dumps(params)] = [m[-1]["content"] for m in p.seen if m[-1]["content"].startswith("Initial Query")][1]
    ev = lambda t: t.split("Evidence:\n")[1]
    assert ev(prompts["{}"]) == ev(prompts['{"history": "evidence"}']) == ev(prompts['{"relation": "none"}'])
    assert "Step 1: query" in prompts['{"relation": "none"}'] and "intermediate answer: A" in prompts['{"relation": "none"}']


@pytest.fixture()
def bank(demo, tmp_path):
    "A finished run's traces: relations generated for other questions (and one for the first question itself)."
    d = tmp_path / "full-run"; d.mkdir()
    rows = [dict(id=demo.questions[0].qid, trace=dict(nodes=[dict(relation="own relation of question one")])),
            dict(id="other-1", trace=dict(nodes=[dict(relation="relation of another question")])),
            dict(id="other-2", trace=dict(nodes=[dict(relation="a third relation"), dict(relation="")]))]
    (d / "predictions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d


def test_shuffled_relation_shows_another_questions_relation(demo, vectors, bank):
    p = Policy([cont("A", "qa two", "relation of question one"), stop("x")])
    make(demo, vectors, p, variant="shuffled_relation", relation_bank=str(bank)).answer(demo.questions[:1])
    step2 = [m[-1]["content"] for m in p.seen if m[-1]["content"].startswith("Initial Query")][1]
    shown = step2.split("relation to next query: ")[1].split("\n")[0]
    assert shown in ("relation of another question", "a third relation")   # never the question's own, never empty


def test_shuffled_relation_does_not_depend_on_batch_size_or_resume(demo, vectors, bank, tmp_path):
    def node(msg):   # step 1 continues, step 2 stops
        if "Current query: " not in msg: return stop("x")     # a re-ask: "x" is not an option of a comparison question
        q = msg.split("Current query: ")[1].split("\n")[0]
        return stop("x") if q.startswith("next: ") else cont("A", "next: " + q)
    def step2_prompts(batch_size, first=None):
        p = Policy(_Endless(node))
        res = resources(demo, vectors, p); p.model_id = "scripted-shuffle"      # one triple file for the three runs
        m = build_method("megrag", dict(variant="shuffled_relation", relation_bank=str(bank), seed=3), res)
        out = tmp_path / f"batch{batch_size}-first{first}"
        if first: run(m, demo, out, limit=first, batch_size=batch_size, show_progress=False)
        run(m, demo, out, limit=4, batch_size=batch_size, show_progress=False)
        return sorted(c for c in (msgs[-1]["content"] for msgs in p.seen) if c.startswith("Initial Query") and "Step 1:" in c)
    one = step2_prompts(1)
    assert len(one) == 4 and all("relation to next query: " in c for c in one)
    assert step2_prompts(2, first=1) == one and step2_prompts(4) == one     # the same shuffled relations whatever the batching


def test_fixed_depth_runs_b_steps_without_re_querying_the_question(demo, vectors):
    "Before step B the node schema has no stop branch; the policy's own next queries are searched (never x again)."
    p = Policy([cont("James Charles Mathew", "Who is James Charles Mathew?"), cont("Cork", "Where is Cork?"), stop("Cork")], resolver="Cork")
    m = make(demo, vectors, p, variant="fixed_depth", budget=3)
    (r,) = m.answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    assert r.fields["steps"] == 3 and r.prediction == "Cork" and not g.budget_exhausted
    assert [n.query for n in g.nodes] == [demo.questions[0].question, "Who is James Charles Mathew?", "Where is Cork?"]
    assert [m.may_stop(s) for s in (1, 2, 3)] == [False, False, True]
    assert all(node_errors(asdict(n)) == [] for n in g.nodes) and not any(n.coerced for n in g.nodes)


def test_fixed_depth_a_stop_before_b_is_re_asked_then_continued(demo, vectors):
    "A server that ignores the schema and stops at step 1: re-asked with the rule, then continued on what is missing."
    p = Policy([stop("Cork"), stop("Cork"), stop("Cork")], resolver="Cork")
    (r,) = make(demo, vectors, p, variant="fixed_depth", budget=2).answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    v1 = g.nodes[0]
    assert r.fields["steps"] == 2 and v1.repaired and v1.coerced and not v1.stop
    assert v1.next_query == "what follows from Cork" and g.nodes[1].query == "what follows from Cork"
    assert any("stop must be false before step 2" in m[-1]["content"] for m in p.seen)


def test_fixed_depth_holds_for_the_single_policy(demo, vectors):
    "policy=single under fixed depth: no stop branch before B; a stop there anyway is re-asked, then continued on what is missing."
    single = lambda ans: json.dumps(dict(level="T+S+P", selected=["p0"], **json.loads(stop(ans))))
    p = Policy([single("Cork"), single("Cork"), single("Cork")], resolver="Cork")
    m = build_method("megrag", dict(policy="single", variant="fixed_depth", budget=2), resources(demo, vectors, p))
    first = m.policy_schema(demo.questions[0], 1)
    assert [b["properties"]["stop"] for b in first["oneOf"]] == [{"const": False}]
    assert len(m.policy_schema(demo.questions[0], 2)["oneOf"]) == 2 and len(m.policy_schema(demo.questions[0])["oneOf"]) == 2
    (r,) = m.answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    v1 = g.nodes[0]
    assert r.fields["steps"] == 2 and v1.coerced and not v1.stop and g.nodes[1].stop
    assert v1.next_query == "what follows from Cork" and g.nodes[1].query == "what follows from Cork"
    assert len(p.seen) == 3 + p.kinds.count("resolver") + p.kinds.count("openie")     # step 1, its re-ask, step 2


def test_retrieved_is_the_dense_candidates_in_step_order(demo, vectors):
    "ranking=steps: Recall@K ranks what MEGRAG retrieved (step 1's N_P, then step 2's new ones), not the selected evidence first."
    p = Policy([cont("James Charles Mathew", "Who is James Charles Mathew?"), stop("Cork")], sufficient=True)
    (r,) = make(demo, vectors, p, n_p=4, ranking="steps").answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    expect = list(dict.fromkeys(g.nodes[0].retrieved + g.nodes[1].retrieved))
    assert len(g.nodes[0].retrieved) == 4 and r.retrieved == expect
    assert r.fields["selected_pids"] and set(r.fields["selected_pids"]) <= set(expect)


def test_candidates_follow_rank_then_stored_order(demo, vectors):
    store = EvidenceStore(demo, HashEmbedder(), root=vectors, show_progress=False)
    hits = store.search([demo.questions[0].question], 10)[0]
    c = collect_candidates(store, hits, n_s=5, n_t=0, views=("sentences",))
    first = hits[0][0]
    assert [u for u, _ in c.sentences][:len(store.sentences(first))] == [u for u, _ in store.sentences(first)][:5]
    assert len(c.sentences) == 5 and c.triples == [] and [u for u, _ in c.passages] == [f"p{p}" for p, _ in hits]


@pytest.mark.slow
def test_real_offline_model_on_three_questions(demo, minilm, smollm, demo_store):
    """The 135M policy end to end: every node of every trace satisfies the validity rules. The triple view is filled
    as `megrag-kit run` fills it by default (spaCy's parser when installed, as in a dev install): the real model's
    OpenIE is tested on its own (test_index.py: test_lazy_triples_with_the_real_model_are_grounded)."""
    from megrag_kit.cli import _openie_backend
    res = Resources(demo, llm=smollm, embedder=minilm, store_root=demo_store, openie_backend=_openie_backend("auto"))
    answers = build_method("megrag", dict(budget=2, n_p=3), res).answer(demo.questions[:3])
    for r in answers:
        g = EvidenceGraph.from_dict(r.trace)
        assert 1 <= len(g.nodes) <= 2 and all(node_errors(asdict(n)) == [] for n in g.nodes)
        assert g.budget_exhausted == (not g.nodes[-1].stop) and r.prediction.strip()
        assert all(n.composition in ("T", "T+S", "T+S+P") and n.evidence for n in g.nodes)
        assert r.cost.llm_calls >= 2 * len(g.nodes) and r.cost.prompt_tokens > 500 * len(g.nodes)


def test_node_schema_branches_are_the_validity_rules():
    import jsonschema
    from megrag_kit.megrag import node_schema
    ok = lambda o, **kw: jsonschema.Draft202012Validator(node_schema(**kw)).is_valid(o)
    s, c = json.loads(stop("Cork")), json.loads(cont("Xawery Żuławski", "Who is his mother?"))
    assert ok(s) and ok(c) and node_errors(s) == [] and node_errors(c) == []
    assert not ok({**s, "next_query": "more?"})            # a stop has an empty next query
    assert not ok({**c, "answer": "Cork"})                  # a continue has an empty answer
    assert not ok({**c, "missing": ", , ,"})                # punctuation filler is not text
    assert not ok({**c, "relation": ""})                    # a continue names its relation ...
    assert ok({k: v for k, v in c.items() if k != "relation"}, with_relation=False)   # ... unless the variant drops it
    yes_no = dict(options=["yes", "no"])
    assert ok({**s, "answer": "no"}, **yes_no) and not ok(s, **yes_no)   # a yes/no question stops with yes or no


def test_policy_over_an_openai_compatible_server(demo, vectors, stub_server):
    "The HTTP backend: the node schema travels as response_format, calls of a step go out concurrently."
    from megrag_kit.models import OpenAIChatModel
    from megrag_kit.megrag import node_schema
    route = Policy([stop("Cork")] * 3, sufficient=True).route
    stub_server.respond = lambda body: route(body["messages"][-1]["content"])
    llm = OpenAIChatModel(stub_server.url, f"policy-{uuid.uuid4().hex}", cache=False, concurrency=3)
    qs = [demo.questions[i] for i in (0, 2, 4)]          # open questions: "Cork" is a valid stop answer for each
    rows = build_method("megrag", dict(budget=2), Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=vectors)).answer(qs)
    assert [r.prediction for r in rows] == ["Cork"] * 3 and all(r.trace["edges"] == [[1, "STOP"]] for r in rows)
    sent = [b["response_format"]["json_schema"]["schema"] for _, b in stub_server.requests if "response_format" in b]
    assert node_schema() in sent and {"type": "object", "properties": {"sufficient": {"type": "boolean"}}, "required": ["sufficient"]} in sent


# -- issue 24: raw evidence lines as answers, policy-health counters, the gold policy

def test_a_raw_triple_line_answer_is_re_answered_by_the_reader_and_counted(demo, vectors):
    "A stop whose answer is a triple line with its ` | ` separators is not a parsed answer: the reader re-answers x over Z."
    p = Policy([stop("Fred Raymond | intended | his son")])
    base = p.route
    p.script = lambda msg: "Cork" if msg.startswith("Context:") and "Step 1 evidence" in msg else base(msg)
    (r,) = make(demo, vectors, p).answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    assert r.prediction == "Cork" and g.answer_repair["raw"] == "Fred Raymond | intended | his son" and g.answer_repair["answer"] == "Cork"
    assert r.fields["raw_answer"] and r.fields["raw_answer_repaired"] and r.cost.llm_calls == 4   # 2 judges + node + reader
    s = megrag_summary([{**r.fields, "gold_pids": [7, 8]}])
    assert s["raw_answer"] == 100.0 and s["raw_answer_repaired"] == 1


def test_a_unit_id_answer_is_counted_when_repair_is_off(demo, vectors):
    p = Policy([stop("t7.2")])
    (r,) = make(demo, vectors, p, raw_answer="count").answer(demo.questions[:1])
    assert r.prediction == "t7.2" and r.fields["raw_answer"] and not r.fields["raw_answer_repaired"]
    assert megrag_summary([{**r.fields, "gold_pids": [7]}])["raw_answer"] == 100.0


def test_raw_evidence_lines_are_recognised():
    from megrag_kit.megrag import raw_evidence_line
    assert all(map(raw_evidence_line, ["Theobald | is | c", "t12.3", "[s4.0] He was buried in Cork.", " p7 ", "Rabbi Menachem |"]))
    assert not any(map(raw_evidence_line, ["Cork", "t1000 Bridge", "Sir James Charles Mathew", "s1 in the", "yes", ""]))


def test_rules_that_replace_decisions_are_counted_per_node_and_in_the_summary(demo, vectors):
    "An unusable sufficiency verdict (both levels) and a coerced node each show up in `rules` and `rule_nodes`."
    p = Policy(["not json", "still not json"])
    base = p.route
    p.script = lambda msg: "I think it might be." if "Is the evidence sufficient" in msg or msg.startswith("That reply is not usable") else base(msg)
    (r,) = make(demo, vectors, p, budget=1).answer(demo.questions[:1])
    assert r.fields["rules"] == {"sufficiency_unparsed": 2, "coerced": 1} and r.fields["rule_steps"] == 1
    s = megrag_summary([{**r.fields, "gold_pids": [7]}, {**r.fields, "rules": {}, "rule_steps": 0, "gold_pids": [7]}])
    assert s["rules"] == {"coerced": 1, "sufficiency_unparsed": 2} and s["rule_nodes"] == 50.0 and s["budget_exhausted"] == 100.0
    from megrag_kit.megrag import MEGRAG
    assert {"rule_nodes", "rules", "raw_answer", "budget_exhausted"} <= set(MEGRAG.report_columns.values())


def _gold_question(demo):
    "The first demo question with a hand-made two-hop gold decomposition over its own context (hop 1 in p7, hop 2 in p8)."
    from dataclasses import replace
    q = demo.questions[0]
    dec = [dict(id=1, question="Who is the father of Charles Mathew?", answer="James Charles Mathew", support_pid=7),
           dict(id=2, question="Where was #1 buried?", answer="Cork", support_pid=8)]
    return replace(q, decomposition=dec)


class Reads(ScriptedLLM):
    "A reader that answers by the question line of its prompt; anything else (a policy call) fails the test."
    def __init__(self, answers):
        self.answers, self.questions = answers, []
        super().__init__(self.route)
    def route(self, msg):
        assert msg.startswith("Context:") or msg.startswith("Passage:"), f"not a reader call: {msg[:80]}"
        if msg.startswith("Passage:"): title = msg.split("\n")[1]; return json.dumps({"triples": [[title, "has title", title]]})
        q = msg.rsplit("Question: ", 1)[1]; self.questions.append(q)
        return self.answers[q]


def test_gold_policy_asks_the_sub_questions_filled_by_the_readers_answers(demo, vectors):
    q = _gold_question(demo)
    llm = Reads({"Who is the father of Charles Mathew?": "J. C. Mathew", "Where was J. C. Mathew buried?": "Cork"})
    (r,) = make(demo, vectors, llm, policy="gold").answer([q])
    g = EvidenceGraph.from_dict(r.trace)
    assert [n.query for n in g.nodes] == ["Who is the father of Charles Mathew?", "Where was J. C. Mathew buried?"]   # the reader's b_1
    assert llm.questions == [n.query for n in g.nodes] and r.cost.llm_calls == 2        # one reader call per hop, no policy call
    assert [n.intermediate_answer for n in g.nodes] == ["J. C. Mathew", "Cork"] and g.edges[-1] == [2, "STOP"]
    assert r.prediction == "Cork" and not g.budget_exhausted
    for n, pid in zip(g.nodes, (7, 8)):   # Z_i: units of the hop's supporting passage, at the finest level holding the sub-answer
        if pid in n.retrieved: assert {int(u[1:].split(".")[0]) for u in n.unit_ids()} == {pid}
        else: assert n.rules == ["gold_pid_missing"] and n.composition == "T+S+P"


def test_gold_policy_never_reads_the_gold_answer_or_passages(demo, vectors):
    from dataclasses import replace
    q = _gold_question(demo)
    script = {"Who is the father of Charles Mathew?": "J. C. Mathew", "Where was J. C. Mathew buried?": "Cork"}
    (a,) = make(demo, vectors, Reads(script), policy="gold").answer([q])
    (b,) = make(demo, vectors, Reads(script), policy="gold").answer([replace(q, answers=[], gold_pids=[])])
    strip = lambda t: [{k: v for k, v in n.items() if k not in ("latency_s", "cache_hits")} for n in t["nodes"]]
    assert strip(a.trace) == strip(b.trace) and a.retrieved == b.retrieved and a.prediction == b.prediction


def test_gold_evidence_picks_the_finest_level_holding_the_sub_answer():
    from megrag_kit.gold import GoldHop
    from megrag_kit.megrag import Candidates, gold_evidence
    c = Candidates([("p1", "A\nA was born in Cork."), ("p2", "B\nB lives in Paris.")],
                   [("s1.0", "A was born in Cork."), ("s2.0", "B lives in Paris.")],
                   [("t1.0", "A | born | 1900"), ("t2.0", "B | lives in | Paris")])
    assert gold_evidence(c, ("T", "T+S", "T+S+P"), GoldHop(1, "Where was A born?", "Cork", 1)) == \
        ("T+S", {"triples": [("t1.0", "A | born | 1900")], "sentences": [("s1.0", "A was born in Cork.")]}, "")
    assert gold_evidence(c, ("T", "T+S", "T+S+P"), GoldHop(1, "Where does B live?", "Paris", 2))[:2] == ("T", {"triples": [("t2.0", "B | lives in | Paris")]})
    lv, z, rule = gold_evidence(c, ("T", "T+S", "T+S+P"), GoldHop(1, "q", "Rome", 9))
    assert (lv, rule) == ("T+S+P", "gold_pid_missing") and len(z["passages"]) == 2
    assert gold_evidence(c, ("T", "T+S", "T+S+P"), GoldHop(1, "q", "Rome", 1))[2] == "gold_answer_unseen"


def test_gold_policy_needs_a_decomposition(demo, vectors):
    with pytest.raises(ValueError, match=re.escape(demo.questions[0].qid)):
        make(demo, vectors, Reads({}), policy="gold").answer(demo.questions[:1])


@pytest.fixture(scope="module")
def musique():
    from conftest import needs_shared
    if needs_shared.args[0]: pytest.skip(needs_shared.kwargs["reason"])
    return load_dataset("musique")


MUSIQUE_HOPS = {"2hop__82713_84616": 2, "2hop__269766_43945": 2, "2hop__519160_78303": 2}   # the first three MuSiQue dev questions


def test_gold_policy_on_three_real_musique_questions(musique, tmp_path):
    "Real MuSiQue decompositions, the scripted reader: the step queries are the gold sub-questions, #1 filled by the reader's b_1."
    from megrag_kit.gold import gold_hops
    qs = musique.questions[:3]
    assert [q.qid for q in qs] == list(MUSIQUE_HOPS)
    answers = {}
    for q in qs:
        h = gold_hops(q); answers[h[0].template] = f"READER-{q.qid[-5:]}"
        answers[h[1].template.replace("#1", f"READER-{q.qid[-5:]}")] = "final"
    llm = Reads(answers); llm.model_id = f"scripted-{uuid.uuid4().hex}"
    m = build_method("megrag", {"policy": "gold", "evidence": "P"}, Resources(musique, llm=llm, embedder=HashEmbedder(), store_root=tmp_path))
    out = m.answer(qs)
    for q, r in zip(qs, out):
        g, h = EvidenceGraph.from_dict(r.trace), gold_hops(q)
        assert [n.query for n in g.nodes] == [h[0].template, h[1].template.replace("#1", f"READER-{q.qid[-5:]}")]
        assert "#1" in h[1].template and r.prediction == "final" and r.cost.llm_calls == 2
    queries = [[n.query for n in EvidenceGraph.from_dict(r.trace).nodes] for r in out]
    assert queries[0] == ["who was the actress in my fair lady", "what did READER-84616 won a tony for"]
    assert queries[1] == ["What is the author of The Age of Reason?",
                          "common sense which was written by READER-43945 was an important work because it"]
    assert queries[2] == ["What is the producer of Forced Vengeance?", "what was READER-78303 name in walker texas ranger"]


def test_the_ranked_list_pools_the_steps_by_best_cosine():
    "A later hop's passage found with a higher cosine ranks above the first step's weaker hits (Recall@10 sees both hops)."
    from megrag_kit.megrag import Node, ranked_retrieval
    g = EvidenceGraph("x", nodes=[Node(1, "q1", retrieved=[1, 2, 3], scores=[0.9, 0.5, 0.4]),
                                  Node(2, "q2", retrieved=[7, 3, 8], scores=[0.8, 0.6, 0.4])])
    assert ranked_retrieval(g) == [1, 7, 3, 2, 8]          # 3 keeps its best cosine (0.6), above 2 (0.5)
    assert ranked_retrieval(g, "steps") == [1, 2, 3, 7, 8]
    g.nodes[1].scores = []                                # a trace written before the cosines were kept
    assert ranked_retrieval(g) == [1, 2, 3, 7, 8]
