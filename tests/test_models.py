import json
import numpy as np
import pytest
from megrag_kit.models import (LLMCache, OpenAIChatModel, OpenAIEmbedder, HTTPError, load_llm, load_embedder, parse_json,
                               StructuredOutputError, cut_at_stop)
from conftest import ScriptedLLM


def test_openai_backend_against_local_server(stub_server, tmp_path):
    llm = load_llm(f"openai:{stub_server.url}#tiny-model", cache=LLMCache(tmp_path), concurrency=4)
    assert llm.model_id == f"openai:{stub_server.url}#tiny-model"
    gens = llm.generate([f"question {i}" for i in range(6)], max_new_tokens=9)
    assert [g.text for g in gens] == [f"echo: question {i}" for i in range(6)]   # order kept under concurrency
    assert gens[0].prompt_tokens == 2 and gens[0].completion_tokens == 3
    path, body = stub_server.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "tiny-model" and body["max_tokens"] == 9 and body["temperature"] == 0.0
    # a second identical call is served by the cache: no request reaches the server
    n = len(stub_server.requests)
    assert llm("question 3", max_new_tokens=9).cached and len(stub_server.requests) == n
    # any changed parameter misses the cache
    llm("question 3", max_new_tokens=10); assert len(stub_server.requests) == n + 1
    assert llm.stats.llm_calls == 8 and llm.stats.cache_hits == 1


def test_openai_json_schema_is_sent_as_response_format(stub_server, tmp_path):
    llm = load_llm(f"openai:{stub_server.url}#m", cache=False)
    schema = {"type": "object", "properties": {"echo": {"type": "string"}}}
    g = llm("abc", json_schema=schema)
    assert parse_json(g.text) == {"echo": "cba"}
    assert stub_server.requests[-1][1]["response_format"]["json_schema"]["schema"] == schema


def test_openai_retries_then_gives_up(stub_server):
    llm = OpenAIChatModel(stub_server.url, "m", cache=False, max_retries=3)
    stub_server.fail_next = 2
    assert llm("hi").text == "echo: hi" and len(stub_server.requests) == 3
    stub_server.fail_next = 10
    with pytest.raises(HTTPError, match="gave up after 2 attempts"):
        OpenAIChatModel(stub_server.url, "m", cache=False, max_retries=1)("hi")


def test_openai_unreachable_server_is_a_clear_error():
    with pytest.raises(HTTPError, match="127.0.0.1:9"):
        OpenAIChatModel("http://127.0.0.1:9/v1", "m", cache=False, max_retries=0, timeout=2)("hi")


def test_openai_embedder(stub_server):
    e = load_embedder(f"openai:{stub_server.url}#emb")
    v = e.encode(["a", "b", "a"], batch_size=2)
    assert v.shape == (3, 8) and e.dim == 8 and np.allclose(np.linalg.norm(v, axis=1), 1) and np.allclose(v[0], v[2])


def test_spec_errors():
    with pytest.raises(ValueError, match="openai:URL#MODEL"): load_llm("openai:http://x/v1")
    with pytest.raises(ValueError, match="unknown LLM spec"): load_llm("no-such-model")


def test_parse_json_and_stop():
    assert parse_json("```json\n{\"a\": [1, 2]}\n```") == {"a": [1, 2]}
    assert parse_json("Here: {'a': 'b'} done") == {"a": "b"}          # near-JSON repaired
    with pytest.raises(StructuredOutputError): parse_json("no json at all")
    assert cut_at_stop("Paris\nQuestion: next", ["\n"]) == "Paris"


def test_cache_survives_reopening(tmp_path):
    llm = ScriptedLLM(["first"]); llm.cache = LLMCache(tmp_path)
    assert llm("q").text == "first"
    again = ScriptedLLM([]); again.cache = LLMCache(tmp_path)      # a new process would see the same cache
    g = again("q")
    assert g.cached and g.text == "first" and g.prompt_tokens == 10


def test_local_model_batched_equals_single(smollm):
    "Left padding must not change greedy outputs: batch of mixed lengths == one by one."
    prompts = ["What is the capital of France?", "Name a primary colour. Answer in one word, please, and nothing more than that."]
    batched = [g.text for g in smollm.generate(prompts, max_new_tokens=12)]
    one_by_one = [g.text for g in load_llm("smollm2-135m", "cpu", cache=False, batch_size=1).generate(prompts, max_new_tokens=12)]
    assert one_by_one == batched
    assert "Paris" in batched[0]


def test_local_model_json_schema_decoding(smollm):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
    g = smollm("Give the capital of France as JSON with key city.", json_schema=schema, max_new_tokens=30)
    obj = json.loads(g.text)     # constrained decoding: valid JSON without repair
    assert set(obj) == {"city"} and isinstance(obj["city"], str)


def test_local_embedder(minilm):
    v = minilm.encode(["Aretha Franklin died in Detroit.", "The Queen of Soul passed away in Michigan.", "Photosynthesis in plants."])
    assert v.shape == (3, 384) and minilm.model_id.startswith("all-MiniLM-L6-v2@")
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_one_schema_per_prompt_batches_prompts_that_share_one():
    from megrag_kit.models import ChatModel, Generation
    class Recorder(ChatModel):
        model_id = "recorder"
        def __init__(self): super().__init__(cache=False); self.calls = []
        def _generate(self, messages, **params):
            self.calls.append((len(messages), params["json_schema"]))
            return [Generation(f"{m[-1]['content']}:{params['json_schema']['enum'][0]}") for m in messages]
    llm, a, b = Recorder(), {"enum": ["A"]}, {"enum": ["B"]}
    out = llm.generate(["p0", "p1", "p2"], json_schema=[a, b, a])
    assert [g.text for g in out] == ["p0:A", "p1:B", "p2:A"] and llm.calls == [(2, a), (1, b)]
    with pytest.raises(ValueError, match="2 schemas for 3 prompts"): llm.generate(["x", "y", "z"], json_schema=[a, b])
