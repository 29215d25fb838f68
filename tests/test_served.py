"""A served model that misbehaves: each way a real OpenAI-compatible server fails, against a local stub server
(see `_Stub` in conftest.py), with the behaviour the kit promises for it."""
import re
import json, multiprocessing, os, time, warnings
from pathlib import Path
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.method import Answer, Method, Resources, build_method, register, METHODS
from megrag_kit.models import (ChatModel, Cost, Generation, LLMCache, ModelCallError, OpenAIChatModel, check_llm_options,
                               load_llm, structured)
from megrag_kit.reader import Reader
from megrag_kit.runner import format_summary, read_predictions, run
from fakes import HashEmbedder


def served(stub, name="m", **kw):
    kw.setdefault("cache", False)
    kw.setdefault("max_retries", 2)
    return OpenAIChatModel(stub.url, name, **kw)


@pytest.fixture()
def no_sleep(monkeypatch):
    "Record the back-off waits instead of sleeping them."
    waits = []
    monkeypatch.setattr(time, "sleep", lambda s: waits.append(round(s, 2)))
    return waits


# -- what a reasoning model returns

@pytest.mark.parametrize("where", ["inline", "field"])
def test_reasoning_never_reaches_the_answer_or_the_parser(stub_server, where):
    stub_server.reasoning = where
    stub_server.respond = lambda body: json.dumps({"sufficient": True}) if body.get("response_format") else "Steven Spielberg\nbecause he directed it"
    llm = served(stub_server)
    g = llm("Who directed Jaws?", stop=["\n"])
    assert g.text == "Steven Spielberg" and g.reasoning == 'Let me think. Maybe {"sufficient": false}? No.'
    assert "stop" not in stub_server.requests[-1][1]       # stop strings are applied here: a server would cut the thinking
    (v, gens), = structured(llm, ["Is it enough?"], {"type": "object", "properties": {"sufficient": {"type": "boolean"}}, "required": ["sufficient"]})
    assert v == {"sufficient": True} and not gens[0].unparsed   # the verdict of the answer, not the decoy in the thinking
    (a, gs), = Reader(llm, constrain_options=False).answer(["Who directed Jaws?"], [["Jaws (film)\nJaws is directed by Steven Spielberg."]])
    assert a == "Steven Spielberg" and gs[0].reasoning


def test_a_server_that_applies_stop_strings_to_the_thinking(stub_server):
    """What happens with server_stop=True and a reasoning model (the bug the default avoids): the reply is '<think>' and
    no answer, a failed call (never an empty answer)."""
    stub_server.reasoning, stub_server.respond = "inline", lambda body: "Paris"
    with pytest.raises(ModelCallError, match="reply with empty content"):
        served(stub_server, server_stop=True, max_retries=0)("Capital of France?", stop=["\n"])
    assert stub_server.requests[-1][1]["stop"] == ["\n"]
    assert served(stub_server)("Capital of France?", stop=["\n"]).text == "Paris"


def test_request_options_pass_through(stub_server):
    opts = check_llm_options(f"openai:{stub_server.url}#m", {"extra_body": '{"chat_template_kwargs": {"enable_thinking": false}, "top_k": 20}',
                                                             "think_tokens": "512", "timeout": "30", "server_stop": "true"})
    assert opts == {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}, "think_tokens": 512, "timeout": 30.0, "server_stop": True}
    llm = load_llm(f"openai:{stub_server.url}#m", cache=False, **{k: v for k, v in opts.items() if k != "server_stop"})
    llm("hi", max_new_tokens=24, stop=["\n"])
    body = stub_server.requests[-1][1]
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 20 and body["max_tokens"] == 24 + 512
    assert body["stream"] is False and "stop" not in body
    assert llm.model_id.startswith(f"openai:{stub_server.url}#m+") and llm.model_id != served(stub_server).model_id   # another output: another id
    for bad, msg in [({"temperature": "1"}, "unknown LLM option 'temperature'"), ({"timeout": "0"}, "timeout=0.0"),
                     ({"think_tokens": "-1"}, "think_tokens=-1"), ({"extra_body": "[1]"}, "expected dict"), ({"timeout": "soon"}, "expected float")]:
        with pytest.raises(ValueError, match=re.escape(msg)): check_llm_options(f"openai:{stub_server.url}#m", bad)
    with pytest.raises(ValueError, match="applies to openai models"): check_llm_options("smollm2-135m", {"extra_body": "{}"})


