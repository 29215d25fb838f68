"""Faults found by trying public bug reports of peer projects on the kit (issue 26): each case is a hand-made input
that failed before its fix. Most are checked beside the code they test (the served client in
nbs/02d_models_http.ipynb, the reader, OpenIE, the runner); the ones here drive the command line, a benchmark
script or other processes."""
import json, os, subprocess, sys, time
from pathlib import Path
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.data import load_dataset
from megrag_kit.runner import read_predictions


def _questions(path: Path, qs: list[tuple[str, str, str]]):
    "A 2Wiki-style questions file: (id, question, answer) each with a two-paragraph context naming the answer."
    recs = [dict(_id=i, type="compositional", question=q, answer=a,
                 context=[[f"{a} (place)", [f"{a} is a place in a country."]], ["Other", ["Something else entirely."]]],
                 supporting_facts=[[f"{a} (place)", 0]]) for i, q, a in qs]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recs))
    return path


# -- two question files of the same name (graphrag #886)

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


