"""The documentation: README.md from nbs/index.ipynb, and the site in _docs/ (MkDocs with the Material theme).

Any Python may start it: when the command's packages (execnb, nbdev, mkdocs, ...) do not import, it runs itself
again under the kit's environment `.venv/bin/python` when that exists, and otherwise says what to run (exit 2).

    python tools/docs.py readme            write README.md from nbs/index.ipynb
    python tools/docs.py readme --check    exit 1 (and say where) when README.md differs from what index.ipynb gives
    python tools/docs.py site              build the site into _docs/ (git-ignored); exit 1 on a broken page
    python tools/docs.py serve [--port N]  serve _docs/ on 127.0.0.1 (default port 8000)
    python tools/docs.py screenshots       PNG screenshots of the main pages (headless Chromium) into docs/screenshots/

The site is built in three steps, each kept in _build/ (git-ignored) so that a second build redoes only what changed:
1. Every notebook of nbs/ gets its outputs. The notebooks are committed without most outputs, so each is executed
   the way `nbdev_test` runs it (execnb; cells flagged `slow` never run, cells flagged `data` only when the benchmark
   data is there) and the executed copy is cached in _build/exec/ under a key of the notebook, the package source and
   the data flag. Three kinds are not executed: nbs/index.ipynb (the README), nbs/guide.ipynb, nbs/results.ipynb and
   nbs/80_tutorial.ipynb are shown with their stored outputs (the guide's Python API example and the lesson as run),
   and the experiment notebooks nbs/5x_*.ipynb are shown as the committed reproduction executed them
   (runs/reproduce-demo/notebooks/), so their pages carry its figures.
2. Each executed notebook becomes one Markdown page in _build/docs/: markdown cells as they are (math in `$...$` and
   `$$...$$`), code cells as code blocks followed by their outputs (text, tables, HTML, images written beside the
   page), `#| hide` cells left out, and each `show_doc(X)` cell replaced by the API entry of `X` rendered from its
   docstring by mkdocstrings. A name in backticks that has an API entry somewhere becomes a link to it, and
   `nbs/NAME.ipynb` a link to its page. Added pages: the figures of the committed reproduction and the explorer
   (`megrag_kit.viz.explore_html` of the committed MEGRAG run).
3. MkDocs (`mkdocs build --strict`, config mkdocs.yml) renders the pages with the Material theme, its offline search,
   and MathJax copied from the `jupyter-server-mathjax` package into the site: nothing is fetched when a page is
   viewed. Any MkDocs warning (a broken link, an unresolved API reference) fails the build, and so does a local
   link of a built page that points at no file (`check`).

The README is the readme notebook's markdown cells as they are, each shown code cell as a ```python block and its
stored text outputs as a plain block, cells joined by one blank line, so README.md and index.ipynb cannot drift
(tests/test_docs.py checks).
"""
from __future__ import annotations
import argparse, hashlib, json, os, re, shutil, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS, DOCS, BUILD = ROOT / "nbs", ROOT / "_docs", ROOT / "_build"
STORED = {"index", "guide", "results", "80_tutorial"}  # shown with the outputs committed in the notebook
REPRODUCTION = ROOT / "runs" / "reproduce-demo"        # the committed `megrag-kit reproduce --profile demo`
PUBLISHED = REPRODUCTION / "figures"                   # its figures (PNG, SVG and the CSV of each)
EXPLORER_RUN = ROOT / "runs" / "2wiki21-megrag-full-seam"
_HIDE = re.compile(r"^#\|\s*(hide|include:\s*false|echo:\s*false)\s*$", re.M)
SECTIONS = [("Start", ["index", "quickstart", "guide", "results", "80_tutorial", "explorer", "figures"]),
            ("Foundation", r"^0\d"), ("Methods", r"^[1-4]\d"), ("Experiments", r"^5\d"), ("Tools", r"^9\d")]


def _src(cell) -> str: return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _text(x) -> str: return "".join(x) if isinstance(x, list) else x


def _text_outputs(cell) -> list[str]:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            if o.get("name") == "stdout": out.append(_text(o["text"]))
        elif "text/markdown" in o.get("data", {}): continue
        elif "text/plain" in o.get("data", {}) and not any(k.startswith("image/") or k == "text/html" for k in o["data"]):
            out.append(_text(o["data"]["text/plain"]))
    return [t.rstrip("\n") for t in out if t.strip()]


