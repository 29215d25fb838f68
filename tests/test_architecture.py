"""The import graph: method modules stand on the foundation only, never on the runner, the report or the CLI."""
import ast
from pathlib import Path
import megrag_kit
from megrag_kit.method import discover

PKG = Path(megrag_kit.__file__).parent
FOUNDATION = {"core", "jsonl", "data", "gold", "models", "retrievers", "index", "reader", "metrics", "method", "kg"}  # kg: the text-rich graph type and its tools; gold: annotated hops


def kit_imports(module: str) -> set[str]:
    "The megrag_kit modules a module imports (relative or absolute, at any depth of the file)."
    tree = ast.parse((PKG / f"{module}.py").read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1: out |= {mod.split(".")[0]} if mod else {a.name for a in node.names}
            elif mod.startswith("megrag_kit"): out |= {mod.split(".")[1]} if "." in mod else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("megrag_kit.")}
    return out - {module}


def test_method_modules_import_only_the_foundation():
    modules = {cls.__module__.split(".")[-1] for cls in discover().values() if cls.__module__.startswith("megrag_kit.")}
    assert {"baselines", "megrag"} <= modules
    for m in modules:
        assert kit_imports(m) <= FOUNDATION, (m, kit_imports(m) - FOUNDATION)     # so never the scale-out (scale) either


def test_the_foundation_never_imports_upward():
    upper = {"runner", "report", "cli", "scale"}      # scale: the Ray scale-out stands on the runner
    for m in FOUNDATION:
        assert not kit_imports(m) & upper, (m, kit_imports(m) & upper)
    assert "cli" not in kit_imports("runner") | kit_imports("report")
    assert kit_imports("core") == set()
    assert "cli" not in kit_imports("scale")
