"""The documentation: README.md from nbs/index.ipynb, and the site in _docs/.

    python tools/docs.py readme            write README.md from nbs/index.ipynb
    python tools/docs.py readme --check    exit 1 (and say where) when README.md differs from what index.ipynb gives
    python tools/docs.py site [--quarto]   build the site into _docs/ (git-ignored)

The site: nbdev processes the notebooks into _proc/ (directives applied, `show_doc` cells executed into their API
tables), then each processed notebook becomes one page. With `--quarto` (or when a `quarto` binary is on PATH and
`--offline` is not given) Quarto (the `quarto-cli` package) renders them, as `nbdev_docs` does. Otherwise the pages are rendered
here with nbconvert's basic template inside one page shell with a sidebar: no network, no CDN script. Either way the
figures of figures/ that pages link to are copied beside them and the explorer page (`explorer.html`, the committed
MEGRAG run through `megrag_kit.viz.run_page`) is added. The README is the readme notebook's markdown cells as they
are, each shown code cell as a ```python block and its stored text outputs as a plain block, cells joined by one blank
line: the same text either way, so README.md and index.ipynb cannot drift (tests/test_docs.py checks).
"""
from __future__ import annotations
import argparse, html, json, re, shutil, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS, DOCS, PROC = ROOT / "nbs", ROOT / "_docs", ROOT / "_proc"
FIRST = ["index", "quickstart", "80_tutorial", "92_viz"]      # pages first in the sidebar, then the rest by name
_HIDE = re.compile(r"^#\|\s*(hide|include:\s*false|echo:\s*false)\s*$", re.M)


def _src(cell) -> str: return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _text_outputs(cell) -> list[str]:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            if o.get("name") == "stdout": out.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif "text/markdown" in o.get("data", {}): continue
        elif "text/plain" in o.get("data", {}) and not any(k.startswith("image/") or k == "text/html" for k in o["data"]):
            t = o["data"]["text/plain"]; out.append("".join(t) if isinstance(t, list) else t)
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
    sys.stdout.writelines(list(difflib.unified_diff(have.splitlines(True), want.splitlines(True), "README.md", "from nbs/index.ipynb"))[:60])
    print("README.md differs from nbs/index.ipynb: edit the notebook, then `python tools/docs.py readme`"); return 1


def _stage(dest: Path, only=None) -> Path:
    """Copy nbs/ into `dest` with `#| eval: false` added to every `#| slow` cell: nbdev runs each cell that imports
    something while it renders `show_doc`, and a slow cell would load the real models (its source is still shown)."""
    import nbformat
    shutil.copytree(NBS, dest, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for f in dest.glob("*.ipynb"):
        if only is not None and f.stem not in only: f.unlink(); continue
        nb = nbformat.read(f, as_version=4)
        for c in nb.cells:
            if c.cell_type == "code" and re.search(r"^#\|\s*slow\s*$", c.source, re.M): c.source = "#| eval: false\n" + c.source
        nbformat.write(nb, f)
    return dest


def process(n_workers: int = 1, only=None) -> Path:
    """nbdev's processing of every notebook (or those whose names are in `only`) into _proc/ (what nbdev_docs
    renders), slow cells not run, without Quarto."""
    import os, tempfile
    from nbdev.quarto import refresh_quarto_yml, nbdev_sidebar
    from nbdev.serve import proc_nbs
    os.chdir(ROOT)
    refresh_quarto_yml()
    nbdev_sidebar.__wrapped__(path=NBS)
    with tempfile.TemporaryDirectory(dir=ROOT, prefix="_stage") as d:   # inside the checkout: notebooks find it from their folder
        return proc_nbs(_stage(Path(d) / "nbs", only), n_workers=n_workers, force=True)


def _front(nb) -> dict:
    "The frontmatter nbdev wrote into the processed notebook's raw cell (title, description), `{}` if none."
    import yaml
    for c in nb["cells"]:
        if c["cell_type"] == "raw" and _src(c).strip().startswith("---"):
            try: return yaml.safe_load(_src(c).strip().strip("-")) or {}
            except yaml.YAMLError: return {}
    return {}


def _title(nb: dict, stem: str) -> str:
    t = _front(nb).get("title")
    if t: return str(t)
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+)$", _src(c), re.M)
            if m: return m.group(1).strip()
    return stem