def readme_text(nb_path=NBS / "index.ipynb") -> str:
    """README.md as the readme notebook gives it: markdown cells verbatim; code cells without `#| hide` (or
    `include: false`, `echo: false`) as ```python blocks with their `#|` directives dropped, then their stored text
    outputs as plain blocks; cells joined by a blank line, one final newline."""
    nb = json.loads(Path(nb_path).read_text(encoding="utf-8"))
    parts = []
    for c in nb["cells"]:
        s = _src(c).strip("\n")
        if c["cell_type"] == "markdown": parts.append(s)
        elif c["cell_type"] == "code" and not _HIDE.search(s):
            code = "\n".join(l for l in s.splitlines() if not l.startswith("#|")).strip("\n")
            if code: parts.append(f"```python\n{code}\n```")
            parts += [f"```\n{t}\n```" for t in _text_outputs(c)]
    return "\n\n".join(p for p in parts if p) + "\n"


def readme(check: bool = False) -> int:
    want, f = readme_text(), ROOT / "README.md"
    if not check:
        f.write_text(want, encoding="utf-8"); print(f"wrote {f.relative_to(ROOT)} from nbs/index.ipynb"); return 0
    have = f.read_text(encoding="utf-8") if f.exists() else ""
    if have == want: print("README.md matches nbs/index.ipynb"); return 0
    import difflib
    sys.stdout.writelines(list(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "README.md",
                                                    "from nbs/index.ipynb"))[:60])
    print("README.md differs from nbs/index.ipynb: edit the notebook, then `python tools/docs.py readme`"); return 1


# ---- 1. outputs ---------------------------------------------------------------------------------------------------
def _has_data() -> bool:
    "Whether the benchmark data is there (the `data` cells then run), as tools/test.sh decides."
    try:
        from megrag_kit.data import shared_data_dir
        d = shared_data_dir()
        return bool(d) and (Path(d) / "multihop").is_dir()
    except Exception: return False


def _key(nb_file: Path, data: bool) -> str:
    h = hashlib.sha256(nb_file.read_bytes())
    for f in sorted((ROOT / "megrag_kit").rglob("*.py")): h.update(f.name.encode()); h.update(f.read_bytes())
    h.update(b"data" if data else b"nodata")
    return h.hexdigest()


def execute(nb_file: Path, data: bool) -> dict:
    """`nb_file` executed as `nbdev_test` runs it (cells flagged `slow` or `eval: false` skipped, `data` cells only
    when `data`), as a notebook dict with outputs. `RuntimeError` naming the notebook and the failing cell."""
    from execnb.shell import CaptureShell
    from fastcore.xtras import working_directory
    from nbdev.process import NBProcessor
    from nbdev.frontmatter import FrontmatterProc
    skip = {"slow"} | (set() if data else {"data"})
    nb = NBProcessor(nb_file, procs=FrontmatterProc, process=True).nb

    def no_eval(cell):
        if cell.cell_type != "code": return True
        if "nbdev_export(" in cell.source: return True
        d = getattr(cell, "directives_", {}) or {}
        return d.get("eval:", [""])[0].lower() == "false" or bool(skip & d.keys())
    os.environ["IN_TEST"] = "1"
    k = CaptureShell(nb_file)
    try:
        with working_directory(nb_file.parent): k.run_all(nb, exc_stop=True, preproc=no_eval)
    except Exception as e:
        raise RuntimeError(f"{nb_file.relative_to(ROOT)}: a cell failed while the docs executed it:\n{k.prettytb(fname=nb_file)}") from e
    raw = json.loads(nb_file.read_text(encoding="utf-8"))
    done = [c for c in nb.cells]
    for c, d in zip(raw["cells"], done):                    # the original cells (directives intact) with the outputs
        if c["cell_type"] == "code": c["outputs"] = [dict(o) for o in d.get("outputs", [])]
    return raw


def _cached(f: Path, data: bool):
    "The cached executed copy of notebook `f`, or `None` when it is missing or stale."
    cached, keyf = BUILD / "exec" / f.name, BUILD / "exec" / f"{f.stem}.key"
    if cached.exists() and keyf.exists() and keyf.read_text() == _key(f, data): return json.loads(cached.read_text(encoding="utf-8"))
    return None


