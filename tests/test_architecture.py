"""The package's layers as an allow-list over its real import graph (every import statement at any depth, lazy ones
inside functions included, and `importlib.import_module` of a constant name): the foundation imports only the
foundation, a method module imports the foundation, and the runner, report, reproduce, scale, experiment and CLI
layer reaches methods only through the registry (`method.discover`, `get_method`, `build_method`); the tests'
stand-ins (`testing`) import the foundation and no kit module imports them; no cycle anywhere."""
import ast, functools, shutil
from dataclasses import dataclass
from pathlib import Path
import megrag_kit
from megrag_kit.method import discover

PKG = Path(megrag_kit.__file__).parent

LAYERS = {
    # the shared types and tools every method stands on: data, models, retrievers, the evidence store (restricted
    # stores and named views included), the reader, metrics, the method registry; kg: the text-rich graph type and its
    # tools; gold: annotated hops
    "foundation": {"core", "jsonl", "data", "gold", "models", "retrievers", "index", "reader", "metrics", "method",
                   "kg"},
    "method": {"baselines", "megrag", "ircot", "iter_retgen", "evireform", "cara"},      # each registers its methods
    # a foundation, method or tool module's pieces, split off it along its seams (see PARTS): they register nothing
    "part": {"models_cache", "models_chat", "models_schema", "models_hf", "models_http", "models_embed", "models_spec",
             "models_llamacpp", "models_ct2", "index_views", "index_openie", "megrag_graph", "megrag_policy", "megrag_summary", "evireform_propositions",
             "evireform_signals", "evireform_policy", "evireform_summary", "cara_causal", "cara_agents",
             "distill_teachers", "distill_collect", "distill_train", "distill_hops"},
    "tool": {"distill"},                  # built on one named method (see DECLARED), used by the CLI
    # drive methods by name; reproduce_profiles: the reproduction's profiles, read from their TOML files
    "app": {"runner", "report", "viz", "reproduce", "reproduce_profiles", "scale", "experiment", "cli"},
    # stand-ins of the model interfaces for control-flow tests (a hashing embedder, a scripted chat model): built on
    # the foundation's models, imported by the notebooks' and the tests' code, never by a kit module
    "testing": {"testing"},
}
LAYER_OF = {m: layer for layer, ms in LAYERS.items() for m in ms}
MAY_IMPORT = {"foundation": {"foundation"}, "method": {"foundation"}, "part": {"foundation"}, "tool": {"foundation"},
              "app": {"foundation"}, "testing": {"foundation"}}
# Each split module's parts, in their order: the module imports (and re-exports) them, a part imports only the
# parts before it, and nothing else imports a part (a caller imports the split module's names).
PARTS = {"models": ("models_cache", "models_chat", "models_schema", "models_hf", "models_http", "models_embed",
                    "models_spec", "models_llamacpp", "models_ct2"),
         "index": ("index_views", "index_openie"),
         "megrag": ("megrag_graph", "megrag_policy", "megrag_summary"),
         "evireform": ("evireform_propositions", "evireform_signals", "evireform_policy", "evireform_summary"),
         "cara": ("cara_causal", "cara_agents"),
         "distill": ("distill_teachers", "distill_collect", "distill_train", "distill_hops")}