def _pages() -> list[Path]:
    nbs = sorted(p for p in PROC.glob("*.ipynb"))
    key = lambda p: (FIRST.index(p.stem) if p.stem in FIRST else len(FIRST), p.stem)
    return sorted(nbs, key=key)


SHELL = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{title} – megrag_kit</title><style>{css}</style></head><body>
<nav><a class="home" href="index.html">megrag_kit</a>{nav}</nav><main>{body}</main></body></html>"""
CSS = """body{margin:0;display:flex;font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;line-height:1.5;color:#222}
nav{width:15em;min-width:15em;padding:1em;background:#f5f6f8;border-right:1px solid #ddd;height:100vh;overflow:auto;position:sticky;top:0;font-size:14px}
nav a{display:block;color:#234;text-decoration:none;padding:.15em 0}nav a.cur{font-weight:bold}nav a.home{font-size:1.2em;font-weight:bold;margin-bottom:.6em}
main{padding:1em 2em;max-width:60em;min-width:0}pre{background:#f6f8fa;padding:.6em;overflow:auto;font-size:13px}
code{font-size:90%}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;font-size:13px}
img{max-width:100%}.desc{font-size:1.1em;color:#555;border-left:3px solid #ccd;padding-left:.6em}.jp-InputPrompt,.jp-OutputPrompt,.prompt{display:none}.jp-Cell{margin:.4em 0}
.jp-OutputArea-output pre{background:#fff;border-left:3px solid #ddd}details{margin:.4em 0}summary{cursor:pointer}
"""


def _copy_figures(page_html: str, out: Path) -> str:
    "Copy each local image a page links to under out/ (figures/...), rewriting `../figures/x` to `figures/x`."
    def fix(m):
        src = m.group(2)
        if re.match(r"^(data:|https?:)", src): return m.group(0)
        rel = src[3:] if src.startswith("../") else src
        f = ROOT / rel if (ROOT / rel).exists() else NBS / src
        if f.exists():
            (out / rel).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(f, out / rel)
        return f"{m.group(1)}{rel}{m.group(3)}"
    return re.sub(r'(<img[^>]*?src=")([^"]+)(")', fix, page_html)


def _strip_directives(nb):
    "Apply what Quarto would: cells with `echo: false` lose their input; `#|` lines are not shown."
    for c in nb.cells:
        if c.cell_type != "code": continue
        lines = c.source.splitlines()
        if any(re.match(r"#\|\s*(echo:\s*false|hide)", l) for l in lines): c.metadata["transient"] = {"remove_source": True}; c.source = ""
        else: c.source = "\n".join(l for l in lines if not l.startswith("#|"))
    return nb


def render_offline(out: Path = DOCS) -> list[Path]:
    "Render every processed notebook in _proc/ to out/NAME.html (nbconvert basic template, one shell, no network)."
    import nbformat
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter
    out.mkdir(parents=True, exist_ok=True)
    ex = HTMLExporter(template_name="basic", exclude_input_prompt=True, exclude_output_prompt=True)
    css = CSS + HtmlFormatter(style="default").get_style_defs(".highlight")
    pages = _pages()
    nbs = {p: nbformat.read(p, as_version=4) for p in pages}
    titles = {p: _title(nb, p.stem) for p, nb in nbs.items()}
    written = []
    for p, nb in nbs.items():
        fm = _front(nb)
        nb.cells = [c for c in nb.cells if c.cell_type != "raw"]
        body, _ = ex.from_notebook_node(_strip_directives(nb))
        head = f"<h1>{html.escape(titles[p])}</h1>"
        if fm.get("description"): head += f'<p class="desc">{html.escape(str(fm["description"]))}</p>'
        body = head + body
        body = re.sub(r'href="([^"#:]+)\.ipynb(#[^"]*)?"', r'href="\1.html\2"', body)
        nav = "".join(f'<a href="{q.stem}.html"{" class=cur" if q == p else ""}>{html.escape(titles[q])}</a>' for q in pages)
        nav += '<a href="explorer.html">Explorer: a MEGRAG run</a>'
        page = SHELL.format(title=html.escape(titles[p]), css=css, nav=nav, body=body)
        f = out / f"{p.stem}.html"; f.write_text(_copy_figures(page, out), encoding="utf-8"); written.append(f)
    return written


def explorer_page(out: Path = DOCS) -> Path:
    "out/explorer.html: every question of the committed 21-question MEGRAG run, with the pre-seam run beside it."
    from megrag_kit.viz import run_page, CSS as VCSS
    run = ROOT / "runs" / "2wiki21-megrag-full-seam"
    page = run_page(run, other=ROOT / "runs" / "2wiki21-megrag-full-preseam",
                    title="Explorer: MEGRAG full (seam, left) and pre-seam (right), first 21 2Wiki questions")
    f = out / "explorer.html"; f.write_text(page.replace("<head>", "<head>" + VCSS, 1), encoding="utf-8"); return f


def site(quarto: bool | None = None, n_workers: int = 1, out: Path = DOCS, only=None) -> dict:
    """Build the site into `out` (default _docs/), every notebook or those named in `only` (offline renderer);
    returns the seconds each stage took."""
    t, times = time.time(), {}
    quarto = bool(shutil.which("quarto")) if quarto is None else quarto
    cache = process(n_workers, only); times["process"] = time.time() - t; t = time.time()
    if quarto:   # what nbdev_docs does after processing (its README step left out: README.md comes from readme())
        subprocess.run(["quarto", "render", "--no-cache"], cwd=cache, check=True)
        if out.exists(): shutil.rmtree(out)
        shutil.move(str(cache / DOCS.name), str(out)); times["quarto"] = time.time() - t
        for f in out.rglob("*.html"): f.write_text(_copy_figures(f.read_text(encoding="utf-8"), out), encoding="utf-8")
    else:
        if out.exists(): shutil.rmtree(out)
        render_offline(out); times["render"] = time.time() - t
    t = time.time(); explorer_page(out); times["explorer"] = time.time() - t
    return times


def check(out: Path = DOCS) -> list[str]:
    """Problems of the built site in `out`: a page that links (href/src) to a local file that does not exist, or an
    image without a source. `[]` when every page and figure link resolves."""
    bad = []
    for f in sorted(out.glob("*.html")):
        text = f.read_text(encoding="utf-8")
        for attr, link in re.findall(r'\b(href|src)="([^"]*)"', text):
            if not link and attr == "src": bad.append(f"{f.name}: <img> without src"); continue
            if not link or re.match(r"^(data:|https?:|mailto:|#|javascript:)", link): continue
            target = (f.parent / link.split("#")[0]).resolve()
            if link.split("#")[0] and not target.exists(): bad.append(f"{f.name}: {attr}={link} does not exist")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("readme"); r.add_argument("--check", action="store_true")
    s = sub.add_parser("site"); g = s.add_mutually_exclusive_group()
    g.add_argument("--quarto", action="store_true", default=None); g.add_argument("--offline", dest="quarto", action="store_false")
    a = ap.parse_args(argv)
    if a.cmd == "readme": return readme(a.check)
    times = site(a.quarto)
    bad = check(DOCS)
    print("built _docs/: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()) + f"; open {DOCS / 'index.html'}")
    for b in bad: print("broken link:", b)
    return 1 if bad else 0


if __name__ == "__main__": sys.exit(main())