def execute_into_cache(files: list[Path], data: bool, log=print):
    "Execute each notebook of `files` (`execute`) and cache its executed copy in _build/exec/ under its key."
    (BUILD / "exec").mkdir(parents=True, exist_ok=True)
    for f in files:
        t = time.time(); log(f"executing {f.relative_to(ROOT)} ...")
        nb = execute(f, data)
        (BUILD / "exec" / f.name).write_text(json.dumps(nb), encoding="utf-8")
        (BUILD / "exec" / f"{f.stem}.key").write_text(_key(f, data))
        log(f"  {time.time() - t:.1f} s")


def outputs(stems=None, log=print) -> dict[str, dict]:
    """Each notebook (or those named in `stems`) with its outputs, by stem: stored, reproduced, or executed. The
    notebooks whose cached copy is missing or stale are executed in one child process (`tools/docs.py execute`), so
    what they import or set stays out of the caller. `RuntimeError` when one of them fails."""
    data = _has_data()
    files = [f for f in sorted(NBS.glob("*.ipynb")) if stems is None or f.stem in stems]
    rep = lambda f: REPRODUCTION / "notebooks" / f.name
    run = [f for f in files if f.stem not in STORED and not (re.match(r"^5\d_", f.stem) and rep(f).exists())
           and _cached(f, data) is None]
    if run:
        r = subprocess.run([sys.executable, __file__, "execute", *map(str, run)] + (["--data"] if data else []), cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        if r.returncode != 0: raise RuntimeError(f"executing the notebooks for the docs failed (exit {r.returncode}; see above)")
    out = {}
    for f in files:
        if f.stem in STORED: out[f.stem] = json.loads(f.read_text(encoding="utf-8"))
        elif re.match(r"^5\d_", f.stem) and rep(f).exists(): out[f.stem] = json.loads(rep(f).read_text(encoding="utf-8"))
        else: out[f.stem] = _cached(f, data)
    return out


# ---- 2. pages -----------------------------------------------------------------------------------------------------
def _directives(src: str) -> dict:
    d = {}
    for l in src.splitlines():
        m = re.match(r"^#\|\s*([\w-]+)(:)?\s*(.*)$", l)
        if m: d[m.group(1)] = m.group(3).strip().lower() if m.group(2) else True
    return d


def _default_exp(nb: dict) -> str | None:
    for c in nb["cells"]:
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", _src(c), re.M) if c["cell_type"] == "code" else None
        if m: return m.group(1)
    return None


def api_ids(nbs: dict[str, dict]) -> dict[str, dict[str, str]]:
    """For each page, `{name shown with show_doc: mkdocstrings identifier}` (`Dataset.fingerprint` ->
    `megrag_kit.core.Dataset.fingerprint`), resolved in the package index (megrag_kit/_modidx.py). `ValueError` for a
    `show_doc` of a name the package does not define."""
    import importlib
    syms = importlib.import_module("megrag_kit._modidx").d["syms"]
    out = {}
    for stem, nb in nbs.items():
        mod, ids = _default_exp(nb), {}
        for c in nb["cells"]:
            if c["cell_type"] != "code": continue
            for name in re.findall(r"^show_doc\(([\w.]+)\)\s*$", _src(c), re.M):
                want = [f"megrag_kit.{mod}.{name}"] if mod else []
                found = [k for k in want if k in syms.get(f"megrag_kit.{mod}", {})] or \
                        [k for m in syms.values() for k in m if k.endswith("." + name)]
                if not found: raise ValueError(f"nbs/{stem}.ipynb: show_doc({name}): megrag_kit defines no {name}")
                ids[name] = found[0]
        out[stem] = ids
    return out


def _link_names(md: str, refs: dict[str, str], pages: set[str]) -> str:
    "Backticked API names -> autorefs links, `nbs/NAME.ipynb` -> page links; fenced code and existing links untouched."
    parts = re.split(r"(^```.*?^```)", md, flags=re.M | re.S)
    for i in range(0, len(parts), 2):
        def sub(m):
            name = m.group(1)
            if name in refs: return f"[`{name}`][{refs[name]}]"
            pm = re.fullmatch(r"(?:\.\./)?(?:nbs/)?([\w-]+)\.ipynb", name)
            if pm and pm.group(1) in pages: return f"[`{name}`]({pm.group(1)}.md)"
            return m.group(0)
        parts[i] = re.sub(r"(?<![\[`])`([^`\n]+)`(?![`\]])", sub, parts[i])
        parts[i] = re.sub(r"\]\((?:\.\./nbs/|nbs/)?([\w-]+)\.(?:ipynb|html)(#[^)]*)?\)",
                          lambda m: f"]({m.group(1)}.md{m.group(2) or ''})" if m.group(1) in pages else m.group(0), parts[i])
    return "".join(parts)


def _figure_links(md: str, out: Path) -> str:
    "Copy each local image or file a markdown cell links to (`../runs/traces/x.png`) under out/, and point the link there."
    def fix(m):
        link = m.group(2)
        if re.match(r"^(https?:|data:|#|mailto:)", link) or link.endswith((".md", ".ipynb")) or "/" not in link and "." not in link:
            return m.group(0)
        for base in (NBS, ROOT):
            f = (base / link).resolve()
            if f.is_file() and ROOT in f.parents:
                rel = f.relative_to(ROOT).as_posix().replace("/", "_") if "reproduce-demo/figures/" not in link else "figures/" + f.name
                (out / rel).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(f, out / rel)
                return f"{m.group(1)}({rel})"
        return m.group(0)
    return re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", fix, md)


def _fence(text: str, lang: str = "text") -> str:
    n = max([3] + [len(x) + 1 for x in re.findall(r"`{3,}", text)])
    block = f"{'`' * n}{lang}\n{text.rstrip()}\n{'`' * n}"
    return block if lang == "python" else f'<div class="nb-output nb-text" markdown="block">\n\n{block}\n\n</div>'


def _outputs_md(cell: dict, stem: str, n: int, out: Path) -> list[str]:
    import base64
    parts = []
    for j, o in enumerate(cell.get("outputs", [])):
        kind = o.get("output_type")
        if kind == "stream":
            if o.get("name") == "stdout" and _text(o["text"]).strip(): parts.append(_fence(_text(o["text"])))
            continue
        if kind == "error":
            raise RuntimeError(f"nbs/{stem}.ipynb cell {n}: its stored output is an error ({o.get('ename')}: {o.get('evalue')})")
        d = o.get("data", {})
        if "image/png" in d or "image/svg+xml" in d:
            ext = "png" if "image/png" in d else "svg"
            f = out / f"{stem}_files" / f"cell{n}_{j}.{ext}"; f.parent.mkdir(parents=True, exist_ok=True)
            if ext == "png": f.write_bytes(base64.b64decode(_text(d["image/png"])))
            else: f.write_text(_text(d["image/svg+xml"]), encoding="utf-8")
            parts.append(f'<div class="nb-output nb-figure" markdown><img src="{f.relative_to(out).as_posix()}" '
                         f'alt="output of cell {n}"></div>')
        elif "text/html" in d:
            h = _text(d["text/html"]).strip()
            h = re.sub(r"\n\s*\n", "\n", h)                # a blank line would end the raw HTML block
            parts.append(f'<div class="nb-output">\n{h}\n</div>')
        elif "text/markdown" in d:
            parts.append(f'<div class="nb-output nb-md" markdown="block">\n\n{_text(d["text/markdown"]).strip()}\n\n</div>')
        elif "application/vnd.jupyter.widget-view+json" in d:
            parts.append('!!! note "A widget"\n    This cell displays an ipywidgets widget, which needs a live kernel. '
                         '[The explorer page](explorer.md) shows the same views without one.')
        elif "text/plain" in d and _text(d["text/plain"]).strip(): parts.append(_fence(_text(d["text/plain"])))
    return parts


def page_md(stem: str, nb: dict, ids: dict[str, str], refs: dict[str, str], pages: set[str], out: Path) -> str:
    "One notebook as a Markdown page of the site (see the module docstring); images it shows are written under `out`."
    parts = []
    for n, c in enumerate(nb["cells"]):
        s = _src(c)
        if c["cell_type"] == "markdown":
            parts.append(_figure_links(_link_names(s.strip("\n"), refs, pages), out)); continue
        if c["cell_type"] != "code": continue
        d = _directives(s)
        if d.get("hide") or d.get("include") == "false" or "default_exp" in d: continue
        code = "\n".join(l for l in s.splitlines() if not l.startswith("#|")).strip("\n")
        shown = re.findall(r"^show_doc\(([\w.]+)\)\s*$", code, re.M)
        api = [f"::: {ids[name]}\n    options:\n      heading_level: 3\n      members: false" for name in shown]
        if shown:                    # the API entries replace the show_doc lines and their (markdown) outputs
            code = re.sub(r"^show_doc\(([\w.]+)\)\s*\n?", "", code, flags=re.M).strip("\n")
            c = {**c, "outputs": [o for o in c.get("outputs", []) if "text/markdown" not in o.get("data", {})]}
            if not code: parts += api; continue
        if re.fullmatch(r"(\s*(from (nbdev\.showdoc|fastcore\.test) import [\w, ]+|import nbdev)\s*\n?)+", code): code = ""   # doc tooling
        if code and d.get("echo") != "false":
            flags = [k for k in ("slow", "data") if d.get(k)]
            note = f'<div class="nb-flag">not run for the docs (a <code>{"</code>, <code>".join(flags)}</code> cell)</div>' \
                if flags and not c.get("outputs") else ""
            parts.append(_fence(code, "python") + (f"\n{note}" if note else ""))
        if d.get("output") != "false": parts += _outputs_md(c, stem, n, out)
        parts += api
    return "\n\n".join(p for p in parts if p) + "\n"


def figures_md(out: Path, pages=()) -> str:
    "The figures page: every figure of the committed reproduction (runs/reproduce-demo/figures/), with its CSV."
    figs = sorted(PUBLISHED.glob("*.png"))
    (out / "figures").mkdir(parents=True, exist_ok=True)
    parts = ["# Figures of the committed reproduction",
             "> Every figure that `megrag-kit reproduce --profile demo` drew into `runs/reproduce-demo/figures/` "
             "(the shipped demo set, SmolLM2-135M and MiniLM on a CPU). Each one's "
             "numbers are in the CSV file beside it; the "
             "notebooks that draw them are the Experiments pages, shown as that reproduction executed them.",
             " · ".join(f"[{t}]({s}.md)" for s, t in (("50_megrag_tables", "MEGRAG tables"), ("51_megrag_figures", "MEGRAG figures"),
                        ("52_evireform_tables", "EviReform tables and figures"), ("53_cara_tables", "CARA tables and figures"))
                        if s in pages)]
    for f in figs:
        shutil.copy2(f, out / "figures" / f.name)
        csv = f.with_suffix(".csv")
        if csv.exists(): shutil.copy2(csv, out / "figures" / csv.name)
        parts.append(f"## {f.stem}\n\n![{f.stem}](figures/{f.name})\n\n" + (f"Data: [{csv.name}](figures/{csv.name})" if csv.exists() else ""))
    return "\n\n".join(parts) + "\n"


def explorer_md(out: Path) -> str:
    "The explorer page: `explore_html` of the committed 21-question MEGRAG run, inside the site."
    from megrag_kit.viz import RunView, explore_html
    page = explore_html(RunView(EXPLORER_RUN), title="Explorer: MEGRAG on the first 21 2Wiki questions")
    head = re.search(r"<head>(.*)</head>", page, re.S).group(1)
    body = re.search(r"<body>(.*)</body>", page, re.S).group(1)
    styles = "".join(re.findall(r"<style>.*?</style>", head, re.S)).replace("body{", ".mkg-page{")
    (out / "explorer-standalone.html").write_text(page, encoding="utf-8")
    body = re.sub(r"^<h2>.*?</h2>", "", body, flags=re.S)
    return ("# Explorer\n\n> The evidence graphs of the committed MEGRAG run `runs/2wiki21-megrag-full-seam` (full variant, "
            "SmolLM2-135M policy and reader on a CPU): pick a question to draw its graph. Nodes list their selected evidence "
            "units coloured by granularity, units from a gold passage are starred, each edge carries the relation, the last "
            "one ends in STOP. Made by `megrag-kit explore runs/2wiki21-megrag-full-seam --html out.html` "
            "([the same page on its own](explorer-standalone.html)); in Jupyter, `Explorer(run)` is the widget.\n\n"
            f'<div class="mkg-page">\n{styles}\n{body}\n</div>\n')


def nav(stems: list[str]) -> list:
    "The navigation: the start pages, then the notebooks by section."
    titles = {}
    out = []
    for name, rule in SECTIONS:
        got = [s for s in rule if s in stems] if isinstance(rule, list) else [s for s in stems if re.match(rule, s)]
        if name == "Start": out += [f"{s}.md" for s in got]
        elif got: out.append({name: [f"{s}.md" for s in got]})
    return out


def pages(nbs: dict[str, dict], out: Path) -> list[str]:
    "Write every page into `out` (Markdown, images, the MathJax assets); returns the page stems."
    if out.exists(): shutil.rmtree(out)
    out.mkdir(parents=True)
    ids = api_ids(nbs)
    refs, seen = {}, {}
    for stem in sorted(ids):
        for name, ident in ids[stem].items(): seen.setdefault(name, set()).add(ident)
    refs = {n: next(iter(i)) for n, i in seen.items() if len(i) == 1}     # a name shown twice links nowhere
    names = set(nbs) | {"explorer", "figures"}
    for stem, nb in nbs.items():
        (out / f"{stem}.md").write_text(page_md(stem, nb, ids[stem], refs, names, out), encoding="utf-8")
    (out / "figures.md").write_text(figures_md(out, names), encoding="utf-8")
    (out / "explorer.md").write_text(explorer_md(out), encoding="utf-8")
    import jupyter_server_mathjax
    shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", out / "assets" / "mathjax",
                    ignore=shutil.ignore_patterns("localization", "*.md"))
    (out / "assets" / "site.css").write_text(CSS, encoding="utf-8")
    (out / "assets" / "mathjax-config.js").write_text(MATHJAX_CONFIG, encoding="utf-8")
    return sorted(names)


