"""End to end against a misbehaving served model: a whole run through a local stub server
(`megrag_kit.testing.StubServer`) that fails now and then gives the predictions of a clean one. The behaviour of the
served client itself, failure by failure, is checked beside its code (nbs/02d_models_http.ipynb), and a run's against
a failing server beside the runner's (nbs/90_runner.ipynb)."""
import json
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.method import Resources, build_method
from megrag_kit.models import OpenAIChatModel
from megrag_kit.reader import Reader
from megrag_kit.runner import format_summary, read_predictions, run
from megrag_kit.testing import no_sleep as _no_sleep
from megrag_kit.testing import HashEmbedder


def served(stub, name="m", **kw):
    kw.setdefault("cache", False)
    kw.setdefault("max_retries", 2)
    return OpenAIChatModel(stub.url, name, **kw)


@pytest.fixture()
def no_sleep():
    "Record the back-off waits instead of sleeping them (`megrag_kit.testing.no_sleep`)."
    with _no_sleep() as waits: yield waits


# -- end to end: MEGRAG and native_rag give the same predictions against a clean and a faulty server

def _route(body) -> str:
    "A deterministic stand-in for a served policy/reader: answers every prompt kind of MEGRAG and the reader."
    msg = body["messages"][-1]["content"]
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    if msg.startswith("Passage:"):
        title = msg.split("\n")[1]
        return json.dumps({"triples": [[title, "has title", title]]})
    if "Is the evidence sufficient" in msg: return json.dumps({"sufficient": len(msg) % 2 == 0})
    if "enum" in schema: return json.dumps(schema["enum"][0])
    if "oneOf" in schema:
        opts = schema["oneOf"][0]["properties"]["answer"].get("enum")
        ev = next((l.split("] ", 1)[1].split(" |")[0] for l in msg.splitlines() if l.startswith("[")), "unknown")
        return json.dumps(dict(intermediate_answer=ev[:80], resolved_path=f"-> {ev}"[:200], stop=True, answer=(opts[0] if opts else ev[:80]),
                               missing="none", next_query="", relation=""))
    if "Context:" in msg: return msg.split("Question:")[0].strip().split("\n\n")[-1].split("\n")[0]   # the title of the best passage
    return "no idea"


@pytest.mark.parametrize("method, params", [("native_rag", {}), ("megrag", {"budget": 2})])
def test_same_predictions_from_a_clean_and_a_faulty_server(stub_server, tmp_path, no_sleep, method, params):
    demo = load_dataset("demo")
    out = {}
    for kind in ("clean", "faulty"):
        stub_server.respond, stub_server.requests = _route, []
        if kind == "faulty": stub_server.reasoning, stub_server.usage, stub_server.fail_every = "inline", False, 3
        llm = served(stub_server, f"policy-{kind}", max_retries=3, concurrency=2)
        res = Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=tmp_path / f"store-{kind}")
        s = run(build_method(method, params, res), demo, tmp_path / kind, limit=6, batch_size=3, show_progress=False)
        out[kind] = (s, [r["prediction"] for r in read_predictions(tmp_path / kind / "predictions.jsonl")])
    (clean, p_clean), (faulty, p_faulty) = out["clean"], out["faulty"]
    assert p_clean == p_faulty and len(p_clean) == 6 and any(p_clean)
    assert clean["failed"] == faulty["failed"] == 0 and faulty["em"] == clean["em"] and faulty["f1"] == clean["f1"]
    assert clean["prompt_tokens"] > 0 and faulty["prompt_tokens"] is None and faulty["tokens"] is None
    assert "n/a" in format_summary(faulty) and "n/a" not in format_summary(clean).split("\n\n")[0]
    assert no_sleep                                              # the faulty server was retried


def test_native_rag_with_the_real_model_behind_a_faulty_server(stub_server, smollm, minilm, demo_store, tmp_path,
                                                               no_sleep):
    "SmolLM2-135M served by the stub: reasoning blocks, no usage, every third call failing; the same predictions as clean."
    def respond(body):
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        return smollm(body["messages"], max_new_tokens=body["max_tokens"], json_schema=schema).text
    demo = load_dataset("demo")
    preds = {}
    for kind in ("clean", "faulty"):
        stub_server.respond = respond
        if kind == "faulty": stub_server.reasoning, stub_server.usage, stub_server.fail_every = "inline", False, 3
        res = Resources(demo, llm=served(stub_server, f"smollm-{kind}", max_retries=3), embedder=minilm,
                        store_root=demo_store)
        run(build_method("native_rag", {}, res), demo, tmp_path / kind, limit=4, batch_size=2, show_progress=False)
        preds[kind] = [r["prediction"] for r in read_predictions(tmp_path / kind / "predictions.jsonl")]
    direct = Reader(smollm).answer([q.question for q in demo.questions[:4]],
                                   [[demo.corpus[p].content for p, _ in h] for h in res.store.search([q.question for q in demo.questions[:4]], 10)])
    assert preds["clean"] == preds["faulty"] == [r.answer for r in direct] and all(preds["clean"])
