"""Experiments declared in files: loading checks every field, one driver runs them through the grid cell runner,
the reports name the file, finished folders are recognised (or refused), and the committed experiment files load."""
import json, re, sys
from pathlib import Path
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.experiment import ExperimentFileError, from_runs, load_experiment, run_experiment
from megrag_kit.runner import read_predictions

ROOT = Path(__file__).resolve().parents[1]

FILE = """about = "oracle and direct on the demo"
dataset = "demo"
limit = 3
out = "ROOT/runs"

[model]
llm = "py:megrag_kit.testing:ScriptedPolicy"
embedder = ""

[[runs]]
name = "demo{limit}-oracle"
method = "oracle"

[[runs]]
name = "demo{limit}-direct-p{reader_max_passages}"
method = "direct"
grid = {reader_max_passages = [1, 2]}

[[runs]]
name = "demo2-direct"
method = "direct"
limit = 2

[[steps]]
stage = "before"
command = ["python", "-c", "open('ROOT/before.txt', 'w').write('ran')"]
creates = "ROOT/before.txt"

[[reports]]
out = "ROOT/table.md"
runs = ["demo{limit}-oracle", "demo{limit}-direct-p1"]
pairs = [["demo{limit}-oracle", "demo{limit}-direct-p1"]]
"""


def write(tmp_path, text=FILE, name="e.toml") -> Path:
    f = tmp_path / name
    f.write_text(text.replace("ROOT", str(tmp_path)))
    return f


def test_load_checks_every_field_and_names_file_record_field(tmp_path):
    spec = load_experiment(write(tmp_path))
    assert [(r["name"], r["params"], r["limit"]) for r in spec.runs] == [
        ("demo3-oracle", {}, 3), ("demo3-direct-p1", {"reader_max_passages": 1}, 3),
        ("demo3-direct-p2", {"reader_max_passages": 2}, 3), ("demo2-direct", {}, 2)]
    assert load_experiment(write(tmp_path), limit=1).runs[0]["name"] == "demo1-oracle"
    f = tmp_path / "e.toml"                    # the command its reports print runs it as loaded: --limit only when given
    assert (spec.command, load_experiment(f, limit=1).command, load_experiment(f, limit=3).command) == (
        f"megrag-kit experiment run {f}", f"megrag-kit experiment run {f} --limit 1", f"megrag-kit experiment run {f}")
    bad = [(FILE.replace('method = "oracle"', 'method = "orcale"'), "e.toml: runs[0]: method: unknown method 'orcale'"),
           (FILE.replace("[1, 2]", "[0]"), "reader_max_passages must be >= 1, got 0"),
           (FILE.replace('embedder = ""', 'embedder = ""\ndevcie = "cpu"'), "e.toml: model: unknown field devcie; valid: llm"),
           (FILE.replace("limit = 3", "limit = 0"), "e.toml: limit must be an int >= 1"),
           (FILE + '\n[store]\nchunking = "sliding"\n', "e.toml: store: chunking must be truncate|window, got 'sliding'"),
           (FILE.replace('["demo{limit}-oracle", "demo{limit}-direct-p1"]]', '["demo{limit}-oracle", "demo9"]]'),
            "e.toml: reports[0]: 'demo9' is none of the experiment's runs"),
           (FILE.replace('name = "demo2-direct"', 'name = "demo3-oracle"'), "e.toml: runs[2]: run folder 'demo3-oracle' is also"),
           (FILE.replace('name = "demo{limit}-oracle"', 'name = "demo{limt}-oracle"'), "runs[0]: name: cannot fill 'demo{limt}-oracle'"),
           ("dataset = 'demo'\n", "e.toml: runs: an experiment declares at least one run"),
           ("dataset = 'demo'\nlimt = 3\n", "e.toml: unknown field limt; valid: about, dataset")]
    for text, msg in bad:
        with pytest.raises(ExperimentFileError, match=re.escape(msg)):
            load_experiment(write(tmp_path, text))