CSS = """.nb-text{border-left-color:#9ab}.nb-text pre{margin:0}.nb-text code{background:#fbfcfe}
.nb-output{margin:.2em 0 1.2em;padding:.2em .6em;border-left:3px solid #c7d0e0;overflow-x:auto;font-size:.85em}
.nb-output table{font-size:.9em}.nb-figure img{max-width:100%}.nb-flag{font-size:.75em;color:#777;margin-top:-.8em}
.md-typeset .mkg-page select{font-size:.8rem;max-width:100%;border:1px solid #99a;padding:.2em}
.md-typeset .mkg-page svg text{font-size:12px}.md-grid{max-width:96rem}
"""
MATHJAX_CONFIG = """window.MathJax = { tex2jax: { inlineMath: [["\\\\(", "\\\\)"]], displayMath: [["\\\\[", "\\\\]"]],
  processEscapes: true, processEnvironments: true, ignoreClass: ".*", processClass: "arithmatex" },
  "HTML-CSS": { availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null },  // the fonts the package ships
  messageStyle: "none", menuSettings: { zoom: "None" }, showMathMenu: false };
"""


# ---- 3. MkDocs ----------------------------------------------------------------------------------------------------
def mkdocs_build(src: Path, site_dir: Path, stems: list[str]) -> list[str]:
    "Run `mkdocs build --strict` over `src` into `site_dir`; returns its warnings (the build fails on any)."
    import yaml
    gen = src.parent / f"{src.name}.mkdocs.yml"
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for p in cfg["plugins"]:                 # the API of this checkout, wherever the generated config lies
        if isinstance(p, dict) and "mkdocstrings" in p:
            h = p["mkdocstrings"]["handlers"]["python"]; h["paths"] = [str(ROOT)]
            opts = h.setdefault("options", {})          # griffe extensions given as files of the checkout
            opts["extensions"] = [str(ROOT / e) if isinstance(e, str) and e.endswith(".py") else e
                                  for e in opts.get("extensions", [])]
    cfg.update(docs_dir=str(src), site_dir=str(site_dir), nav=nav(stems))
    gen.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(gen)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    warn = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith(("WARNING", "ERROR")) or "Aborted" in l]
    if r.returncode != 0 and not warn: warn = [(r.stdout + r.stderr)[-3000:]]
    return warn


