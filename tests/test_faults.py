"""Faults found by trying public bug reports of peer projects on the kit (issue 26): each case is a hand-made input
that failed before its fix. Stub-server behaviours are in conftest.py (`_Stub`)."""
import re
import json, os, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.data import load_dataset
from megrag_kit.index import ExtractedView, openie_prompt, parse_triples
from megrag_kit.method import Resources, build_method
from megrag_kit.models import (LLMCache, ModelCallError, OpenAIChatModel, OpenAIEmbedder, check_llm_options, load_llm,
                               structured)
from megrag_kit.reader import Reader
from megrag_kit.runner import RunMismatchError, compare_runs, read_predictions, run
from conftest import ScriptedLLM
from fakes import HashEmbedder


@pytest.fixture()
def no_sleep(monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda s: None)


def _questions(path: Path, qs: list[tuple[str, str, str]]):
    "A 2Wiki-style questions file: (id, question, answer) each with a two-paragraph context naming the answer."
    recs = [dict(_id=i, type="compositional", question=q, answer=a,
                 context=[[f"{a} (place)", [f"{a} is a place in a country."]], ["Other", ["Something else entirely."]]],
                 supporting_facts=[[f"{a} (place)", 0]]) for i, q, a in qs]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recs))
    return path


# -- resume with changed input (graphrag #886)

def test_resume_on_other_questions_under_the_same_ids_is_refused_naming_both_hashes(tmp_path):
    a = _questions(tmp_path / "a" / "test.json", [("1", "Where is Lyon?", "France"), ("2", "Where is Kyoto?", "Japan")])
    b = _questions(tmp_path / "b" / "test.json", [("1", "Where is Porto?", "Portugal"), ("2", "Where is Lima?", "Peru")])
    da, db = load_dataset(str(a)), load_dataset(str(b))
    assert da.name == db.name == "test"                                  # the name alone cannot tell them apart
    llm = ScriptedLLM(lambda p: "x")
    run(build_method("direct", {}, Resources(da, llm, None)), da, tmp_path / "r", show_progress=False)
    with pytest.raises(RunMismatchError) as e:
        run(build_method("direct", {}, Resources(db, llm, None)), db, tmp_path / "r", show_progress=False)
    old = json.loads((tmp_path / "r" / "run.json").read_text())["inputs"]
    assert old["questions"] in str(e.value) and "questions" in str(e.value)
    assert [r["question"] for r in read_predictions(tmp_path / "r" / "predictions.jsonl")] == ["Where is Lyon?", "Where is Kyoto?"]
    # a larger --limit over the same file still resumes (the hash is of the whole file, not of the questions answered)
    run(build_method("direct", {}, Resources(da, llm, None)), da, tmp_path / "r2", limit=1, show_progress=False)
    run(build_method("direct", {}, Resources(da, llm, None)), da, tmp_path / "r2", limit=2, show_progress=False)
    assert len(read_predictions(tmp_path / "r2" / "predictions.jsonl")) == 2


def test_an_answer_changing_option_is_part_of_the_run_identity(tmp_path):
    ds = load_dataset("demo")
    llm = ScriptedLLM(lambda p: "x")
    run(build_method("direct", {}, Resources(ds, llm, None)), ds, tmp_path / "r", limit=1, show_progress=False,
        manifest=dict(openie_backend="llm", llm_options={"timeout": 30.0}))
    # a timeout does not change answers: the run resumes
    run(build_method("direct", {}, Resources(ds, llm, None)), ds, tmp_path / "r", limit=2, show_progress=False,
        manifest=dict(openie_backend="llm", llm_options={"timeout": 600.0, "max_retries": 9}))
    with pytest.raises(RunMismatchError, match="openie_backend: 'llm' in the folder, 'parser' now"):
        run(build_method("direct", {}, Resources(ds, llm, None)), ds, tmp_path / "r", limit=2, show_progress=False,
            manifest=dict(openie_backend="parser", llm_options={"timeout": 30.0}))
    with pytest.raises(RunMismatchError, match=re.escape("llm_options.extra_body")):
        run(build_method("direct", {}, Resources(ds, llm, None)), ds, tmp_path / "r", limit=2, show_progress=False,
            manifest=dict(openie_backend="llm", llm_options={"extra_body": {"top_k": 1}}))