def test_one_driver_runs_resumes_reports_and_refuses_other_runs(tmp_path):
    f = write(tmp_path)
    cells = run_experiment(f, show_progress=False)
    assert [c["state"] for c in cells] == ["done"] * 4 and (tmp_path / "before.txt").read_text() == "ran"
    mf = json.loads((tmp_path / "runs" / "demo3-direct-p1" / "run.json").read_text())
    assert mf["experiment"] == str(f) and mf["params"]["reader_max_passages"] == 1 and mf["limit"] == 3
    assert len(read_predictions(tmp_path / "runs" / "demo2-direct" / "predictions.jsonl")) == 2       # the run's own limit
    md = (tmp_path / "table.md").read_text()
    assert md.startswith(f"oracle and direct on the demo\n\nExperiment: `{f}` (`megrag-kit experiment run {f}`)\n\n| run | n | F1 |")
    assert "| demo3-oracle minus demo3-direct-p1 | 3 |" in md and "demo3-direct-p2" not in md
    (tmp_path / "table.md").unlink()
    assert [c["state"] for c in run_experiment(f, show_progress=False)] == ["complete"] * 4      # nothing runs again
    assert (tmp_path / "table.md").exists()
    g = write(tmp_path, FILE.replace('method = "oracle"', 'method = "oracle"\nparams = {reader_max_passages = 1}'), "g.toml")
    assert run_experiment(g, dry_run=True, show_progress=False)[0]["state"] == "other run: params differ"
    with pytest.raises(ExperimentFileError, match=re.escape("demo3-oracle holds another run (other run: params differ)")):
        run_experiment(g, show_progress=False)


def test_a_run_may_name_the_student_a_before_step_trains(tmp_path):
    "The adapter folder a `before` step creates may be missing when the file loads; any other missing one is refused."
    run = '\n[[runs]]\nname = "demo3-student"\nmethod = "direct"\nllm = "smollm2-135m+lora:ROOT/student"\n'
    step = '\n[[steps]]\nstage = "before"\ncommand = ["python", "-c", "1"]\ncreates = "ROOT/student/manifest.json"\n'
    spec = load_experiment(write(tmp_path, FILE + run + step))
    assert spec.runs[-1]["models"].llm == f"smollm2-135m+lora:{tmp_path}/student"          # checked when it loads
    assert run_experiment(tmp_path / "e.toml", dry_run=True, show_progress=False)[-1]["state"] == "todo"
    msg = f"e.toml: runs[3]: model: LLM spec 'smollm2-135m+lora:{tmp_path}/student': adapter folder"
    with pytest.raises(ExperimentFileError, match=re.escape(msg)):
        load_experiment(write(tmp_path, FILE + run))


def test_a_step_can_write_a_run_folder_the_report_names(tmp_path):
    text = FILE + """
[[steps]]
command = ["python", "-c", "import shutil; shutil.copytree('ROOT/runs/demo3-oracle', 'ROOT/runs/demo3-copy')"]
run = "demo3-copy"
"""
    text = text.replace('runs = ["demo{limit}-oracle", "demo{limit}-direct-p1"]', 'runs = ["demo{limit}-oracle", "demo3-copy"]')
    text = text.replace('pairs = [["demo{limit}-oracle", "demo{limit}-direct-p1"]]', 'pairs = [["demo3-copy", "demo{limit}-oracle"]]')
    f = write(tmp_path, text)
    run_experiment(f, show_progress=False)
    md = (tmp_path / "table.md").read_text()
    assert "| demo3-copy | 3 |" in md and "| demo3-copy minus demo3-oracle | 3 | +0.00 [+0.00, +0.00]" in md


def test_from_runs_writes_the_file_that_finds_the_folders_complete(tmp_path):
    run_experiment(write(tmp_path), show_progress=False)
    runs = [tmp_path / "runs" / n for n in ("demo3-oracle", "demo3-direct-p2", "demo2-direct")]
    text = from_runs(runs, about="again")
    assert "limit = 3" in text and "limit = 2" in text and "[runs.params]\nreader_max_passages = 2" in text
    # the runs recorded the stand-in's model id, which is no model spec (a spec is checked when the file loads): name
    # the stand-in by its py: spec again
    assert 'llm = "scripted-policy"' in text
    text = text.replace('llm = "scripted-policy"', 'llm = "py:megrag_kit.testing:ScriptedPolicy"')
    g = write(tmp_path, text, "again.toml")
    assert [c["state"] for c in run_experiment(g, dry_run=True, show_progress=False)] == ["complete"] * 3


def test_the_cli_runs_plans_and_renders(tmp_path):
    f = write(tmp_path)
    r = CliRunner().invoke(app, ["experiment", "run", str(f), "--dry-run"])
    assert r.exit_code == 3 and r.output.split("\n")[0] == f"todo     {tmp_path / 'runs' / 'demo3-oracle'}", r.output
    r = CliRunner().invoke(app, ["experiment", "run", str(f)])
    assert r.exit_code == 0 and sum(line.startswith("done ") for line in r.output.split("\n")) == 4, r.output
    r = CliRunner().invoke(app, ["experiment", "run", str(f), "--dry-run"])        # all complete now: nothing to do
    assert r.exit_code == 0 and r.output.startswith("complete "), r.output
    r = CliRunner().invoke(app, ["experiment", "report", str(f)])
    assert r.exit_code == 0 and "| demo3-oracle minus demo3-direct-p1 | 3 |" in r.output
    r = CliRunner().invoke(app, ["experiment", "from-runs", str(tmp_path / "runs" / "demo3-oracle"), "--about", "x"])
    assert r.exit_code == 0 and 'name = "demo3-oracle"' in r.output
    r = CliRunner().invoke(app, ["experiment", "run", str(write(tmp_path, FILE.replace('"oracle"', '"orcale"')))])
    assert r.exit_code == 1 and "runs[0]: method: unknown method 'orcale'" in r.output