def site(out: Path = DOCS, stems=None, log=print) -> dict:
    """Build the site into `out` (default _docs/) from every notebook, or those named in `stems`; returns the seconds
    each step took and the problems found (`warnings` of MkDocs, `broken` local links): the build failed when either
    is non-empty."""
    t, times = time.time(), {}
    nbs = outputs(stems, log); times["outputs"] = time.time() - t; t = time.time()
    import tempfile
    src = BUILD / "docs" if out == DOCS else Path(tempfile.mkdtemp(prefix="megrag-docs-src-"))   # builds elsewhere never collide
    names = pages(nbs, src); times["pages"] = time.time() - t; t = time.time()
    warnings = mkdocs_build(src, out, names); times["mkdocs"] = time.time() - t
    return dict(times=times, warnings=warnings, broken=check(out) if out.exists() else ["no site was written"])


def check(out: Path = DOCS) -> list[str]:
    """Problems of the built site in `out`: a page that links (href/src) to a local file that does not exist, or an
    image without a source. `[]` when every page and figure link resolves. The MathJax assets are not checked."""
    bad = []
    for f in sorted(out.rglob("*.html")):
        if "assets" in f.relative_to(out).parts or f.name == "404.html": continue   # 404.html: root-absolute links
        text = f.read_text(encoding="utf-8")
        for attr, link in re.findall(r'\b(href|src)="([^"]*)"', text):
            if not link and attr == "src": bad.append(f"{f.relative_to(out)}: <img> without src"); continue
            if not link or re.match(r"^(data:|https?:|mailto:|#|javascript:)", link): continue
            path = link.split("#")[0].split("?")[0]
            target = (f.parent / path).resolve()
            if path and not target.exists(): bad.append(f"{f.relative_to(out)}: {attr}={link} does not exist")
    return bad