def test_the_default_out_folder_differs_for_two_files_of_the_same_name(stub_server, tmp_path, monkeypatch):
    a = _questions(tmp_path / "a" / "test.json", [("1", "Where is Lyon?", "France")])
    b = _questions(tmp_path / "b" / "test.json", [("1", "Where is Porto?", "Portugal")])
    monkeypatch.chdir(tmp_path)
    args = ["run", "direct", "--no-cache", "--llm", f"openai:{stub_server.url}#m"]
    ra = CliRunner().invoke(app, args + ["--dataset", str(a)])
    rb = CliRunner().invoke(app, args + ["--dataset", str(b)])
    assert ra.exit_code == 0 and rb.exit_code == 0, (ra.output, rb.output)
    assert "already answered" not in rb.output
    folders = sorted(p for p in (tmp_path / "runs").iterdir())
    assert len(folders) == 2
    qs = sorted(read_predictions(f / "predictions.jsonl")[0]["question"] for f in folders)
    assert qs == ["Where is Lyon?", "Where is Porto?"]


# -- comparing runs over different questions

def test_compare_refuses_runs_over_other_questions_naming_the_difference(tmp_path, monkeypatch):
    import megrag_kit.cli as cli
    monkeypatch.setitem(cli._STATE, "debug", False)          # an earlier test's --debug must not leak into this one
    a = _questions(tmp_path / "a.json", [("1", "Where is Lyon?", "France"), ("2", "Where is Kyoto?", "Japan")])
    b = _questions(tmp_path / "b.json", [("1", "Where is Porto?", "Portugal"), ("2", "Where is Kyoto?", "Japan")])
    c = _questions(tmp_path / "c.json", [("1", "Where is Lyon?", "France"), ("3", "Where is Lima?", "Peru")])
    for name, f in (("a", a), ("b", b), ("c", c)):
        ds = load_dataset(str(f))
        run(build_method("direct", {}, Resources(ds, ScriptedLLM(lambda p: "France"), None)), ds, tmp_path / name, show_progress=False)
    with pytest.raises(ValueError, match="question 1 differs: 'Where is Lyon\\?' in a, 'Where is Porto\\?' in b"):
        compare_runs(tmp_path / "a", tmp_path / "b")
    r = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "c")])
    assert r.exit_code != 0 and "only in a: 2" in r.output and "only in c: 3" in r.output and "n=" not in r.output, r.output
    assert compare_runs(tmp_path / "a", tmp_path / "a")["f1"]["n"] == 2
    # common=True pairs over the shared ids (question 1 only: a says France, right; c says France, right)
    cc = compare_runs(tmp_path / "a", tmp_path / "c", ("f1", "em"), common=True)
    assert cc["f1"]["n"] == 1 and cc["f1"]["diff"] == 0.0, cc
    r = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "c"), "--common"])
    assert r.exit_code == 0 and "(n=1," in r.output, r.output
    with pytest.raises(ValueError, match="question 1 differs"):     # a shared id must still be the same question
        compare_runs(tmp_path / "a", tmp_path / "b", common=True)
    d = _questions(tmp_path / "d.json", [("7", "Where is Oslo?", "Norway")])
    ds = load_dataset(str(d))
    run(build_method("direct", {}, Resources(ds, ScriptedLLM(lambda p: "France"), None)), ds, tmp_path / "d",
        show_progress=False)
    with pytest.raises(ValueError, match="answered other questions"):  # nothing shared: nothing to pair
        compare_runs(tmp_path / "a", tmp_path / "d", common=True)


# -- empty content and chat-template tokens in a reply