def test_the_ray_path_says_how_to_install_ray(tmp_path, monkeypatch):
    import megrag_kit.scale as scale
    monkeypatch.setattr(scale, "require_ray", lambda: (_ for _ in ()).throw(ImportError(f"ray is not installed: {scale.RAY_HINT}")))
    r = CliRunner().invoke(app, ["experiment", "run", str(write(tmp_path)), "--ray"])
    assert r.exit_code == 1 and "megrag_kit[ray]" in r.output, r.output


@pytest.mark.parametrize("f", sorted((ROOT / "experiments").glob("*.toml")), ids=lambda p: p.stem)
def test_the_committed_experiment_files_load(f):
    "Every committed experiment file loads: its methods, parameters, options and reports check out."
    spec = load_experiment(f)
    assert (spec.runs or spec.reproduce) and all(r["out"].parent == spec.out for r in spec.runs)
    for rep in spec.reports:
        assert rep["out"] is None or str(rep["out"]).startswith("runs/reports/")


def test_from_runs_keeps_a_parameter_that_to_dict_leaves_out_at_its_default(tmp_path):
    "MEGRAG's candidate caps are left out of `to_dict` at 0; a run that set them keeps them in the file."
    d = tmp_path / "runs" / "m"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(dict(method="megrag", dataset="demo", limit=2, seed=0, llm="smollm2-135m",
                                                embedder="minilm", device="cpu", invocations=[{"batch_size": 4}],
                                                params={"policy": "single", "shots": 0, "passage_chars": 300, "sentence_chars": 160})))
    text = from_runs([d], about="caps")
    assert "passage_chars = 300\nsentence_chars = 160" in text and "no longer has" not in text, text


def test_from_runs_asks_for_what_a_folder_that_records_no_shots_read(tmp_path):
    "A folder made before `reader_shots` / `cot_shots` existed read seven worked examples: the file asks for 7."
    from megrag_kit.ircot import IRCoTConfig
    d = tmp_path / "runs" / "i"
    d.mkdir(parents=True)
    params = {"max_steps": 2}                                           # recorded before the parameters existed
    (d / "run.json").write_text(json.dumps(dict(method="ircot", dataset="demo", limit=2, seed=0, llm="smollm2-135m",
                                                embedder="minilm", device="cpu", params=params)))
    text = from_runs([d], about="old")
    assert "reader_shots = 7" in text and "cot_shots = 7" in text, text
    (tmp_path / "old.toml").write_text(text)
    run, = load_experiment(tmp_path / "old.toml").runs
    asked = IRCoTConfig.from_dict(run["params"])
    assert (asked.reader_shots, asked.cot_shots, asked.max_steps) == (7, 7, 2)
    assert "reader_shots" not in asked.to_dict() and "cot_shots" not in asked.to_dict()       # the folder's own key


def test_a_killed_driver_ends_its_running_step(tmp_path):
    "SIGTERM to `experiment run` while a `before` step runs: the step is terminated too, not left orphaned."
    import os, signal, subprocess, time
    pid_file = tmp_path / "step.pid"
    step = ('\n[[steps]]\nstage = "before"\ncreates = "ROOT/never"\ncommand = ["python", "-c", '
            '"import os, time; open(\'ROOT/step.pid\', \'w\').write(str(os.getpid())); time.sleep(120)"]\n')
    f = write(tmp_path, FILE + step)
    driver = subprocess.Popen([sys.executable, "-m", "megrag_kit.cli", "experiment", "run", str(f)], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline: time.sleep(0.2)
    assert pid_file.exists(), "the step never started"
    step_pid = int(pid_file.read_text())
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=60) == 128 + signal.SIGTERM
    def alive(pid):
        try: os.kill(pid, 0)
        except ProcessLookupError: return False
        return True
    deadline = time.time() + 30
    while alive(step_pid) and time.time() < deadline: time.sleep(0.2)
    assert not alive(step_pid), f"step {step_pid} outlived its driver"
