import json, re
from pathlib import Path
import numpy as np
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.index import TRIPLE_SCHEMA, openie_prompt
from megrag_kit.models import (LLMCache, OpenAIChatModel, ModelCallError, load_llm, load_embedder, parse_json,
                               check_llm_options, check_model_spec, gguf_file, parse_structured, _embedder_dtype, _llamacpp_target)
from conftest import ScriptedLLM, needs_llamacpp


@pytest.fixture()
def fingerprints(tmp_path, monkeypatch):
    "Keep the file-hash memo of these tests out of the user's cache folder."
    monkeypatch.setenv("MEGRAG_KIT_CACHE", str(tmp_path / "kitcache"))


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
    with pytest.raises(ModelCallError, match="gave up after 2 attempts"):
        OpenAIChatModel(stub_server.url, "m", cache=False, max_retries=1)("hi")


def test_openai_unreachable_server_is_a_clear_error():
    with pytest.raises(ModelCallError, match=re.escape("127.0.0.1:9")):
        OpenAIChatModel("http://127.0.0.1:9/v1", "m", cache=False, max_retries=0, timeout=2)("hi")


def test_openai_embedder(stub_server):
    e = load_embedder(f"openai:{stub_server.url}#emb")
    v = e.encode(["a", "b", "a"], batch_size=2)
    assert v.shape == (3, 8) and e.dim == 8 and np.allclose(np.linalg.norm(v, axis=1), 1) and np.allclose(v[0], v[2])
    assert not np.allclose(v[0], v[1]) and e.model_id == f"openai:{stub_server.url}#emb"
    assert [len(b["input"]) for p, b in stub_server.requests if p.endswith("/embeddings")] == [1, 2, 1]  # probe, then batches of 2


@pytest.mark.slow
def test_local_model_batched_equals_single(smollm):
    "Left padding must not change greedy outputs: batch of mixed lengths == one by one."
    prompts = ["What is the capital of France?", "Name a primary colour. Answer in one word, please, and nothing more than that."]
    batched = [g.text for g in smollm.generate(prompts, max_new_tokens=12)]
    one_by_one = [g.text for g in load_llm("smollm2-135m", "cpu", cache=False, batch_size=1).generate(prompts, max_new_tokens=12)]
    assert one_by_one == batched
    assert "Paris" in batched[0]
    # lengths far apart: each prefilled alone, decoded in one lock-step batch, returned in the prompts' order
    long = "Context: " + " ".join(f"Sentence {i} says nothing about colours or capitals." for i in range(30)) + \
        " Question: What is the capital of Italy?"
    mixed = [prompts[0], long, prompts[1]]
    eight = load_llm("smollm2-135m", "cpu", cache=False, batch_size=8)   # no cache: all three reach the backend
    one = load_llm("smollm2-135m", "cpu", cache=False, batch_size=1)
    assert [g.text for g in eight.generate(mixed, max_new_tokens=12)] == \
        [g.text for g in one.generate(mixed, max_new_tokens=12)]
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]}
    assert [g.text for g in eight.generate(mixed, max_new_tokens=24, json_schema=schema)] == \
        [g.text for g in one.generate(mixed, max_new_tokens=24, json_schema=schema)]


@pytest.mark.slow
def test_stop_criteria_are_built_once_and_stop_where_stop_strings_stop(smollm):
    "The cached stopping criteria (`_stop_criteria`) give what `generate(stop_strings=..., tokenizer=...)` gives."
    msgs = [[{"role": "user", "content": "List three colours, one per line."}],
            [{"role": "user", "content": "Write two short sentences about Paris. Question: what is its river?"}]]
    for stop in (["\n"], ["Question:", "."]):
        ours = [g.text for g in smollm._generate(msgs, max_new_tokens=40, stop=stop)]
        ref = []
        for m in msgs:
            enc = smollm.tok([smollm.render(m)], return_tensors="pt", add_special_tokens=False)
            out = smollm.model.generate(**enc, max_new_tokens=40, do_sample=False, temperature=None, top_p=None, top_k=None,
                                        stop_strings=stop, tokenizer=smollm.tok, pad_token_id=smollm.tok.pad_token_id)
            ref.append(smollm.tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True).strip())
        assert ours == ref and any(t for t in ours), (stop, ours, ref)
    assert smollm._stop_criteria(["\n"]) is smollm._stop_criteria(["\n"]) is not smollm._stop_criteria(["."])