# Every edge beyond the layer rule, with its reason. Nothing else crosses a layer or connects two peers.
DECLARED = {
    **{(m, p): "the module is built on its own part, split off it along a seam (its names re-exported)"
       for m, ps in PARTS.items() for p in ps},
    ("models_chat", "models_cache"): "the interface returns Generations, books their Cost and reads the call cache",
    **{(p, q): "a backend implements the ChatModel interface, returns Generations and is named by its content"
       for p in ("models_hf", "models_http", "models_llamacpp", "models_ct2") for q in ("models_cache", "models_chat")},
    **{(p, "models_schema"): "a local backend decodes under a JSON schema through the shared compiled automata"
       for p in ("models_hf", "models_ct2")},
    ("models_embed", "models_cache"): "a local embedder is named by its content (model_identity)",
    ("models_embed", "models_chat"): "a served embedder fails with ModelCallError",
    ("models_embed", "models_http"): "a served embedder goes through the HTTP client of the served LLMs",
    ("models_spec", "models_http"): "the LLM options name the HTTP backend's response formats and token fields",
    ("models_llamacpp", "models_hf"): "`smollm2-135m@llamacpp` is the GGUF file the transformers default ships",
    ("models_llamacpp", "models_spec"): "a `...@llamacpp` spec is read by the one spec parser",
    ("models_ct2", "models_spec"): "CTranslate2's compute types are an LLM option of the spec grammar",
    ("index_openie", "index_views"): "the parser's triple view (ParsedView) is an ExtractedView filled by a parser",
    ("megrag_policy", "megrag_graph"): "the policies read the graph, its nodes and the candidates",
    ("megrag_summary", "megrag_graph"): "the run summary counts the evidence compositions",
    ("cara_agents", "cara_causal"): "the agents call the causal module after each Neighbors",
    ("distill_teachers", "megrag"): "a student of MEGRAG's single policy is trained on MEGRAG's own graph steps, "
                                    "built through its public methods (retrieve, candidates, policy_prompt)",
    ("distill_collect", "megrag"): "collect runs a teacher on the single-policy MEGRAG of the distillation config",
    ("distill_collect", "distill_teachers"): "collect writes the teachers' records",
    ("distill_train", "distill_collect"): "training reads the collected files and their counts",
    ("distill_hops", "distill_teachers"): "step k is compared with the gold hop k the gold teacher reads",
    **{(m, "runner"): "reads run folders or answers questions through the runner"
       for m in ("report", "viz", "reproduce", "scale")},
    ("experiment", "scale"): "runs an experiment file's runs through the grid cell runner (scale.run_jobs)",
    ("experiment", "report"): "renders an experiment file's reports",
    ("experiment", "reproduce"): "an experiment file's [reproduce] table executes the experiment notebooks",
    ("reproduce", "reproduce_profiles"): "the profiles the notebooks run under are TOML files (PROFILES, a user's own)",
    **{("cli", m): "the command line drives it"
       for m in ("runner", "report", "viz", "reproduce", "scale", "experiment", "distill")},
}
# Imports of a name computed at run time, by (module, enclosing function): each one is where it is on purpose.
DYNAMIC = {
    ("method", "discover"): "the registry: imports the package's modules and the plugins so that their @register runs",
    ("core", "py_attr"): "a `py:module:Name` string (a method, an LLM, an embedder) names the user's own object",
    ("runner", "_run_held"): "warms the third-party modules of _WARM_IMPORTS before the first batch",
}
NOT_MODULES = {"__init__", "_modidx"}     # the package file and nbdev's index: they import no kit module (checked)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    lazy: bool          # inside a function or class body, not at the module's top level

    def __str__(self): return f"{self.src} -> {self.dst} (line {self.line}{', inside a function' if self.lazy else ''})"


def _targets(node, module_names: set[str]) -> list[str]:
    "The kit modules an import node names (relative or absolute, `from megrag_kit import x` included)."
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1] for a in node.names if a.name.startswith("megrag_kit.")]
    mod = node.module or ""
    if node.level == 1: parts = mod.split(".") if mod else []
    elif node.level == 0 and (mod == "megrag_kit" or mod.startswith("megrag_kit.")): parts = mod.split(".")[1:]
    else: return []
    return [parts[0]] if parts else [a.name for a in node.names if a.name in module_names]


def _dynamic_name(call: ast.Call):
    "For `importlib.import_module(x)` / `import_module(x)` / `__import__(x)`: the constant `x`, or `...` when computed."
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name not in ("import_module", "__import__") or not call.args: return None
    a = call.args[0]
    return a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else ...