# ---- the site in a browser -----------------------------------------------------------------------------------------
def chromium() -> tuple[str, str] | None:
    "`(chromium, chromedriver)` paths (Debian's `chromium` and `chromium-driver` packages), or `None` when either is missing."
    b = shutil.which("chromium") or shutil.which("chromium-browser")
    d = shutil.which("chromedriver")
    return (b, d) if b and d else None


class Served:
    """`out` served by Python's http.server on 127.0.0.1 (a free port) in a thread, as a context manager: `url` is the
    root, `missing` lists every path that was answered 404."""
    def __init__(self, out: Path):
        import functools, http.server, threading
        self.missing = []
        served = self
        class H(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *a): pass
            def send_error(self, code, *a, **kw):
                if code == 404: served.missing.append(self.path)
                super().send_error(code, *a, **kw)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(H, directory=str(out)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
    def __enter__(self): self.thread.start(); return self
    def __exit__(self, *a): self.httpd.shutdown(); self.httpd.server_close()


def browser(width: int = 1280, height: int = 1000):
    """A headless Chromium driven by selenium (chromedriver), with a fresh profile and no background network
    (`--headless --no-sandbox --disable-gpu --disable-background-networking ...`). `RuntimeError` when Chromium or
    chromedriver is not installed (`apt-get install -y chromium chromium-driver`)."""
    import tempfile
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    found = chromium()
    if not found: raise RuntimeError("no chromium/chromedriver on PATH (apt-get install -y chromium chromium-driver)")
    o = webdriver.ChromeOptions()
    o.binary_location = found[0]
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", "--disable-dev-shm-usage", f"--window-size={width},{height}",
              f"--user-data-dir={tempfile.mkdtemp(prefix='megrag-docs-chromium-')}"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service(found[1]), options=o)


