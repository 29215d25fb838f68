"The documentation: README.md generated from nbs/index.ipynb, the docs site, the tutorial under papermill, a browser."
import json, os, re, shutil, subprocess, sys
from pathlib import Path

import nbformat
import pytest
from conftest import SHARED, needs_shared

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import docs  # noqa: E402


def test_readme_is_generated_from_index():
    assert (ROOT / "README.md").read_text(encoding="utf-8") == docs.readme_text(), \
        "README.md and nbs/index.ipynb differ: edit the notebook, then `python tools/docs.py readme`"


def test_readme_keeps_the_test_command_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "```bash\nbash tools/test.sh\n```" in readme
    assert "bash tools/test.sh" in (ROOT / ".ci" / "run").read_text()
    for api in ("load_dataset(", "Resources(", "res.store.search(", "build_method(", "read_predictions("): assert api in readme


def test_readme_text_rules(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# t\n\nprose\n"),
        nbformat.v4.new_code_cell("#| hide\nimport secret"),
        nbformat.v4.new_code_cell("#| slow\nx = 1\nprint(x)", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="1\n"),
            nbformat.v4.new_output("stream", name="stderr", text="progress\n")]),
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)]),
        nbformat.v4.new_markdown_cell("end")])
    f = tmp_path / "index.ipynb"; nbformat.write(nb, f)
    assert docs.readme_text(f) == "# t\n\nprose\n\n```python\nx = 1\nprint(x)\n```\n\n```\n1\n```\n\n```python\nx\n```\n\n```\n1\n```\n\nend\n"


def test_check_finds_broken_links(tmp_path):
    (tmp_path / "a.html").write_text('<a href="b.html#x">b</a><img src="figures/f.png"><img src="data:image/png;base64,AA">'
                                     '<a href="https://x.org/">x</a>')
    assert docs.check(tmp_path) == ["a.html: href=b.html#x does not exist", "a.html: src=figures/f.png does not exist"]
    (tmp_path / "b.html").write_text(""); (tmp_path / "figures").mkdir(); (tmp_path / "figures" / "f.png").write_bytes(b"")
    assert docs.check(tmp_path) == []


SITE_PAGES = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb"))     # every notebook is a page


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "The whole offline site, as `tools/docs.py site` builds it (a notebook whose documented cells fail breaks the build)."
    out = tmp_path_factory.mktemp("site")
    docs.site(quarto=False, out=out)
    return out


@pytest.mark.slow
@needs_shared
def test_site_builds_every_page_and_figure(site):
    assert sorted(p.stem for p in site.glob("*.html")) == sorted(SITE_PAGES + ["explorer"])
    assert docs.check(site) == []
    core = (site / "00_core.html").read_text()
    assert '<h3 id="Dataset.fingerprint">' in core                     # show_doc rendered the API
    viz = (site / "92_viz.html").read_text()
    assert 'src="figures/megrag_trace_2wiki_full.png"' in viz and (site / "figures" / "megrag_trace_2wiki_full.png").stat().st_size > 1000
    assert '<h3 id="run_page">' in viz and "Who is the mother of Xawery" in viz     # API and the stored HTML output
    index = (site / "index.html").read_text()
    assert "The Python API" in index and "Charles Mathew" in index               # the README with its executed example
    tut = (site / "80_tutorial.html").read_text()
    assert "<details><summary>Answer</summary>" in tut and "CARA: agents on a text-rich graph" in tut and "Neighbors (fallback)" in tut
    ex = (site / "explorer.html").read_text()
    rows = [json.loads(l) for l in (ROOT / "runs" / "2wiki21-megrag-full-seam" / "predictions.jsonl").read_text().splitlines()]
    assert ex.count("<details") == len(rows) == 21


@pytest.mark.slow
@needs_shared
def test_tutorial_runs_under_papermill_with_tiny_parameters(tmp_path):
    pm = pytest.importorskip("papermill")
    out = tmp_path / "tutorial.ipynb"
    pm.execute_notebook(str(ROOT / "nbs" / "80_tutorial.ipynb"), str(out), parameters=dict(N_EVAL=3), kernel_name="python3",
                        language="python", cwd=str(ROOT), progress_bar=False)
    nb = nbformat.read(out, as_version=4)
    texts = ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    table = next(t for t in texts if "| method (first 3 questions) |" in t)
    assert len([l for l in table.splitlines() if l.startswith("| ") and "[" in l]) == 5         # five runs, each with its interval
    assert "| CARA (agents, no reader) | – (no reader) |" in table                               # CARA ranks only: no F1
    assert any("paired over 3 questions" in t for t in texts)


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.slow
@needs_shared
@pytest.mark.skipif(not _chromium(), reason="no Chromium on PATH (apt-get install chromium)")
def test_pages_open_in_a_headless_browser_without_console_errors(site):
    shots = ROOT / "_docs" / "screenshots"; shots.mkdir(parents=True, exist_ok=True)   # test artifacts (git-ignored)
    for page in ("index", "explorer"):
        png = shots / f"{page}.png"
        if png.exists(): png.unlink()
        r = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                            "--window-size=1280,900", f"--screenshot={png}", (site / f"{page}.html").as_uri()],
                           capture_output=True, text=True, timeout=120)
        console = [l for l in r.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
        assert console == [], console
        assert png.exists() and png.stat().st_size > 10_000


FOUNDATION = {"00_core": "core", "00a_jsonl": "jsonl", "01_data": "data", "02_models": "models", "03_retrievers": "retrievers",
              "04_index": "index", "05_metrics": "metrics", "06_reader": "reader", "07_method": "method", "08_baselines": "baselines",
              "90_runner": "runner", "91_report": "report", "92_viz": "viz"}


@pytest.mark.parametrize("stem,mod", FOUNDATION.items())
def test_public_api_has_a_docstring_and_a_show_doc(stem, mod):
    import importlib, inspect
    m = importlib.import_module(f"megrag_kit.{mod}")
    public = [n for n in m.__all__ if not n.isupper() and callable(getattr(m, n))]
    nb = nbformat.read(ROOT / "nbs" / f"{stem}.ipynb", as_version=4)
    shown = set(re.findall(r"^show_doc\(([\w]+)", "\n".join(c.source for c in nb.cells if c.cell_type == "code"), re.M))
    assert [n for n in public if not (getattr(m, n).__dict__.get("__doc__") if inspect.isclass(getattr(m, n)) else getattr(m, n).__doc__)] == []
    assert [n for n in public if n not in shown] == []