@pytest.mark.slow
def test_local_model_json_schema_decoding(smollm):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
    g = smollm("Give the capital of France as JSON with key city.", json_schema=schema, max_new_tokens=30)
    assert json.loads(g.text) == {"city": "Paris"}     # constrained decoding: valid JSON without repair, right answer
    assert g.prompt_tokens > 10 and 0 < g.completion_tokens <= 30


@pytest.mark.slow
def test_local_embedder(minilm):
    v = minilm.encode(["Aretha Franklin died in Detroit.", "The Queen of Soul passed away in Michigan.", "Photosynthesis in plants."])
    assert v.shape == (3, 384) and minilm.model_id.startswith("all-MiniLM-L6-v2@")
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def _checkpoint(folder: Path, weights: bytes, template: str = "{{ messages }}") -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "chat_template.jinja").write_text(template)
    return folder


@pytest.mark.slow
def test_hf_checkpoints_with_the_same_folder_name_get_their_own_ids_and_outputs(tmp_path, fingerprints):
    "End to end through load_llm with two tiny random Llama models (slow only because it imports torch/transformers)."
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    words = ["<unk>", "<eos>", "user", "assistant", ":"] + [f"w{i}" for i in range(59)]
    def tiny(folder, roll=0):
        tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
        tk.pre_tokenizer, tk.decoder = pre_tokenizers.WhitespaceSplit(), decoders.WordPiece()
        tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>")
        tok.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}{% if add_generation_prompt %}assistant : {% endif %}"
        torch.manual_seed(0)
        m = LlamaForCausalLM(LlamaConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, bos_token_id=None, eos_token_id=1, pad_token_id=1))
        # run b: the same network with its output rows rotated, so its first greedy token is run a's plus one
        if roll: m.lm_head.weight.data = m.lm_head.weight.data.roll(roll, 0)
        m.save_pretrained(folder); tok.save_pretrained(folder)
        return folder
    a, b = tiny(tmp_path / "a" / "checkpoint-100"), tiny(tmp_path / "b" / "checkpoint-100", roll=1)
    cache = LLMCache(tmp_path / "llm")
    A, B = load_llm(f"hf:{a}", "cpu", cache=cache), load_llm(f"hf:{b}", "cpu", cache=cache)
    assert A.model_id != B.model_id and A.model_id.startswith("hf:checkpoint-100@") and B.model_id.startswith("hf:checkpoint-100@")
    ga, gb = A("w3 w4 w5", max_new_tokens=6), B("w3 w4 w5", max_new_tokens=6)
    assert not ga.cached and not gb.cached and ga.text and gb.text and ga.text != gb.text
    assert gb.text == load_llm(f"hf:{b}", "cpu", cache=False)("w3 w4 w5", max_new_tokens=6).text   # b's own weights
    assert ga.finish_reason == "length" and len(cache) == 0        # a random network never ends: cut by the limit, not cached
    from megrag_kit.models import Generation, as_messages
    params = dict(max_new_tokens=6, temperature=0.0, stop=None, json_schema=None, seed=None)
    cache.set(LLMCache.key(A.model_id, as_messages("w3 w4 w5"), params), Generation(ga.text, 7, 6, finish_reason="stop"))  # as if it had ended
    A2 = load_llm(f"hf:{a}", "cpu", cache=cache)                   # the same folder again: same id, so a cache hit
    g = A2("w3 w4 w5", max_new_tokens=6)
    assert A2.model_id == A.model_id and g.cached and g.text == ga.text
    A16 = load_llm(f"hf:{a}", "cpu", cache=cache, dtype=torch.bfloat16)
    assert A16.model_id != A.model_id and A16.model_id.startswith("hf:checkpoint-100@")
    assert not A16("w3 w4 w5", max_new_tokens=6).cached