def wait_for_math(driver, timeout: float = 30) -> dict:
    """Wait until MathJax has typeset the page; returns `{"formulas": arithmatex elements, "typeset": typeset ones}`."""
    js = ("var a = document.querySelectorAll('.arithmatex').length;"
          "var done = window.MathJax && MathJax.Hub && MathJax.Hub.queue && MathJax.Hub.queue.pending === 0 && MathJax.isReady;"
          "var t = document.querySelectorAll('.arithmatex .MathJax, .arithmatex .MathJax_Display, .arithmatex .MathJax_CHTML,"
          " .arithmatex .MathJax_SVG').length;"
          "return {formulas: a, typeset: t, done: !!done};")
    t0 = time.time()
    while True:
        r = driver.execute_script(js)
        if r["formulas"] == 0 or (r["done"] and r["typeset"] >= r["formulas"]) or time.time() - t0 > timeout: return r
        time.sleep(0.3)


SCREENSHOTS = [("home", "index.html", None), ("quickstart", "quickstart.html", None),
               ("tutorial", "80_tutorial.html", None), ("tutorial_graph", "80_tutorial.html", "svg.mkg"),
               ("tutorial_math", "80_tutorial.html", "div.arithmatex"), ("tutorial_plot", "80_tutorial.html", ".nb-figure"),
               ("megrag", "10_megrag.html", "div.arithmatex"), ("megrag_outputs", "10_megrag.html", ".nb-figure"),
               ("evireform", "20_evireform.html", ".nb-text"), ("cara", "30_cara.html", ".nb-text"),
               ("megrag_tables", "50_megrag_tables.html", "#table-1-main-results ~ .nb-output:not(.nb-text)"), ("megrag_figures", "51_megrag_figures.html", ".nb-figure"),
               ("megrag_fig6", "51_megrag_figures.html", "#figure-6-latency-against-f1-per-method ~ .nb-figure"),
               ("evireform_figures", "52_evireform_tables.html", ".nb-figure"), ("cara_figures", "53_cara_tables.html", ".nb-figure"),
               ("figures", "figures.html", "img"), ("explorer", "explorer.html#q11", None),
               ("explorer_edges", "explorer.html#q11", ".mkg-question:not([hidden]) .mkg-edge"), ("api", "00_core.html", ".doc-heading")]


