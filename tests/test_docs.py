"The documentation: README.md generated from nbs/index.ipynb, the docs site, the tutorial under papermill, a browser."
import os, re, sys
from pathlib import Path

import nbformat
import pytest


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import docs  # noqa: E402


def test_readme_is_generated_from_index():
    assert (ROOT / "README.md").read_text(encoding="utf-8") == docs.readme_text(), \
        "README.md and nbs/index.ipynb differ: edit the notebook, then `python tools/docs.py readme`"


def test_readme_keeps_the_test_command_ci_runs():
    "The README's second command is what CI runs; the Python API example lives in the guide (nbs/guide.ipynb)."
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "```bash\nbash tools/test.sh\n```" in readme
    assert "```bash\nbash tools/setup.sh && .venv/bin/megrag-kit reproduce --profile demo\n```" in readme
    assert "bash tools/test.sh" in (ROOT / ".ci" / "run").read_text()
    guide = docs.readme_text(ROOT / "nbs" / "guide.ipynb")
    for api in ("load_dataset(", "Resources(", "res.store.search(", "build_method(", "read_predictions("): assert api in guide


def test_the_tests_read_the_data_folder_the_kit_reads(tmp_path):
    "`$MEGRAG_KIT_DATA` (CI's pass without data sets it to a missing folder), else ../shared/data beside the checkout."
    from conftest import shared_dir
    assert shared_dir({"MEGRAG_KIT_DATA": str(tmp_path)}) == tmp_path
    assert shared_dir({"MEGRAG_KIT_DATA": ""}) == shared_dir({}) == ROOT.parent / "shared" / "data"


README_MAX_LINES = 200