def test_cache_entries_of_older_versions_are_read(tmp_path):
    "Entries written before Generation grew fields (with 'cached' stored, no 'finish_reason') are still hits."
    cache = LLMCache(tmp_path)
    llm = ScriptedLLM([]); llm.cache = cache
    from megrag_kit.models import as_messages
    params = dict(max_new_tokens=64, temperature=0.0, stop=None, json_schema=None, seed=None)
    cache._c.set(LLMCache.key(llm.model_id, as_messages("q"), params),
                 {"text": "old", "prompt_tokens": 5, "completion_tokens": 1, "cached": False, "latency_s": 0.5})
    g = llm("q")
    assert (g.text, g.cached, g.prompt_tokens, g.finish_reason) == ("old", True, 5, None)


# -- the llama.cpp backend (skipped without llama-cpp-python) and bf16 embedding

def test_llamacpp_specs_are_checked_before_loading(tmp_path):
    (tmp_path / "a.gguf").write_bytes(b""); (tmp_path / "b.gguf").write_bytes(b"")
    assert gguf_file(tmp_path / "a.gguf") == tmp_path / "a.gguf"
    with pytest.raises(ValueError, match=re.escape("holds 2 .gguf files")): gguf_file(tmp_path)
    (tmp_path / "b.gguf").unlink()
    assert _llamacpp_target(f"{tmp_path}@llamacpp") == (tmp_path / "a.gguf", "llamacpp:a")
    assert _llamacpp_target("smollm2-135m@llamacpp")[0].name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with pytest.raises(ValueError, match=re.escape("not a .gguf file")): check_model_spec("/no/such.gguf@llamacpp")
    with pytest.raises(ValueError, match="SPEC@llamacpp"): check_model_spec("no-such-model")
    assert check_llm_options("smollm2-135m@llamacpp", {"n_ctx": "2048", "think_tokens": 4}) == {"n_ctx": 2048, "think_tokens": 4}
    with pytest.raises(ValueError, match="applies to llamacpp"): check_llm_options("smollm2-135m", {"n_ctx": 2048})
    with pytest.raises(ValueError, match="applies to openai"): check_llm_options("smollm2-135m@llamacpp", {"timeout": 5})


def test_embedder_precision_suffix():
    assert _embedder_dtype("minilm@bf16") == ("minilm", "bfloat16")
    assert _embedder_dtype("st:/m@fp16") == ("st:/m", "float16")
    assert _embedder_dtype("minilm") == ("minilm", None)
    assert check_model_spec("minilm@bf16", "embedder") == "minilm@bf16"
    with pytest.raises(ValueError, match="unknown embedder spec 'nope'"): check_model_spec("nope@bf16", "embedder")