def screenshots(out: Path = DOCS, dest: Path = ROOT / "docs" / "screenshots") -> list[Path]:
    "PNG screenshots of the pages in `SCREENSHOTS` of the built site `out`, served and opened in headless Chromium."
    dest.mkdir(parents=True, exist_ok=True)
    done = []
    with Served(out) as s:
        d = browser()
        try:
            for name, page, target in SCREENSHOTS:
                d.get(s.url + page); wait_for_math(d)
                if target: d.execute_script("var e = document.querySelector(arguments[0]); if (e) { e.scrollIntoView(); "
                                            "window.scrollBy(0, -90); }", target)
                time.sleep(0.5)
                f = dest / f"{name}.png"; d.save_screenshot(str(f)); done.append(f)
        finally: d.quit()
    return done


def serve(out: Path = DOCS, port: int = 8000):
    import functools, http.server
    h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    print(f"serving {out} on http://127.0.0.1:{port}/")
    http.server.ThreadingHTTPServer(("127.0.0.1", port), h).serve_forever()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("readme"); r.add_argument("--check", action="store_true")
    s = sub.add_parser("site"); s.add_argument("--only", nargs="*", help="build only these notebooks (stems)")
    v = sub.add_parser("serve"); v.add_argument("--port", type=int, default=8000)
    sub.add_parser("screenshots", help="PNG screenshots of the built site's main pages into docs/screenshots/")
    e = sub.add_parser("execute", help="execute notebooks into the docs cache (what `site` runs in a child process)")
    e.add_argument("notebooks", nargs="+"); e.add_argument("--data", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "execute":
        try: execute_into_cache([Path(n).resolve() for n in a.notebooks], a.data)
        except RuntimeError as err: print(err, file=sys.stderr); return 1
        return 0
    if a.cmd == "readme": return readme(a.check)
    if a.cmd == "serve": serve(port=a.port); return 0
    if a.cmd == "screenshots":
        for f in screenshots(): print("wrote", f.relative_to(ROOT))
        return 0
    res = site(stems=set(a.only) if a.only else None)
    for w in res["warnings"]: print("mkdocs:", w)
    for b in res["broken"]: print("broken link:", b)
    print("built _docs/: " + ", ".join(f"{k} {v:.1f} s" for k, v in res["times"].items()) + f"; open {DOCS / 'index.html'}")
    return 1 if res["warnings"] or res["broken"] else 0


NEEDS = {"site": ("execnb", "nbdev", "mkdocs", "yaml", "jupyter_server_mathjax"), "execute": ("execnb", "nbdev"),
         "screenshots": ("selenium",), "serve": (), "readme": ()}


def _missing(cmd: str) -> list[str]:
    "The modules command `cmd` needs that this Python cannot import (`[]` when it has them all)."
    import importlib.util
    return [m for m in NEEDS.get(cmd, ()) if importlib.util.find_spec(m) is None]


def ensure_env(argv: list[str]) -> None:
    """Make sure the modules of the command in `argv` import: when one does not and the kit's environment
    `.venv/bin/python` exists (and is not the Python running), run this script again under it with the same
    arguments (`os.execv`; this call does not return). Otherwise print what to run and exit with status 2."""
    cmd = next((a for a in argv if not a.startswith("-")), "")
    missing = _missing(cmd)
    if not missing: return
    venv = ROOT / ".venv" / "bin" / "python"
    other = Path(sys.executable).absolute() != venv.absolute()
    if venv.exists() and other and not os.environ.get("MEGRAG_DOCS_REEXEC"):
        print(f"tools/docs.py: {sys.executable} has no {', '.join(missing)}; "
              f"running again under {venv.relative_to(ROOT)}", file=sys.stderr)
        os.environ["MEGRAG_DOCS_REEXEC"] = "1"              # once: a venv that lacks them too ends below
        os.execv(str(venv), [str(venv), str(Path(__file__).resolve()), *argv])
        return                                              # not reached (execv replaces this process)
    print(f"tools/docs.py {cmd}: this Python ({sys.executable}) cannot import {', '.join(missing)}. Run it with the "
          f"kit's environment: `.venv/bin/python tools/docs.py {' '.join(argv)}` (after `tools/setup.sh`, which "
          "creates .venv with the docs packages)", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    ensure_env(sys.argv[1:])
    sys.exit(main())