def test_a_server_that_says_nothing_fails_every_question_and_the_run_says_so(stub_server, no_sleep, tmp_path):
    "Every question scored 0 and the run exited 0, silently: now each is a failed question, counted, with the reason."
    stub_server.respond = lambda body: ""
    out = tmp_path / "r"
    r = CliRunner().invoke(app, ["run", "direct", "--dataset", "demo", "--limit", "3", "--no-cache", "--out", str(out),
                                 "--llm", f"openai:{stub_server.url}#m", "--llm-option", "max_retries=1"])
    assert r.exit_code == 3 and "(n=0, failed=3)" in r.output and "every question failed: 3 x gave up after 2 attempts" in r.output, r.output
    rows = read_predictions(out / "predictions.jsonl")
    assert len(rows) == 3 and all("reply with empty content" in x["failed"] and "f1" not in x and "prediction" not in x for x in rows)
    s = json.loads((out / "summary.json").read_text())
    assert (s["n"], s["failed"], list(s["failed_reasons"].values())) == (0, 3, [3]) and "em" not in s
    stub_server.respond = None                                          # the server answers again: only the failed are asked
    r = CliRunner().invoke(app, ["run", "direct", "--dataset", "demo", "--limit", "3", "--no-cache", "--out", str(out),
                                 "--llm", f"openai:{stub_server.url}#m"])
    s = json.loads((out / "summary.json").read_text())
    assert r.exit_code == 0 and (s["n"], s["failed"]) == (3, 0) and "failed_reasons" not in s


# -- a summary of a 10-passage ranking does not pass its recall@20 off as one

def test_a_summary_marks_the_k_beyond_what_was_retrieved(tmp_path):
    from megrag_kit.runner import format_summary
    ds = load_dataset("demo")
    s = run(build_method("native_rag", {"k": 3}, Resources(ds, ScriptedLLM(lambda p: "x"), HashEmbedder())), ds, tmp_path / "r",
            limit=2, show_progress=False)
    assert s["retrieved_depth"] == [3, 3] and s["k_beyond_retrieved"] == ["recall@5", "recall@10", "recall@20", "chain@5", "chain@10",
                                                                          "chain@20", "hit@5", "hit@10", "hit@20"]
    lines = {l.split()[0]: l for l in format_summary(s).splitlines() if l.strip()}
    assert "K > the 3 passages retrieved" in lines["recall@20"] and "K > the" not in lines["recall@2"]


# -- the fault-injection run, small: a faulty server, kill -9 mid-run, resume

def test_a_small_fault_injection_run_loses_nothing_and_caches_no_failure(tmp_path, monkeypatch):
    "benchmarks/speed/bench_faults.py on 6 demo questions with direct: every kind of fault, a SIGKILL after 2 rows, resumes."
    import importlib.util, io
    spec = importlib.util.spec_from_file_location("bench_faults", Path(__file__).resolve().parents[1] / "benchmarks" / "speed" / "bench_faults.py")
    bench = importlib.util.module_from_spec(spec); spec.loader.exec_module(bench)
    srv = bench.start_stub(0.0, client_timeout=1.0, wall_s=600)
    srv.p_faulty = 1.0       # every request draws a fault kind: 9 land in the first run alone, so >= 3 if no kill lands
    try: r = bench.one_method("direct", srv, tmp_path, "demo", 6, 3, 1.0, io.StringIO(), invoke=bench.in_process)
    finally: srv.shutdown()
    assert "error" not in r, r
    assert (r["n"], r["lost"], r["dup"], r["bad_cache"], r["clean_failed"]) == (6, 0, 0, 0, 0), r
    assert r["killed_after"] is not None and r["as_clean"] + r["differs"] + r["failed"] == 6 and sum(r["injected"].values()) >= 3, r
    assert r["as_clean"] == 6 - r["failed"], r              # direct: every answered question as the clean run answered it
    assert bench.instance({"type": "object", "properties": {"a": {"enum": ["x", "y"]}}, "required": ["a"]}, 3, ["W"]) in ({"a": "x"}, {"a": "y"})


# -- progress that moves (a newcomer saw "OpenIE: 0/47" for 9.5 minutes)

def test_the_runner_announces_the_calls_and_moves_with_every_llm_call(tmp_path, capsys):
    ds = load_dataset("demo")
    m = build_method("megrag", {"budget": 2}, Resources(ds, ScriptedLLM(lambda p: "x"), HashEmbedder()))
    from megrag_kit.runner import _announce, estimate_calls
    assert estimate_calls(m)[0] == 9
    _announce(m, 30, m.res)
    out = capsys.readouterr().out
    assert "30 questions x up to 9 LLM calls" in out and "--openie-backend parser" in out and "OpenIE of up to 10 passages" in out
    from megrag_kit.models import CostMeter
    seen = []
    with CostMeter(on_record=lambda phase, gens: seen.append((phase, len(gens)))): ScriptedLLM(lambda p: "x").generate(["a", "b"])
    assert seen == [("answering", 2)]


