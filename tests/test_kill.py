"""SIGKILL in the middle of the kit's long commands: what was written survives, a torn line is dropped, and the same
command finishes the work, every record exactly once."""
import json, os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.jsonl import read_jsonl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

CLI = [sys.executable, "-c", "from megrag_kit.cli import main; main()"]

PLUGIN = textwrap.dedent('''
    "A slow toy method with big rows (so that a kill often lands mid-line)."
    import time
    from megrag_kit.method import Answer, Method, register

    @register
    class SlowToy(Method):
        name = "_slow_toy"
        def answer(self, questions):
            time.sleep(0.15)
            return [Answer(q.answers[0], list(q.gold_pids), trace={"pad": "x" * 200_000}) for q in questions]
''')


def _env(tmp_path):
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "MEGRAG_KIT_CACHE": str(tmp_path / "cache")}


def _kill_when(proc, path: Path, lines: int, timeout: float = 600):
    "SIGKILL `proc` as soon as `path` holds at least `lines` newlines (or fail after `timeout` seconds: generous, as a loaded machine imports torch slowly)."
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and path.read_bytes().count(b"\n") >= lines: break
        if proc.poll() is not None: pytest.fail(f"finished before the kill: {proc.stdout.read()[-2000:]}")
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL); proc.wait()


def test_sigkill_during_run_then_the_same_command_finishes(tmp_path):
    (tmp_path / "slow_toy_plugin.py").write_text(PLUGIN)
    out = tmp_path / "run"
    cmd = CLI + ["run", "_slow_toy", "--plugin", "slow_toy_plugin", "--dataset", "demo", "--limit", "12", "--batch-size", "1",
                 "--out", str(out)]
    env = _env(tmp_path)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _kill_when(p, out / "predictions.jsonl", 4)
    before = (out / "predictions.jsonl").read_bytes().count(b"\n")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{before} of 12 questions already answered" in r.stdout
    ids = [json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert ids == [q.qid for q in load_dataset("demo").questions[:12]]            # each once, in order, none glued
    s = json.loads((out / "summary.json").read_text())
    assert s["n"] == 12 and s["em"] == 100.0 and [i["limit"] for i in s["manifest"]["invocations"]] == [12, 12]


def test_sigkill_during_index_then_the_same_command_finishes(tmp_path, stub_server):
    "OpenIE over the demo corpus from a served model (the stub), killed mid-way: finished passages are kept, none twice."
    def respond(body):
        time.sleep(0.01)
        title = body["messages"][-1]["content"].split("\n")[1]
        return json.dumps({"triples": [[title, "has title", title + " " + "x" * 3000]]})   # long lines: a kill often tears one
    stub_server.respond = respond
    cmd = CLI + ["index", "--dataset", "demo", "--views", "triple", "--llm", f"openai:{stub_server.url}#openie", "--device", "cpu"]
    env = _env(tmp_path)
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    while not list((tmp_path / "cache").glob("stores/*/triples/*.jsonl")) and time.time() - t0 < 600: time.sleep(0.01)
    (f,) = list((tmp_path / "cache").glob("stores/*/triples/*.jsonl"))
    _kill_when(p, f, 40)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = read_jsonl(f)
    n = len(load_dataset("demo").corpus)
    assert sorted(x["pid"] for x in rows) == list(range(n))                      # every passage once, none lost, none twice
    assert all(x["error"] is None for x in rows) and f.read_bytes().endswith(b"\n")
