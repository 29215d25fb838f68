"""MEGRAG control flow with a scripted fake LLM (unit tests only), and one real run of the offline model."""
import json, uuid
from dataclasses import asdict
import pytest
from megrag_kit.baselines import Reader
from megrag_kit.data import load_dataset
from megrag_kit.index import EvidenceStore
from megrag_kit.megrag import MEGRAG, EvidenceGraph, node_errors, megrag_summary, collect_candidates
from conftest import ScriptedLLM


def stop(ans): return json.dumps(dict(intermediate_answer=ans, resolved_path=f"-> {ans}", stop=True, answer=ans, missing="none", next_query="", relation=""))
def cont(b, nq, rel="then the next hop"): return json.dumps(dict(intermediate_answer=b, resolved_path=f"-> {b}", stop=False, answer="", missing=f"about {b}", next_query=nq, relation=rel))


class Policy(ScriptedLLM):
    """Routes by prompt kind: OpenIE, sufficiency judge, node call, repair, final resolver."""
    def __init__(self, nodes, sufficient=False, resolver="Resolved"):
        self.nodes, self.sufficient, self.resolver, self.kinds = list(nodes), sufficient, resolver, []
        super().__init__(self.route)
    def route(self, msg):
        if msg.startswith("Passage:"):
            title = msg.split("\n")[1]; self.kinds.append("openie")
            return json.dumps({"triples": [[title, "has title", title]]})
        if "Is the evidence sufficient" in msg: self.kinds.append("judge"); return json.dumps({"sufficient": self.sufficient})
        if "Candidate answer from the last step" in msg: self.kinds.append("resolver"); return self.resolver
        self.kinds.append("repair" if msg.startswith("Your JSON broke") else "node")
        return self.nodes.pop(0)


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.fixture(scope="module")
def vectors(demo, minilm, tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    EvidenceStore(demo, minilm, root=root, show_progress=False).passage_index()
    return root


def make(demo, minilm, vectors, policy, **kw):
    policy.model_id = f"scripted-{uuid.uuid4().hex}"   # a fresh triple file per test (the scripted OpenIE)
    store = EvidenceStore(demo, minilm, policy, root=vectors, show_progress=False)
    return MEGRAG(Reader(policy), store, **kw)


def test_stop_at_step_one(demo, minilm, vectors):
    p = Policy([stop("Cork")])
    (r,) = make(demo, minilm, vectors, p).run(demo.questions[:1])
    g = EvidenceGraph.from_dict(r["trace"])
    assert r["prediction"] == "Cork"
    assert len(g.nodes) == 1 and g.edges == [[1, "STOP"]] and not g.budget_exhausted
    assert p.kinds.count("judge") == 2 and g.nodes[0].composition == "T+S+P"    # neither T nor T+S judged sufficient
    assert len(g.nodes[0].evidence["passages"]) == 10 and len(g.nodes[0].evidence["triples"]) == 10  # one scripted triple per passage
    assert r["llm_calls"] == 3 and r["steps"] == 1


def test_sufficient_triples_stop_the_cascade(demo, minilm, vectors):
    p = Policy([stop("Cork")], sufficient=True)
    (r,) = make(demo, minilm, vectors, p).run(demo.questions[:1])
    n = EvidenceGraph.from_dict(r["trace"]).nodes[0]
    assert n.composition == "T" and list(n.evidence) == ["triples"] and n.sufficiency == [["T", True]]
    assert p.kinds.count("judge") == 1


def test_continue_then_stop_builds_a_path(demo, minilm, vectors):
    p = Policy([cont("James Charles Mathew", "Where was James Charles Mathew buried?", "father -> burial place"), stop("Cork")])
    (r,) = make(demo, minilm, vectors, p).run(demo.questions[:1])
    g = EvidenceGraph.from_dict(r["trace"])
    assert [n.query for n in g.nodes] == [demo.questions[0].question, "Where was James Charles Mathew buried?"]
    assert g.edges == [[1, "father -> burial place", 2], [2, "STOP"]]
    node2_prompt = [m for m in p.seen if m[-1]["content"].startswith("Initial Query")][-1][-1]["content"]
    assert "Step 1: query: Where was the place of burial" in node2_prompt and "relation to next query: father -> burial place" in node2_prompt
    assert r["prediction"] == "Cork" and all(node_errors(asdict(n)) == [] for n in g.nodes)
    G = g.to_networkx()
    assert list(G.edges(data="relation")) == [("v1", "v2", "father -> burial place"), ("v2", "STOP", "STOP")]


def test_budget_exhaustion_calls_the_resolver_with_ordered_evidence(demo, minilm, vectors):
    p = Policy([cont("A", "query two"), cont("B", "query three")], resolver="Cork")
    (r,) = make(demo, minilm, vectors, p, budget=2).run(demo.questions[:1])
    g = EvidenceGraph.from_dict(r["trace"])
    assert g.budget_exhausted and len(g.nodes) == 2 and g.edges == [[1, "then the next hop", 2]]
    assert r["prediction"] == "Cork" and g.resolver["clue"] == "B"
    ctx = [m for m in p.seen if "Candidate answer from the last step" in m[-1]["content"]][0][-1]["content"]
    assert ctx.index("Step 1 evidence") < ctx.index("Step 2 evidence") < ctx.index("Candidate answer from the last step: B")


def test_invalid_output_is_repaired_then_coerced(demo, minilm, vectors):
    bad = json.dumps(dict(intermediate_answer="Cork", resolved_path="", stop=True, answer="", missing="", next_query="", relation=""))
    p = Policy([bad, stop("Cork")])
    (r,) = make(demo, minilm, vectors, p).run(demo.questions[:1])
    n = EvidenceGraph.from_dict(r["trace"]).nodes[0]
    assert n.repaired and not n.coerced and not n.parsed_ok and r["prediction"] == "Cork" and "repair" in p.kinds
    p2 = Policy(["not json", "still not json"])
    (r2,) = make(demo, minilm, vectors, p2, budget=1).run(demo.questions[:1])
    n2 = EvidenceGraph.from_dict(r2["trace"]).nodes[0]
    assert n2.coerced and node_errors(asdict(n2)) == [] and not n2.stop and n2.next_query == demo.questions[0].question
    assert r2["budget_exhausted"] and megrag_summary([{**r2, "gold_pids": [1]}])["coerced"] == 1


@pytest.mark.parametrize("variant,check", [
    ("triples_only", lambda p, g: "judge" not in p.kinds and list(g.nodes[0].evidence) == ["triples"]),
    ("sentences_only", lambda p, g: "judge" not in p.kinds and list(g.nodes[0].evidence) == ["sentences"] and "openie" not in p.kinds),
    ("passages_only", lambda p, g: list(g.nodes[0].evidence) == ["passages"] and "openie" not in p.kinds),
    ("no_history", lambda p, g: "Step 1: query" not in p.node_prompts[1] and "[t" in p.node_prompts[1].split("History:")[1].split("Evidence:")[0]),
    ("no_relation", lambda p, g: "relation to next query" not in p.node_prompts[1] and g.nodes[0].relation == ""),
    ("full", lambda p, g: "relation to next query: then the next hop" in p.node_prompts[1]),
])
def test_variants_change_the_prompt(demo, minilm, vectors, variant, check):
    p = Policy([cont("A", "query two"), stop("Cork")])
    (r,) = make(demo, minilm, vectors, p, variant=variant).run(demo.questions[:1])
    p.node_prompts = [m[-1]["content"] for m in p.seen if m[-1]["content"].startswith("Initial Query")]
    assert check(p, EvidenceGraph.from_dict(r["trace"]))


def test_shuffled_relation_shows_another_questions_relation(demo, minilm, vectors):
    p = Policy([cont("A", "qa two", "relation of question one"), cont("B", "qb two", "relation of question two"), stop("x"), stop("y")])
    make(demo, minilm, vectors, p, variant="shuffled_relation").run(demo.questions[:2])
    step2 = [m[-1]["content"] for m in p.seen if m[-1]["content"].startswith("Initial Query")][2:]
    assert "relation to next query: relation of question two" in step2[0] and "relation to next query: relation of question one" in step2[1]


def test_fixed_depth_never_stops_early(demo, minilm, vectors):
    p = Policy([stop("Cork"), stop("Cork"), stop("Cork")], resolver="Cork")
    (r,) = make(demo, minilm, vectors, p, variant="fixed_depth", budget=3).run(demo.questions[:1])
    g = EvidenceGraph.from_dict(r["trace"])
    assert r["steps"] == 3 and r["prediction"] == "Cork"          # the stops of steps 1-2 were overridden
    assert g.edges == [[1, "fixed depth: search again for the Initial Query", 2], [2, "fixed depth: search again for the Initial Query", 3], [3, "STOP"]]
    assert [n.stop for n in g.nodes] == [False, False, True] and g.nodes[1].query == demo.questions[0].question


def test_candidates_follow_rank_then_stored_order(demo, minilm, vectors):
    store = EvidenceStore(demo, minilm, root=vectors, show_progress=False)
    hits = store.search([demo.questions[0].question], 10)[0]
    c = collect_candidates(store, hits, n_s=5, n_t=0, views=("sentences",))
    first = hits[0][0]
    assert [u for u, _ in c.sentences][:len(store.sentences(first))] == [u for u, _ in store.sentences(first)][:5]
    assert len(c.sentences) == 5 and c.triples == [] and [u for u, _ in c.passages] == [f"p{p}" for p, _ in hits]


def test_real_offline_model_on_three_questions(demo, minilm, smollm, tmp_path):
    "The 135M policy end to end: every node of every trace satisfies the validity rules."
    store = EvidenceStore(demo, minilm, smollm, root=tmp_path, show_progress=False)
    rows = MEGRAG(Reader(smollm), store, budget=2, n_p=3).run(demo.questions[:3])
    for r in rows:
        g = EvidenceGraph.from_dict(r["trace"])
        assert 1 <= len(g.nodes) <= 2 and all(node_errors(asdict(n)) == [] for n in g.nodes)
        assert g.budget_exhausted == (not g.nodes[-1].stop) and isinstance(r["prediction"], str)
        assert all(n.composition in ("T", "T+S", "T+S+P") and n.evidence for n in g.nodes)
        assert r["llm_calls"] >= 2 * len(g.nodes) and r["prompt_tokens"] > 0


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


def test_policy_over_an_openai_compatible_server(demo, minilm, vectors, stub_server):
    "The HTTP backend: the node schema travels as response_format, calls of a step go out concurrently."
    from megrag_kit.models import OpenAIChatModel
    from megrag_kit.megrag import node_schema
    route = Policy([stop("Cork")] * 3, sufficient=True).route
    stub_server.respond = lambda body: route(body["messages"][-1]["content"])
    llm = OpenAIChatModel(stub_server.url, f"policy-{uuid.uuid4().hex}", cache=False, concurrency=3)
    store = EvidenceStore(demo, minilm, llm, root=vectors, show_progress=False)
    rows = MEGRAG(Reader(llm), store, budget=2).run(demo.questions[:3])
    assert [r["prediction"] for r in rows] == ["Cork"] * 3 and all(r["trace"]["edges"] == [[1, "STOP"]] for r in rows)
    sent = [b["response_format"]["json_schema"]["schema"] for _, b in stub_server.requests if "response_format" in b]
    assert node_schema() in sent and {"type": "object", "properties": {"sufficient": {"type": "boolean"}}, "required": ["sufficient"]} in sent