# -- a package shadowed by the clone folder

def test_a_clone_folder_shadowing_the_package_gives_a_clear_error(tmp_path):
    "From the clone's parent folder, `megrag_kit/` (the clone) is a namespace package; importing the kit says so."
    (tmp_path / "megrag_kit").mkdir()
    pkg = Path(__file__).resolve().parents[1] / "megrag_kit"
    code = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', %r)]; sys.path.insert(0, %r)\n"
            "import megrag_kit; megrag_kit.__path__.append(%r)\n"
            "from megrag_kit.data import load_dataset") % (str(pkg.parent), str(tmp_path), str(pkg))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "TypeError" not in r.stderr, r.stderr[-2000:]
    assert "namespace package" in r.stderr and str(tmp_path / "megrag_kit") in r.stderr, r.stderr[-2000:]


# -- two runs on one run folder (each wrote every question: 16 rows for 8 questions)

HOLD_PLUGIN = '''
"A toy method that says when it starts answering, then waits for a release file (a run that holds its folder)."
import os, time
from pathlib import Path
from megrag_kit.method import Answer, Method, register

@register
class HoldToy(Method):
    name = "_hold_toy"
    def answer(self, questions):
        Path(os.environ["HOLD_DIR"], f"started-{os.getpid()}").touch()
        t0 = time.time()
        while not Path(os.environ["HOLD_DIR"], "release").exists() and time.time() - t0 < 300: time.sleep(0.05)
        return [Answer(q.answers[0], list(q.gold_pids)) for q in questions]
'''


