"""The results home: everything an experiment produced is under `runs/`, laid out as `runs/README.md` says, and
`benchmarks/results/` holds only what a benchmark of `benchmarks/` writes."""
import re, subprocess, tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tracked(*paths) -> list[str]:
    out = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [l for l in out.splitlines() if l]


def _experiment_outs() -> set[str]:
    "Every `out` folder an experiment file names for its runs (top level and per run)."
    outs = set()
    for f in sorted((ROOT / "experiments").glob("*.toml")):
        spec = tomllib.loads(f.read_text())
        outs |= {spec["out"]} if "out" in spec else set()
        outs |= {r["out"] for r in spec.get("runs", []) if "out" in r}
    return outs


def test_every_entry_of_runs_is_a_run_or_a_folder_the_readme_names():
    readme = (ROOT / "runs" / "README.md").read_text()
    groups = {o.removeprefix("runs/").split("/")[0] for o in _experiment_outs() if o.startswith("runs/")}
    top = sorted({p.split("/")[1] for p in _tracked("runs")})
    assert {"README.md", "reports", "traces", "distill", "reproduce-demo"} <= set(top)
    for name in top:
        d = ROOT / "runs" / name
        if name == "README.md" or (d / "run.json").is_file(): continue        # a run folder
        if name.startswith("reproduce-"):                                      # a reproduction
            assert {"notebooks", "tables", "figures", "results"} <= {p.name for p in d.iterdir()}, name
            continue
        assert f"`{name}/" in readme, f"runs/{name} is neither a run folder nor a folder runs/README.md names"
        if name in (groups | {"flashrag"}) - {"distill"}:                     # a group: run folders only
            assert all((r / "run.json").is_file() for r in d.iterdir() if r.is_dir()), name


def test_every_report_an_experiment_writes_goes_to_the_results_home():
    bad = []
    for f in sorted((ROOT / "experiments").glob("*.toml")):
        for rep in tomllib.loads(f.read_text()).get("reports", []):
            if rep.get("out") and not rep["out"].startswith("runs/reports/"): bad.append((f.name, rep["out"]))
    assert not bad, bad


def test_the_benchmark_results_are_only_what_the_benchmarks_write():
    named = "\n".join(p.read_text() for p in [*(ROOT / "benchmarks").rglob("*.py"), ROOT / "benchmarks" / "README.md"])
    files = {p.split("/")[2] for p in _tracked("benchmarks/results")}
    assert "floor.md" in files and "distill.md" not in files
    orphans = [f for f in files if f not in named and re.sub(r"\.jsonl$", ".md", f) not in named]
    assert not orphans, f"benchmarks/results files no benchmark writes: {orphans}"


def test_no_second_home_for_figures():
    assert not _tracked("figures"), "figures live in runs/ (reproduce-*/figures, reports/figures, traces)"
    figs = sorted(p.name for p in (ROOT / "runs" / "reproduce-demo" / "figures").glob("*.png"))
    readme = (ROOT / "runs" / "README.md").read_text()
    assert figs and all(f"`{f}`" in readme for f in figs), [f for f in figs if f"`{f}`" not in readme]