def test_precision_setting_resolves_into_the_specs(monkeypatch):
    "auto is bf16 only where the CPU has bf16 instructions; fp32 leaves every spec, and so every identity, as it was."
    from megrag_kit import core
    from megrag_kit.method import Resources
    from megrag_kit.models import ModelOptions, spec_precision, with_precision
    for flags, want in (([], "fp32"), (["avx512_bf16"], "bf16"), (["amx_bf16", "avx512_bf16"], "bf16")):
        monkeypatch.setattr(core, "cpu_bf16", lambda f=flags: f)
        mo = ModelOptions(device="cpu", precision="auto")
        sfx = "@bf16" if want == "bf16" else ""
        assert (mo.precision, mo.llm, mo.embedder) == (want, "smollm2-135m" + sfx, "minilm" + sfx)
    assert ModelOptions(device="cpu") == ModelOptions(device="cpu", precision="fp32")       # the default: fp32
    assert ModelOptions(device="cpu").llm == "smollm2-135m" and ModelOptions(device="cpu").embedder == "minilm"
    assert ModelOptions(device="cuda", precision="auto").precision == "bf16"               # a GPU: bf16, not looked for
    mo = ModelOptions(llm="smollm2-135m@llamacpp", embedder="minilm@fp32", device="cpu", precision="bf16")
    assert (mo.llm, mo.embedder) == ("smollm2-135m@llamacpp", "minilm@fp32")     # a GGUF, a spec naming its own: kept
    with pytest.raises(ValueError, match=re.escape("precision must be auto|fp32|bf16, got 'half'")):
        ModelOptions(precision="half")
    assert with_precision("smollm2-135m+lora:/a", "llm", "bf16") == "smollm2-135m@bf16+lora:/a"
    assert [spec_precision(s, "llm") for s in ("smollm2-135m", "smollm2-135m@bf16", "openai:http://x/v1#m")] == ["fp32", "bf16", None]
    assert check_model_spec("smollm2-135m@bf16") == "smollm2-135m@bf16" and check_model_spec("smollm2-135m@fp32") == "smollm2-135m@fp32"
    with pytest.raises(ValueError, match="applies to a local transformers model"): check_model_spec("smollm2-135m@llamacpp@bf16")
    ds = load_dataset("demo")
    assert Resources(ds, "smollm2-135m@bf16", "minilm").manifest()["precision"] == {"llm": "bf16", "embedder": "fp32"}
    assert "precision" not in Resources(ds, "openai:http://x/v1#m", None).manifest()


@pytest.mark.slow
def test_bf16_llm_is_a_model_of_its_own(smollm):
    "smollm2-135m@bf16: bfloat16 weights, its own model_id (never the fp32 model's cached calls), a usable answer."
    import torch
    b = load_llm("smollm2-135m@bf16", "cpu", cache=False)
    assert b.model.dtype == torch.bfloat16 and smollm.model.dtype == torch.float32 and b.model_id != smollm.model_id
    assert b.model_id.startswith("smollm2-135m-instruct-q4_1@")
    g = b.generate(["What is the capital of France? Answer in one word."], max_new_tokens=8)[0]
    assert "paris" in g.text.lower() and g.prompt_tokens > 10


@needs_llamacpp
@pytest.mark.slow
def test_llamacpp_backend_prompt_schema_and_cache(smollm, tmp_path):
    lc = load_llm("smollm2-135m@llamacpp", cache=LLMCache(tmp_path))
    passage = load_dataset("demo").corpus[7].content
    msgs = openie_prompt(passage)
    assert lc.render(msgs) == smollm.render(msgs)                 # the GGUF's chat template renders the same prompt
    assert lc.model_id.startswith("smollm2-135m-instruct-q4_1-llamacpp@") and lc.model_id != smollm.model_id
    g = lc.generate([msgs], max_new_tokens=600, json_schema=TRIPLE_SCHEMA)[0]     # room for the schema's 12 triples
    val = parse_structured(g.text, TRIPLE_SCHEMA)                  # grammar-constrained: always conforms
    assert isinstance(val["triples"], list) and g.completion_tokens > 0 and g.prompt_tokens == len(smollm.tok(smollm.render(msgs), add_special_tokens=False)["input_ids"])
    again = lc.generate([msgs], max_new_tokens=600, json_schema=TRIPLE_SCHEMA)[0]
    assert (again.cached, again.text) == (True, g.text)
    free = lc.generate([msgs], max_new_tokens=200, stop=["]]}", "\n\n"])[0]
    assert not free.cached and free.finish_reason in ("stop", "length")
    # a schema with regex patterns (MEGRAG's node output): llama.cpp needs them anchored (anchored_patterns)
    from megrag_kit.megrag import node_schema
    node = lc.generate([[{"role": "user", "content": "Who directed Titanic? Reply in JSON."}]], max_new_tokens=300, json_schema=node_schema())[0]
    assert node.finish_reason == "stop" and set(parse_structured(node.text, node_schema())) >= {"intermediate_answer", "stop", "answer"}