def module_imports(path: Path, module_names: set[str]) -> tuple[list[Edge], set[tuple[str, str]]]:
    "`(edges, dynamic sites)` of one module file: every kit import at any depth, and each computed import's function."
    src, edges, sites = path.stem, [], set()
    def visit(node, func: str | None):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else func
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                lazy = func is not None
                edges.extend(Edge(src, d, child.lineno, lazy) for d in _targets(child, module_names) if d != src)
            elif isinstance(child, ast.Call) and (name := _dynamic_name(child)) is not None:
                if name is ...: sites.add((src, func or "<module>"))
                elif name.startswith("megrag_kit."):
                    edges.append(Edge(src, name.split(".")[1], child.lineno, func is not None))
            visit(child, f)
    visit(ast.parse(path.read_text()), None)
    return edges, sites


def import_graph(pkg: Path = PKG) -> tuple[dict[str, list[Edge]], set[tuple[str, str]]]:
    "`({module: its import edges}, dynamic import sites)` of every `*.py` of the package folder `pkg`."
    names = {p.stem for p in pkg.glob("*.py")}
    graph, sites = {}, set()
    for p in sorted(pkg.glob("*.py")):
        graph[p.stem], s = module_imports(p, names)
        sites |= s
    return graph, sites


def _a(word: str) -> str: return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def violations(graph: dict[str, list[Edge]]) -> list[str]:
    "Each edge the allow-list does not permit, and each module placed in no layer, as a sentence naming it."
    out = [f"{m}: placed in no layer (add it to LAYERS in tests/test_architecture.py)"
           for m in sorted(graph) if m not in LAYER_OF and m not in NOT_MODULES]
    for m in sorted(graph):
        for e in graph[m]:
            if m in NOT_MODULES: out.append(f"{e}: {m} imports no kit module"); continue
            if m not in LAYER_OF or (m, e.dst) in DECLARED: continue
            src_layer, dst_layer = LAYER_OF[m], LAYER_OF.get(e.dst, "?")
            if dst_layer not in MAY_IMPORT[src_layer]:
                allowed = "/".join(sorted(MAY_IMPORT[src_layer]))
                out.append(f"{e}: {_a(src_layer)} module may import only {allowed} modules, "
                           f"and {e.dst} is {_a(dst_layer)} module")
    return out


