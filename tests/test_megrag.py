"""MEGRAG with the real offline models (slow) and over an OpenAI-compatible server (the local stub). The control-flow
tests, with the shared stand-ins (`megrag_kit.testing`), are in the MEGRAG notebooks beside the code they test
(nbs/10_megrag.ipynb, 10a_megrag_graph, 10b_megrag_policy), run by nbdev_test."""
import json, uuid
from dataclasses import asdict
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.megrag import EvidenceGraph, node_errors
from megrag_kit.method import Resources, build_method
from megrag_kit.testing import HashEmbedder


def stop(ans): return json.dumps(dict(intermediate_answer=ans, resolved_path=f"-> {ans}", stop=True, answer=ans, missing="none", next_query="", relation=""))


def route(msg):
    "The scripted policy behind the stub server: one triple `(title, has title, title)` per passage, every level sufficient, a stop at Cork."
    if msg.startswith("Passage:"):
        title = msg.split("\n")[1]
        return json.dumps({"triples": [[title, "has title", title]]})
    if "Is the evidence sufficient" in msg: return json.dumps({"sufficient": True})
    return stop("Cork")


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    return tmp_path_factory.mktemp("store")     # one store folder per module: the hashed passage vectors are built once


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


def test_policy_over_an_openai_compatible_server(demo, vectors, stub_server):
    "The HTTP backend: the node schema travels as response_format, calls of a step go out concurrently."
    from megrag_kit.models import OpenAIChatModel
    from megrag_kit.megrag import node_schema
    stub_server.respond = lambda body: route(body["messages"][-1]["content"])
    llm = OpenAIChatModel(stub_server.url, f"policy-{uuid.uuid4().hex}", cache=False, concurrency=3)
    qs = [demo.questions[i] for i in (0, 2, 4)]          # open questions: "Cork" is a valid stop answer for each
    rows = build_method("megrag", dict(budget=2), Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=vectors)).answer(qs)
    assert [r.prediction for r in rows] == ["Cork"] * 3 and all(r.trace["edges"] == [[1, "STOP"]] for r in rows)
    sent = [b["response_format"]["json_schema"]["schema"] for _, b in stub_server.requests if "response_format" in b]
    assert node_schema() in sent and {"type": "object", "properties": {"sufficient": {"type": "boolean"}}, "required": ["sufficient"]} in sent