def test_unknown_usage_is_null_never_zero(stub_server, tmp_path):
    stub_server.usage = False
    g = served(stub_server)("hi")
    assert (g.prompt_tokens, g.completion_tokens) == (None, None)
    c = Cost.of([g, Generation("x", 3, 4)])
    assert c.prompt_tokens is None and c.tokens is None and c.llm_calls == 2
    assert c.row()["tokens"] is None


def test_an_event_stream_body_to_a_plain_request_is_read(stub_server):
    stub_server.faults = ["sse"]
    g = served(stub_server)("a fairly long question to be streamed back")
    assert g.text == "echo: a fairly long question to be streamed back" and len(stub_server.requests) == 1


# -- failures: retried, reported, never cached

def test_nothing_failed_empty_cut_or_refused_is_cached(stub_server, tmp_path, no_sleep):
    cache = LLMCache(tmp_path / "c")
    llm = served(stub_server, cache=cache, max_retries=1)
    stub_server.faults = ["null", "null"]                       # content null twice: the call fails, nothing cached
    with pytest.raises(ModelCallError, match="content null"): llm("q1")
    assert len(cache) == 0
    assert llm("q1").text == "echo: q1" and len(cache) == 1    # the healthy server's answer, not a cached ''
    stub_server.faults = ["refusal"]
    g = llm("q2"); assert (g.text, g.finish_reason) == ("", "refusal")
    stub_server.faults = ["length"]
    g = llm("q3"); assert g.finish_reason == "length"
    assert len(cache) == 1
    assert not llm("q2").cached and not llm("q3").cached and len(cache) == 3     # asked again, healthy: now cached


def test_retry_after_is_honoured(stub_server, no_sleep):
    stub_server.faults = ["http:429:3", "http:503:1.5", None]
    assert served(stub_server)("hi").text == "echo: hi"
    assert no_sleep == [3.0, 1.5] and len(stub_server.requests) == 3


@pytest.mark.parametrize("fault, message", [
    ("http:500", "gave up after 3 attempts: .*/v1/chat/completions: HTTP 500"),
    ("http:502", "HTTP 502"),
    ("close", "connection broke before the reply was complete"),
    ("garbage", "answered HTTP 200 with a body that is not JSON \\(text/html\\)"),
    ("null", "content null"),
])
def test_failures_that_may_pass_are_retried_then_named(stub_server, no_sleep, fault, message):
    stub_server.faults = [fault]
    assert served(stub_server)("hi").text == "echo: hi" and len(stub_server.requests) == 2     # passes on the retry
    stub_server.faults = [fault] * 3
    with pytest.raises(ModelCallError, match=message): served(stub_server)("hi")
    assert no_sleep and all(w <= 8 for w in no_sleep)


def test_connection_refused_names_the_url_and_what_to_do(no_sleep):
    with pytest.raises(ModelCallError, match=re.escape("cannot connect to http://127.0.0.1:9/v1/chat/completions ") + ".*is the server running"):
        OpenAIChatModel("http://127.0.0.1:9/v1", "m", cache=False, max_retries=1)("hi")


def test_a_timeout_names_the_url_and_the_limit(stub_server):
    stub_server.faults = ["slow:1.5", "slow:1.5"]
    with pytest.raises(ModelCallError, match=re.escape("did not answer within 0.3 s") + ".*raise the timeout"):
        served(stub_server, timeout=0.3, max_retries=1)("hi")


def test_a_wrong_model_name_fails_at_once(stub_server, no_sleep):
    stub_server.models = ["Qwen/Qwen3-8B"]
    with pytest.raises(ModelCallError, match=re.escape("does not serve model 'qwen3-8b'") + r".*GET http://127\.0\.0\.1:\d+/v1/models"):
        served(stub_server, "qwen3-8b")("hi")
    assert len(stub_server.requests) == 1 and no_sleep == []
    stub_server.fail_next = 0
    with pytest.raises(ModelCallError, match="not authorized"):
        stub_server.faults = ["http:401"]; served(stub_server, "Qwen/Qwen3-8B")("hi")