def test_readme_is_short_and_points_to_the_pages_that_hold_the_rest():
    """Issue 37: the README says what the kit is, the two commands, one result table, the student, the speed (issue
    36 asks for its figures there) and where to read on."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    assert [l for l in lines if l.startswith("## ")] == ["## Two commands", "## One result: the first 100 2Wiki questions",
                                                          "## The distilled student: MEGRAG's Tables 1 and 3 at 135M",
                                                          "## Speed on this CPU", "## Where to read on"]
    assert len([l for l in lines if l.startswith("|---")]) == 1                         # one table
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):                  # every link resolves on GitHub
        if not re.match(r"^(https?|mailto):", target): assert (ROOT / target).exists(), target
    for page in ("quickstart", "guide", "results", "80_tutorial"): assert f"](nbs/{page}.ipynb)" in readme
    assert {"guide", "results"} <= set(docs.STORED) and all(
        p in docs.SECTIONS[0][1] for p in ("guide", "results"))                        # pages of the site's Start


def test_docs_script_runs_itself_again_under_the_kits_python(tmp_path, monkeypatch, capsys):
    "Started by a Python without the docs packages: re-executed under .venv/bin/python, or told what to run (exit 2)."
    venv = tmp_path / ".venv" / "bin" / "python"
    venv.parent.mkdir(parents=True); venv.write_text("")
    calls = []
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    monkeypatch.setattr(docs, "_missing", lambda cmd: ["execnb"] if cmd == "site" else [])
    monkeypatch.setattr(docs.os, "execv", lambda exe, args: calls.append((exe, args)))
    monkeypatch.setattr(docs.sys, "executable", "/usr/bin/python3")
    monkeypatch.delenv("MEGRAG_DOCS_REEXEC", raising=False)
    docs.ensure_env(["readme"]); assert calls == []                                   # nothing missing: runs as is
    docs.ensure_env(["site", "--only", "index"])
    assert calls == [(str(venv), [str(venv), str(Path(docs.__file__).resolve()), "site", "--only", "index"])]
    assert os.environ.pop("MEGRAG_DOCS_REEXEC") == "1"                                 # once only
    monkeypatch.setenv("MEGRAG_DOCS_REEXEC", "1")                                      # the venv lacks them too
    with pytest.raises(SystemExit) as e: docs.ensure_env(["site"])
    assert e.value.code == 2 and ".venv/bin/python tools/docs.py site" in capsys.readouterr().err
    venv.unlink(); monkeypatch.delenv("MEGRAG_DOCS_REEXEC")                            # no .venv at all
    with pytest.raises(SystemExit): docs.ensure_env(["site"])
    assert "cannot import execnb" in capsys.readouterr().err and len(calls) == 1


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


def test_every_notebook_names_its_kernel_and_language():
    "papermill (the README's way to run a notebook) reads the language from the kernelspec: 'No language found' without it."
    bad = [p.name for p in sorted((ROOT / "nbs").glob("*.ipynb"))
           if nbformat.read(p, as_version=4).metadata.get("kernelspec", {}).get("language") != "python"]
    assert bad == []


def test_page_md_rules(tmp_path):
    "One notebook as a site page: hidden cells dropped, show_doc as an API entry, outputs kept, links to pages and the API."
    import base64
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 20).decode()
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# T\n\nSee `Dataset`, `nbs/01_data.ipynb` and [core](00_core.ipynb); $x^2$."),
        nbformat.v4.new_code_cell("#| default_exp core"),
        nbformat.v4.new_code_cell("#| hide\nsecret = 1"),
        nbformat.v4.new_code_cell("#| slow\nprint(1)", outputs=[nbformat.v4.new_output("stream", name="stdout", text="1\n"),
                                                              nbformat.v4.new_output("stream", name="stderr", text="bar\n")]),
        nbformat.v4.new_code_cell("show_doc(Dataset.fingerprint)", outputs=[nbformat.v4.new_output(
            "execute_result", data={"text/markdown": "ignored"}, execution_count=1)]),
        nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output("display_data", data={"image/png": png})]),
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("error", ename="E", evalue="v", traceback=[])])])
    ids = {"Dataset.fingerprint": "megrag_kit.core.Dataset.fingerprint"}
    refs = {"Dataset": "megrag_kit.core.Dataset"}
    with pytest.raises(RuntimeError, match=r"nbs/t.ipynb cell 6: its stored output is an error \(E: v\)"):
        docs.page_md("t", nb, ids, refs, {"00_core", "01_data"}, tmp_path)
    nb.cells.pop()
    md = docs.page_md("t", nb, ids, refs, {"00_core", "01_data"}, tmp_path)
    assert "See [`Dataset`][megrag_kit.core.Dataset], [`nbs/01_data.ipynb`](01_data.md) and [core](00_core.md); $x^2$." in md
    assert "secret" not in md and "default_exp" not in md and "bar" not in md and "ignored" not in md and "#|" not in md
    assert "```python\nprint(1)\n```" in md and "```text\n1\n```" in md
    assert "::: megrag_kit.core.Dataset.fingerprint\n    options:" in md and "show_doc(" not in md
    assert '<img src="t_files/cell5_0.png"' in md and (tmp_path / "t_files" / "cell5_0.png").read_bytes().startswith(b"\x89PNG")


def test_api_ids_refuse_an_unknown_name():
    nb = {"cells": [{"cell_type": "code", "source": "#| default_exp core", "outputs": []},
                    {"cell_type": "code", "source": "show_doc(NoSuchThing)", "outputs": []}]}
    with pytest.raises(ValueError, match="nbs/x.ipynb: show_doc\\(NoSuchThing\\): megrag_kit defines no NoSuchThing"):
        docs.api_ids({"x": nb})
    nb["cells"][1]["source"] = "show_doc(Dataset.fingerprint)"
    assert docs.api_ids({"x": nb}) == {"x": {"Dataset.fingerprint": "megrag_kit.core.Dataset.fingerprint"}}


def test_a_broken_link_fails_the_build(tmp_path):
    "MkDocs runs --strict: a page that links to no page is a warning, and a warning fails `tools/docs.py site`."
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.md").write_text("# t\n\n[x](missing.md)\n")
    warn = docs.mkdocs_build(tmp_path / "src", tmp_path / "site", ["index"])
    assert any("contains a link 'missing.md'" in w for w in warn), warn
    (tmp_path / "src" / "index.md").write_text("# t\n\nfine, $x^2$\n")
    assert docs.mkdocs_build(tmp_path / "src", tmp_path / "site", ["index"]) == []


def test_the_tutorial_is_a_lesson_that_needs_no_data():
    nb = nbformat.read(ROOT / "nbs" / "80_tutorial.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.metadata.get("tags") for c in code][0] == ["parameters"]             # papermill's -p lands after it
    assert not [c.source for c in code if re.search(r"^#\|\s*data", c.source, re.M)]   # runs on a fresh clone
    text = "\n".join(c.source for c in nb.cells)
    assert "## Learning objectives" in text and text.count("checkpoint(") >= 4
    for m in ("native RAG", "MEGRAG", "EviReform", "CARA"): assert f'pipeline("{m}"' in text   # a diagram per method
    ex = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("**Exercise")]
    assert len(ex) == 4
    for i in ex:                          # an empty cell to work in, then the answer folded away
        assert nb.cells[i + 1].cell_type == "code" and nb.cells[i + 1].source.strip().startswith("#") and \
            len(nb.cells[i + 1].source.strip().splitlines()) == 1
        assert nb.cells[i + 2].source.startswith("<details><summary>Answer</summary>")
    outs = [o for c in code for o in c.get("outputs", [])]
    assert any("image/png" in o.get("data", {}) for o in outs)                      # the evaluation plot, stored
    printed = "".join(o.get("text", "") for o in outs)
    assert "Chain@2 1.0" in printed and "<- gold" in printed                          # the question where the chain succeeds


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "The whole site, as `python tools/docs.py site` builds it (a notebook cell that fails, a warning or a broken link fails it)."
    out = tmp_path_factory.mktemp("site")
    res = docs.site(out=out)
    assert res["warnings"] == [] and res["broken"] == [], res
    return out


@pytest.mark.slow
def test_site_builds_every_page_with_outputs_api_math_and_figures(site):
    assert sorted(p.stem for p in site.glob("*.html")) == sorted(SITE_PAGES + ["404", "explorer", "explorer-standalone", "figures"])
    assert docs.check(site) == []
    core = (site / "00_core.html").read_text()
    assert 'id="megrag_kit.core.Dataset.fingerprint"' in core                       # the API entry, from the docstring
    assert 'href="00_core.html#megrag_kit.core.Dataset"' in (site / "01_data.html").read_text()   # a cross-link
    for page in ("10_megrag", "20_evireform", "30_cara", "51_megrag_figures", "80_tutorial", "92_viz"):
        assert 'class="nb-output' in (site / f"{page}.html").read_text(), f"{page}: no stored output shown"
    assert 'class="arithmatex"' in (site / "10_megrag.html").read_text()
    figs = sorted(p.name for p in (ROOT / "runs" / "reproduce-demo" / "figures").glob("*.png"))
    fig_page = (site / "figures.html").read_text()
    assert figs and all(f'src="figures/{f}"' in fig_page and (site / "figures" / f).stat().st_size > 1000 for f in figs)
    assert (site / "51_megrag_figures.html").read_text().count("<img ") >= 5         # the reproduction's figures, inline
    ex = (site / "explorer.html").read_text()
    assert ex.count('class="mkg-question"') == 21 and ex.count('<svg class="mkg"') == 21
    assert (site / "search" / "search_index.json").stat().st_size > 10_000
    assert (site / "assets" / "mathjax" / "MathJax.js").exists()
    for f in site.glob("*.html"):      # nothing is fetched from elsewhere: no external script, style or font
        assert not re.findall(r'<(?:script|link)[^>]+(?:src|href)="https?://', f.read_text()), f.name


@pytest.mark.slow
def test_tutorial_runs_under_papermill_without_data(tmp_path):
    pm = pytest.importorskip("papermill")
    out = tmp_path / "tutorial.ipynb"
    env = os.environ.get("MEGRAG_KIT_DATA")
    os.environ["MEGRAG_KIT_DATA"] = str(tmp_path / "no-data")                      # a fresh clone: no benchmark data
    try:
        pm.execute_notebook(str(ROOT / "nbs" / "80_tutorial.ipynb"), str(out), parameters=dict(N_EVAL=2, QUESTION=2),
                            kernel_name="python3", cwd=str(ROOT / "nbs"), progress_bar=False)
    finally:
        if env is None: os.environ.pop("MEGRAG_KIT_DATA")
        else: os.environ["MEGRAG_KIT_DATA"] = env
    nb = nbformat.read(out, as_version=4)
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    texts = ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/markdown", "")) for o in outs]
    table = next(t for t in texts if "| method (first 2 questions of its run) |" in t)
    assert len([l for l in table.splitlines() if l.startswith("| ") and "[" in l]) == 5
    assert any("Where was the husband of Octavie Coudreau born?" in t for t in texts)      # QUESTION=2 reached part 1
    assert any("image/png" in o.get("data", {}) for o in outs)


@pytest.mark.slow
@pytest.mark.skipif(docs.chromium() is None, reason="no chromium and chromedriver on PATH (apt-get install -y chromium chromium-driver)")
def test_the_site_in_a_headless_browser(site):
    "Served on 127.0.0.1 and opened in Chromium: math typeset, every image loads, no local 404, the explorer redraws."
    pytest.importorskip("selenium", reason="selenium is not installed (it is in the dev extra)")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    pages = sorted(p.name for p in site.glob("*.html") if p.name != "404.html")
    with docs.Served(site) as s:
        d = docs.browser()
        try:
            links, math = set(), {}
            for page in pages:
                d.get(s.url + page)
                m = docs.wait_for_math(d)
                assert m["typeset"] >= m["formulas"], f"{page}: {m['formulas']} formulas, {m['typeset']} typeset"
                math[page] = m["formulas"]
                broken = d.execute_script("return Array.from(document.images).filter(i => i.getAttribute('src') && "
                                          "!(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'))")
                assert broken == [], f"{page}: images that did not load: {broken}"
                external = d.execute_script("return performance.getEntriesByType('resource').map(e => e.name)"
                                            ".filter(n => !n.startsWith(location.origin))")
                assert external == [], f"{page} fetched from elsewhere: {external}"
                links |= {h.split("#")[0] for h in d.execute_script(
                    "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)") if h.startswith(s.url)}
            assert math["10_megrag.html"] > 0 and math["80_tutorial.html"] > 0
            import urllib.request
            for url in sorted(links): urllib.request.urlopen(url).read()             # every local link answers
            assert s.missing == [], f"404s: {s.missing}"
            d.get(s.url + "explorer.html")
            shown = lambda: d.execute_script("var q = Array.from(document.querySelectorAll('.mkg-question'))"
                                             ".filter(e => !e.hidden); return q.map(e => e.dataset.i + ':' + e.querySelector('svg').textContent.length)")
            first = shown()
            assert len(first) == 1 and first[0].startswith("0:")
            Select(d.find_element(By.ID, "mkg-pick")).select_by_index(11)
            second = shown()
            assert len(second) == 1 and second[0].startswith("11:") and second != first
            assert d.find_element(By.CSS_SELECTOR, '.mkg-question[data-i="11"] svg').is_displayed()
            assert d.find_element(By.ID, "mkg-count").text == "12 of 21"
        finally:
            d.quit()


FOUNDATION = {"00_core": "core", "00a_jsonl": "jsonl", "01_data": "data", "02_models": "models",
              "02a_models_cache": "models_cache", "02b_models_chat": "models_chat", "02c_models_hf": "models_hf",
              "02d_models_http": "models_http", "02e_models_embed": "models_embed", "02f_models_spec": "models_spec",
              "02g_models_llamacpp": "models_llamacpp", "02h_models_ct2": "models_ct2", "03_retrievers": "retrievers",
              "04_index": "index", "04a_index_views": "index_views", "04b_index_openie": "index_openie",
              "05_metrics": "metrics", "06_reader": "reader", "07_method": "method", "08_baselines": "baselines",
              "90_runner": "runner", "91_report": "report", "92_viz": "viz"}


# a method (or tool) module split into parts: each part's API is checked as the foundation's is
SPLIT_METHOD = {"20_evireform": "evireform", "20a_evireform_propositions": "evireform_propositions",
                "20b_evireform_signals": "evireform_signals", "20c_evireform_policy": "evireform_policy",
                "20d_evireform_summary": "evireform_summary", "40_distill": "distill",
                "40a_distill_teachers": "distill_teachers", "40b_distill_collect": "distill_collect",
                "40c_distill_train": "distill_train", "40d_distill_hops": "distill_hops"}


STAND_INS = {"02i_testing": "testing"}     # the stand-ins of the model interfaces that the tests share


@pytest.mark.parametrize("stem,mod", {**FOUNDATION, **SPLIT_METHOD, **STAND_INS}.items())
def test_public_api_has_a_docstring_and_a_show_doc(stem, mod):
    import importlib, inspect
    m = importlib.import_module(f"megrag_kit.{mod}")
    public = [n for n in m.__all__ if not n.isupper() and callable(getattr(m, n))]
    nb = nbformat.read(ROOT / "nbs" / f"{stem}.ipynb", as_version=4)
    shown = set(re.findall(r"^show_doc\(([\w]+)", "\n".join(c.source for c in nb.cells if c.cell_type == "code"), re.M))
    assert [n for n in public if not (getattr(m, n).__dict__.get("__doc__") if inspect.isclass(getattr(m, n)) else getattr(m, n).__doc__)] == []
    assert [n for n in public if n not in shown] == []


def _md_table(lines: list[str], start: int) -> list[str]:
    "The Markdown table (its consecutive `|` lines) that begins at or after line `start`."
    i = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    j = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
    return lines[i:j]


TABLE_PAGES = ("README.md", "nbs/guide.ipynb", "nbs/results.ipynb")   # where the README's former tables now live


def _doc_lines(name: str) -> list[str]:
    "README.md as committed, or a page notebook's text as the README generator gives it."
    f = ROOT / name
    return (f.read_text(encoding="utf-8") if f.suffix == ".md" else docs.readme_text(f)).splitlines()


@pytest.mark.parametrize("name", TABLE_PAGES)
def test_readme_tables_equal_the_files_the_reproduction_writes(name):
    """Each table of the README, the guide or the results page introduced by
    `(table: `runs/reproduce-demo/tables/NAME.md`)` is that file's table, row for row; the README shows the 2Wiki-100
    table, the results page it and its paired differences."""
    lines = _doc_lines(name)
    marks = [(i, m) for i, l in enumerate(lines) for m in re.findall(r"\(table: `(runs/reproduce-demo/tables/[\w.-]+\.md)`\)", l)]
    want = {"README.md": {"runs/reproduce-demo/tables/megrag_2wiki100.md"},
            "nbs/results.ipynb": {"runs/reproduce-demo/tables/megrag_2wiki100.md",
                                  "runs/reproduce-demo/tables/megrag_2wiki100_paired.md"}}.get(name, set())
    assert want <= {m for _, m in marks}
    for i, m in marks:
        assert _md_table(lines, i + 1) == _md_table((ROOT / m).read_text(encoding="utf-8").splitlines(), 0), m
    if want:
        w2 = _md_table(lines, next(i for i, m in marks if m.endswith("megrag_2wiki100.md")) + 1)
        assert any("25.59 [18.00, 33.81]" in l and "runs/2wiki100-megrag-cascade" in l for l in w2)  # the newest MEGRAG run
    assert "+9.80" not in "\n".join(lines) and "17.98" not in "\n".join(lines)                    # no number without a source