def test_ct2_specs_and_options_are_checked_before_loading():
    assert check_model_spec("smollm2-135m@ct2") == "smollm2-135m@ct2"
    with pytest.raises(ValueError, match="no such model folder"): check_model_spec("/no/such/folder@ct2")
    with pytest.raises(ValueError, match="without a precision suffix"): check_model_spec("smollm2-135m@bf16@ct2")
    with pytest.raises(ValueError, match="applies to a local transformers LLM"): check_model_spec("smollm2-135m@llamacpp@ct2")
    assert check_llm_options("smollm2-135m@ct2", {"compute_type": "int8", "n_threads": "2"}) == {"compute_type": "int8", "n_threads": 2}
    with pytest.raises(ValueError, match="compute type"): check_llm_options("smollm2-135m@ct2", {"compute_type": "int4"})
    with pytest.raises(ValueError, match="applies to ct2"): check_llm_options("smollm2-135m", {"compute_type": "int8"})
    with pytest.raises(ValueError, match="applies to llamacpp"): check_llm_options("smollm2-135m@ct2", {"n_ctx": 2048})


@pytest.mark.slow
def test_ct2_backend_decodes_as_the_reference(smollm, tmp_path):
    "smollm2-135m@ct2 (float32): the reference model's greedy tokens, free and under a JSON schema (masked greedy); its own id."
    ct = load_llm("smollm2-135m@ct2", "cpu", cache=LLMCache(tmp_path))
    assert ct.model_id.startswith("smollm2-135m-instruct-q4_1@") and ct.model_id != smollm.model_id
    passage = load_dataset("demo").corpus[7].content
    prompts = [openie_prompt(passage), [{"role": "user", "content": "What is the capital of France? Answer briefly."}],
               [{"role": "user", "content": "Name three rivers of Europe."}]]
    assert ct.render(prompts[0]) == smollm.render(prompts[0])
    ref = load_llm("smollm2-135m", "cpu", cache=False, batch_size=1)
    want = [g.text for g in ref.generate(prompts, max_new_tokens=64)]
    free = ct.generate(prompts, max_new_tokens=64)
    assert [g.text for g in free] == want and all(g.completion_tokens > 0 for g in free)
    # under a JSON schema: the masked greedy sequence, computed here with the reference model one full forward pass
    # per token (the kit's rendered prompt; the best token the schema's automaton allows at every step)
    import torch
    from outlines_core import Guide
    from megrag_kit.megrag import node_schema
    msgs, schema = [{"role": "user", "content": "Who directed Titanic? Reply in JSON."}], node_schema()
    ids, guide, masked = ct.tok(ct.render(msgs), add_special_tokens=False)["input_ids"], Guide(ct._schema_index(schema)), []
    while len(masked) < 40:
        allowed = np.asarray(guide.get_tokens())
        with torch.inference_mode(): logits = ref.model(torch.tensor([ids + masked])).logits[0, -1].numpy()
        t = int(allowed[np.argmax(logits[allowed])])
        if t == ct.tok.eos_token_id: break
        masked.append(t); guide.advance(t)
    got = ct.generate([msgs], max_new_tokens=40, json_schema=schema)[0]
    assert got.text == ct.tok.decode(masked, skip_special_tokens=True) and got.completion_tokens == len(masked) > 10
    again = ct.generate(prompts[1:2], max_new_tokens=64)[0]                 # the call cache keys by its model_id
    assert (again.cached, again.text) == (True, want[1])


@pytest.mark.slow
def test_bf16_embedder_vectors_are_close_to_fp32(minilm):
    e16 = load_embedder("minilm@bf16", "cpu")
    texts = ["Aretha Franklin died in Detroit.", "The Queen of Soul passed away in Michigan.", "Photosynthesis in plants."]
    v32, v16 = minilm.encode(texts), e16.encode(texts)
    assert v16.dtype == np.float32 and v16.shape == (3, 384) and e16.model_id == minilm.model_id + "+bf16"
    assert np.allclose(np.linalg.norm(v16, axis=1), 1, atol=1e-5)
    assert (v32 * v16).sum(1).min() > 0.99 and v16[0] @ v16[1] > v16[0] @ v16[2]