def cycles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    "The import cycles: each strongly connected component of more than one module, as a sorted list (Tarjan)."
    succ = {m: sorted({e.dst for e in es if e.dst in graph}) for m, es in graph.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    def strong(v):
        index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)
        for w in succ[v]:
            if w not in index: strong(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in sorted(succ):
        if v not in index: strong(v)
    return out


@functools.cache
def real_graph():
    "The package's own import graph, computed once per test session."
    return import_graph(PKG)


def test_every_module_has_a_layer_and_every_import_is_allowed():
    graph, _ = real_graph()
    assert violations(graph) == []


def test_the_import_graph_has_no_cycle():
    graph, _ = real_graph()
    assert cycles(graph) == []


def test_the_method_layer_is_what_the_registry_holds():
    "The method modules are exactly those whose classes the registry holds: no foundation or app module registers one."
    registered = {c.__module__.split(".")[-1] for c in discover().values() if c.__module__.startswith("megrag_kit.")}
    assert registered == LAYERS["method"]


def test_computed_imports_are_only_the_declared_ones():
    _, sites = real_graph()
    assert sites == set(DYNAMIC)


def test_the_parts_are_the_part_layer_and_each_has_its_method():
    assert {p for ps in PARTS.values() for p in ps} == LAYERS["part"]
    assert set(PARTS) <= LAYERS["method"] | LAYERS["foundation"] | LAYERS["tool"]
    assert all(p.startswith(f"{m}_") for m, ps in PARTS.items() for p in ps)


def test_the_declared_edges_are_all_used():
    "A declared edge the code no longer has is dropped from DECLARED, so the allow-list stays the real one."
    graph, _ = real_graph()
    used = {(e.src, e.dst) for es in graph.values() for e in es}
    assert sorted(set(DECLARED) - used) == []


def test_the_edges_that_once_broke_the_layers_are_gone():
    graph, _ = real_graph()
    dst = lambda m: {e.dst for e in graph[m]}
    assert "distill" not in dst("models") and "evireform" not in dst("reproduce") | dst("scale")
    assert dst("core") == set() and dst("metrics") == set()


def _copy_package(tmp_path) -> Path:
    pkg = tmp_path / "megrag_kit"; pkg.mkdir()
    for p in PKG.glob("*.py"): shutil.copy(p, pkg / p.name)
    return pkg


def test_a_deliberate_upward_import_fails_the_check(tmp_path):
    "A lazy import of the runner inside a model function, a method imported by the store and by an app: each named."
    pkg = _copy_package(tmp_path)
    with open(pkg / "models.py", "a") as f:
        f.write("\n\ndef _sneaky():\n    from megrag_kit.runner import run\n    return run\n")
    with open(pkg / "index.py", "a") as f: f.write("\nimport megrag_kit.cara\n")
    with open(pkg / "scale.py", "a") as f:
        f.write("\n\ndef _view2():\n    return importlib.import_module('megrag_kit.evireform')\n")
    with open(pkg / "ircot.py", "a") as f: f.write("\nfrom .iter_retgen import IterRetGen\n")
    graph, _ = import_graph(pkg)
    bad = violations(graph)
    n = {m: len((pkg / f"{m}.py").read_text().splitlines()) for m in ("models", "index", "scale", "ircot")}
    only = "may import only foundation modules"
    assert bad == [f"index -> cara (line {n['index']}): a foundation module {only}, and cara is a method module",
                   f"ircot -> iter_retgen (line {n['ircot']}): a method module {only}, "
                   "and iter_retgen is a method module",
                   f"models -> runner (line {n['models'] - 1}, inside a function): a foundation module {only}, "
                   "and runner is an app module",
                   f"scale -> evireform (line {n['scale']}, inside a function): an app module {only}, "
                   "and evireform is a method module"]
    assert any({"models", "runner"} <= set(c) for c in cycles(graph))          # models <-> runner: a cycle, named
    (pkg / "newthing.py").write_text("from .core import Dataset\n")
    bad = violations(import_graph(pkg)[0])
    assert "newthing: placed in no layer (add it to LAYERS in tests/test_architecture.py)" in bad


def test_the_cycle_finder_on_a_small_graph():
    g = {m: [Edge(m, d, 1, False) for d in ds] for m, ds in
         {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["f"], "f": ["e"], "g": ["g"]}.items()}
    assert cycles(g) == [["a", "b", "c"], ["e", "f"]]        # a self-import: dropped by module_imports, no cycle here
    assert cycles({"a": [Edge("a", "b", 1, False)], "b": []}) == []


def test_relative_absolute_package_and_constant_dynamic_imports_are_all_edges(tmp_path):
    (tmp_path / "core.py").write_text("")
    (tmp_path / "data.py").write_text("")
    f = tmp_path / "x.py"
    f.write_text("from .core import A\nfrom megrag_kit import data\nimport megrag_kit.core as c\nimport numpy\n"
                 "def g():\n    from . import data\n    importlib.import_module('megrag_kit.data')\n"
                 "    importlib.import_module(name)\n    importlib.import_module('json')\n")
    edges, sites = module_imports(f, {"core", "data", "x"})
    assert [(e.dst, e.line, e.lazy) for e in edges] == [("core", 1, False), ("data", 2, False), ("core", 3, False),
                                                       ("data", 6, True), ("data", 7, True)]
    assert sites == {("x", "g")}
