"""The literate rhythm, checked: no export cell over 60 lines, no line over 120 characters (notebook cells and the
exported modules), and every module docstring a one-line summary that ends with a period. Each failure names its
offenders: the file, the cell or line, and the length."""
import ast, json, re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))
MODULES = sorted(p for p in (ROOT / "megrag_kit").glob("*.py") if p.name != "_modidx.py")
MAX_EXPORT_LINES, MAX_LINE = 60, 120
_EXPORT = re.compile(r"#\|\s*export")


def _name(path: Path) -> str:
    "`path` as the report names it: relative to the repository when it is inside it."
    try: return str(Path(path).resolve().relative_to(ROOT))
    except ValueError: return str(path)


def _cells(nb_path: Path) -> list[dict]:
    "The cells of a notebook as `{cell_type, source}` dicts, the source one string."
    cells = json.loads(Path(nb_path).read_text(encoding="utf-8"))["cells"]
    text = lambda s: "".join(s) if isinstance(s, list) else s
    return [dict(cell_type=c["cell_type"], source=text(c["source"])) for c in cells]


def long_export_cells(nb_path: Path, limit: int = MAX_EXPORT_LINES) -> list[str]:
    "Each export cell (its source starts with `#| export`) of more than `limit` lines, as `FILE cell I: N lines`."
    return [f"{_name(nb_path)} cell {i}: an export cell of {n} lines (at most {limit})"
            for i, c in enumerate(_cells(nb_path))
            if c["cell_type"] == "code" and _EXPORT.match(c["source"]) and (n := len(c["source"].splitlines())) > limit]


def long_notebook_lines(nb_path: Path, limit: int = MAX_LINE) -> list[str]:
    """Each line of a cell source longer than `limit` characters, as `FILE cell I line J: N characters`; a markdown
    table row (a line that starts with `|`) may stay long."""
    out = []
    for i, c in enumerate(_cells(nb_path)):
        for j, line in enumerate(c["source"].splitlines(), 1):
            if len(line) > limit and not (c["cell_type"] == "markdown" and line.lstrip().startswith("|")):
                out.append(f"{_name(nb_path)} cell {i} line {j}: {len(line)} characters (at most {limit})")
    return out


def long_module_lines(py_path: Path, limit: int = MAX_LINE) -> list[str]:
    """Each line of a module longer than `limit` characters, as `FILE line J: N characters`. Exempt: the
    `__all__ = [...]` list that nbdev_export writes itself (it wraps the names at its own width, which we do not
    control), found as the module-level assignment to `__all__`."""
    text = Path(py_path).read_text(encoding="utf-8")
    skip = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skip |= set(range(node.lineno, node.end_lineno + 1))
    return [f"{_name(py_path)} line {j}: {len(line)} characters (at most {limit})"
            for j, line in enumerate(text.splitlines(), 1) if len(line) > limit and j not in skip]


def docstring_summary_problems(py_path: Path) -> list[str]:
    """What is wrong with a module docstring's summary, in one line: there is no docstring; its first paragraph is
    longer than its first line (the summary wraps); or the summary does not end with a period. `[]` when the summary
    is one line ending in `.`."""
    doc = ast.get_docstring(ast.parse(Path(py_path).read_text(encoding="utf-8")))
    if not doc: return [f"{_name(py_path)}: no module docstring (the notebook's `> ` description)"]
    first = doc.strip().split("\n\n")[0]
    head = first.splitlines()[0]
    if first != head:                       # the sentence goes on: its end is on a later line
        return [f"{_name(py_path)}: the docstring's summary wraps onto {len(first.splitlines())} lines "
                f"(its first line: {head!r})"]
    if not head.rstrip().endswith("."):
        return [f"{_name(py_path)}: the docstring's summary does not end with a period: {head!r}"]
    return []


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_no_export_cell_over_60_lines(nb):
    "An export cell holds one function or class (or a few small related ones): at most 60 lines."
    bad = long_export_cells(nb)
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_line_over_120_characters(nb):
    bad = long_notebook_lines(nb)
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("mod", MODULES, ids=lambda p: p.name)
def test_no_module_line_over_120_characters(mod):
    bad = long_module_lines(mod)
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("mod", [m for m in MODULES if m.name != "__init__.py"], ids=lambda p: p.name)
def test_module_docstring_summary_is_one_line(mod):
    "nbdev writes the notebook's `> ` description as the module docstring: one sentence, one line, ending in `.`."
    bad = docstring_summary_problems(mod)
    assert bad == [], "\n".join(bad)


def test_the_rules_exist_for_every_file():
    "The checks above have something to check: the notebooks, their export cells and the modules."
    assert len(NOTEBOOKS) >= 30 and len(MODULES) >= 25
    exported = [c for nb in NOTEBOOKS for c in _cells(nb) if c["cell_type"] == "code" and _EXPORT.match(c["source"])]
    assert len(exported) > 100


def test_each_check_catches_a_hand_made_offender(tmp_path):
    """A 61-line export cell, a 121-character line (code, prose, module) and a wrapped summary are named; their legal
    neighbours (60 lines, 120 characters, a long table row, nbdev's `__all__`, a one-line summary) are not."""
    body = "\n".join(f"x{i} = {i}" for i in range(59))
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# T\n\n> One line."),
        nbformat.v4.new_code_cell("#| export\n" + body),                         # 60 lines: allowed
        nbformat.v4.new_code_cell("#| export\n" + body + "\ny = 1"),             # 61 lines
        nbformat.v4.new_code_cell("#|export\n" + body + "\ny = 1\nz = 2"),       # 62 lines, no space after #|
        nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(80))),  # not exported: any length
        nbformat.v4.new_code_cell("s = '" + "a" * 114 + "'\nt = '" + "b" * 115 + "'"),    # 120, then 121 characters
        nbformat.v4.new_markdown_cell("| a | " + "b" * 150 + " |\n" + "word " * 24 + "words"),   # table row, then 125
    ])
    f = tmp_path / "99_x.ipynb"; nbformat.write(nb, f)
    assert long_export_cells(f) == [f"{f} cell 2: an export cell of 61 lines (at most 60)",
                                    f"{f} cell 3: an export cell of 62 lines (at most 60)"]
    assert long_notebook_lines(f) == [f"{f} cell 5 line 2: 121 characters (at most 120)",
                                      f"{f} cell 6 line 2: 125 characters (at most 120)"]
    py = tmp_path / "mod.py"
    py.write_text('"""Two\nlines."""\n\n# %% auto #0\n__all__ = [' + ", ".join(f"'name{i}'" for i in range(40)) + "]\n"
                  "x = '" + "c" * 115 + "'\n" + "y = '" + "d" * 114 + "'\n")
    assert long_module_lines(py) == [f"{py} line 6: 121 characters (at most 120)"]     # not line 5, nbdev's __all__
    assert docstring_summary_problems(py) == [f"{py}: the docstring's summary wraps onto 2 lines "
                                              "(its first line: 'Two')"]
    py.write_text('"""One line, no period\n\nThen more."""\n')
    assert docstring_summary_problems(py) == [f"{py}: the docstring's summary does not end with a period: "
                                              "'One line, no period'"]
    py.write_text('"""One line.\n\nThen a paragraph\nthat wraps."""\nx = 1\n')
    assert docstring_summary_problems(py) == [] and long_module_lines(py) == []
    py.write_text("x = 1\n")
    assert docstring_summary_problems(py) == [f"{py}: no module docstring (the notebook's `> ` description)"]