def test_one_failed_call_does_not_lose_the_others_of_its_batch(stub_server, tmp_path, no_sleep):
    cache = LLMCache(tmp_path / "c")
    llm = served(stub_server, cache=cache, max_retries=0, concurrency=3)
    fail = {"b": 1}
    def respond(body):
        u = body["messages"][-1]["content"]
        if fail.get(u): fail[u] -= 1; return None                 # HTTP 500, once, for "b"
        return f"echo: {u}"
    stub_server.respond = respond
    with pytest.raises(ModelCallError): llm.generate(["a", "b", "c"])
    assert len(cache) == 2                                        # a and c are kept
    n = len(stub_server.requests)
    assert [g.text for g in llm.generate(["a", "b", "c"])] == ["echo: a", "echo: b", "echo: c"]
    assert len(stub_server.requests) == n + 1                     # only b is asked again


def test_schemas_servers_do_not_enforce_are_checked_here(stub_server):
    "The stub ignores response_format, like a server without guided decoding: the reply is checked locally and re-asked."
    replies = iter(['{"year": "nineteen"}', '{"year": "1948"}'])
    stub_server.respond = lambda body: next(replies)
    schema = {"type": "object", "properties": {"year": {"type": "string", "pattern": "^[0-9]{4}$"}}, "required": ["year"]}
    (v, gens), = structured(served(stub_server), ["When was he born?"], schema)
    assert v == {"year": "1948"} and [(g.unparsed, g.reask) for g in gens] == [(True, False), (False, True)]
    assert "does not match" in stub_server.requests[-1][1]["messages"][-1]["content"]       # the re-ask says what was wrong
    stub_server.respond = lambda body: '"maybe"'
    (v, gens), = structured(served(stub_server), ["Same country?"], {"enum": ["yes", "no"]})
    assert v is None and Cost.of(gens).unparsed == 2


# -- the cache file

def test_a_corrupt_cache_is_set_aside(tmp_path):
    d = tmp_path / "llm"; d.mkdir()
    (d / "cache.db").write_bytes(b"this is not an sqlite database" * 100)
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        cache = LLMCache(d)
    assert len(cache) == 0 and list(tmp_path.glob("llm.corrupt-*"))
    cache.set("k", Generation("Paris")); assert cache.get("k")["text"] == "Paris"


class _Counter(ChatModel):
    model_id = "counter"
    def _generate(self, messages, **params): return [Generation(f"answer to {m[-1]['content']}") for m in messages]


def _fill(path, start):
    llm = _Counter(cache=LLMCache(path))
    for i in range(start, start + 60): llm(f"q{i % 80}")


def test_two_processes_share_one_cache(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ps = [ctx.Process(target=_fill, args=(tmp_path / "c", s)) for s in (0, 30)]
    for p in ps: p.start()
    for p in ps: p.join(60)
    assert [p.exitcode for p in ps] == [0, 0]
    cache, llm = LLMCache(tmp_path / "c"), _Counter(cache=LLMCache(tmp_path / "c"))
    assert len(cache) == 80                                       # q0..q79, the 40 overlapping ones once
    assert all(g.cached and g.text == f"answer to q{i}" for i, g in enumerate(llm.generate([f"q{i}" for i in range(80)])))


# -- a run against a failing server

def test_failed_questions_are_marked_counted_and_retried(stub_server, tmp_path, no_sleep):
    demo = load_dataset("demo")
    qs = demo.questions[:4]
    bad = qs[2].question
    down = {"q3": True}
    def respond(body):                                            # every call about question 3 fails while the server is "down"
        return None if down["q3"] and bad in body["messages"][-1]["content"] else "Cork"
    stub_server.respond = respond
    llm = served(stub_server, max_retries=1, cache=LLMCache(tmp_path / "c"))
    m = build_method("direct", {"reader_constrain_options": False}, Resources(demo, llm, None))
    s = run(m, demo, tmp_path / "r", limit=4, batch_size=4, show_progress=False)
    rows = read_predictions(tmp_path / "r" / "predictions.jsonl")
    assert [bool(r.get("failed")) for r in rows] == [False, False, True, False] and "HTTP 500" in rows[2]["failed"]
    assert (s["n"], s["failed"]) == (3, 1) and "failed=1" in format_summary(s) and "run the same command again" in format_summary(s)
    n = len(stub_server.requests)
    down["q3"] = False                                            # the server recovers: a re-run asks only question 3
    s = run(m, demo, tmp_path / "r", limit=4, batch_size=4, show_progress=False)
    assert (s["n"], s["failed"]) == (4, 0) and len(stub_server.requests) == n + 1
    assert [r["prediction"] for r in read_predictions(tmp_path / "r" / "predictions.jsonl")] == ["Cork"] * 4


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