@pytest.mark.skipif(sys.platform == "win32", reason="flock and SIGKILL are POSIX")
def test_a_second_run_on_a_folder_in_use_is_refused_and_a_killed_holder_does_not_block(tmp_path):
    import signal
    (tmp_path / "hold_toy_plugin.py").write_text(HOLD_PLUGIN)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "HOLD_DIR": str(tmp_path),
           "MEGRAG_KIT_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-c", "from megrag_kit.cli import main; main()", "run", "_hold_toy", "--plugin", "hold_toy_plugin",
           "--dataset", "demo", "--limit", "8", "--batch-size", "4", "--out", str(out)]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        t0 = time.time()
        while not (tmp_path / f"started-{first.pid}").exists():       # the first run is answering: it holds the folder
            assert first.poll() is None and time.time() - t0 < 600, first.stdout.read()[-2000:]
            time.sleep(0.05)
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        err = [l for l in second.stderr.splitlines() if l.startswith("Error: ")]
        assert second.returncode == 2 and len(err) == 1, (second.returncode, second.stdout[-2000:], second.stderr[-2000:])
        assert str(out) in err[0] and f"PID {first.pid}" in err[0], err
        assert not list(tmp_path.glob("started-*"))[1:], "the second run must not start answering"
    finally:
        first.send_signal(signal.SIGKILL); first.wait()
    assert (out / "run.lock").exists()                     # a killed holder leaves its lock file, which does not block
    (tmp_path / "release").touch()
    third = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stdout[-2000:] + third.stderr[-2000:]
    ids = [json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert ids == [q.qid for q in load_dataset("demo").questions[:8]]            # every question once
    assert not (out / "run.lock").exists()                 # released with the run


# -- answers a model wraps in JSON or a sentence (scored wrong), and the count of the rule that rewrote them

def test_a_json_or_sentence_answer_is_read_and_every_rewrite_is_counted_beside_the_scores(tmp_path):
    from megrag_kit.runner import format_summary
    from megrag_kit.core import Dataset
    from megrag_kit.reader import answer_options
    demo = load_dataset("demo")
    ds = Dataset("demo-free", [q for q in demo.questions if answer_options(q.question) is None][:3], demo.corpus)
    qs = ds.questions
    golds = {q.question: q.answers[0] for q in qs}
    def reply(user):
        q = user.split("Question: ")[-1]
        if q == qs[0].question: return f'```json\n{{"answer": "{golds[q]}"}}\n```'
        return f'{{"answer": "{golds[q]}"}}' if q == qs[1].question else golds[q]
    s = run(build_method("direct", {}, Resources(ds, ScriptedLLM(reply), None)), ds, tmp_path / "r", limit=3, show_progress=False)
    rows = read_predictions(tmp_path / "r" / "predictions.jsonl")
    assert [r["prediction"] for r in rows] == [q.answers[0] for q in qs] and [r["em"] for r in rows] == [1.0, 1.0, 1.0]
    assert [r["rewritten"] for r in rows] == [["json"], ["json"], []]
    assert (s["em"], s["rewritten"], s["rewritten_by"]) == (100.0, 2, {"json": 2})
    assert "rewritten          2 of 3 answers replaced by a rule (json 2)" in format_summary(s)
    q = "Who directed Jaws?"
    (a, _), = Reader(ScriptedLLM(lambda p: "Steven Spielberg directed Jaws.")).answer([q], [["Jaws\nJaws is a 1975 film."]])
    assert a == "Steven Spielberg"


def test_a_run_folder_of_an_older_method_version_is_not_resumed(tmp_path, monkeypatch):
    "run.json records the method's version (`Method.VERSION`); after a change of the method's behaviour the old folder is refused, not extended."
    from megrag_kit.method import get_method
    ds = load_dataset("demo")
    llm = ScriptedLLM(lambda p: "x")
    run(build_method("direct", {}, Resources(ds, llm, None)), ds, tmp_path / "r", limit=1, show_progress=False)
    assert json.loads((tmp_path / "r" / "run.json").read_text())["method_version"] == 1
    monkeypatch.setattr(get_method("direct"), "VERSION", 2)
    with pytest.raises(RunMismatchError, match="method_version: 1 in the folder, 2 now"):
        run(build_method("direct", {}, Resources(ds, llm, None)), ds, tmp_path / "r", limit=2, show_progress=False)
    assert len(read_predictions(tmp_path / "r" / "predictions.jsonl")) == 1


def test_a_server_that_is_down_stops_the_run_after_three_failed_questions(stub_server, no_sleep, tmp_path):
    """A server that cannot be reached failed every question, each after its retries (hours for a long run): after
    three questions in a row failed, the questions left are not asked; each gets a failed row saying why, and the same
    command asks them all once the server answers."""
    import socket
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]     # nothing listens there now
    out = tmp_path / "r"
    args = ["run", "direct", "--dataset", "demo", "--limit", "6", "--batch-size", "1", "--no-cache", "--out", str(out)]
    r = CliRunner().invoke(app, [*args, "--llm", f"openai:http://127.0.0.1:{port}/v1#m", "--llm-option", "max_retries=0"])
    assert r.exit_code == 3 and "the run stopped after 3 questions in a row failed" in r.output, r.output
    rows = read_predictions(out / "predictions.jsonl")
    assert [x["failed"].startswith("not asked: the run stopped after 3 questions in a row failed") for x in rows] == [False] * 3 + [True] * 3
    assert all("gave up after 1 attempts" in x["failed"] for x in rows[:3]) and "gave up after 1 attempts" in rows[3]["failed"]
    assert json.loads((out / "summary.json").read_text())["failed"] == 6
    stub_server.fail_next = 1000                                       # a server that answers 503 to everything
    args = [*args[:-1], str(tmp_path / "s"), "--llm", f"openai:{stub_server.url}#m", "--llm-option", "max_retries=0"]
    r = CliRunner().invoke(app, args)
    qs = [q.question for q in load_dataset("demo").questions[:6]]
    asked = lambda: sum(any(q in json.dumps(b, ensure_ascii=False) for _, b in stub_server.requests) for q in qs)
    assert r.exit_code == 3 and asked() == 3, r.output                  # three questions asked, three not
    stub_server.fail_next = 0                                          # it answers again: the same command asks all six
    r = CliRunner().invoke(app, args)
    s = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert (r.exit_code, s["n"], s["failed"], asked()) == (0, 6, 0, 6), r.output
