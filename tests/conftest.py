"""Shared fixtures: real offline models (session-scoped: loaded once per test run), a scripted fake LLM for
control-flow tests only, and a local OpenAI-compatible stub server.

Test tiers: a test that loads a real model is marked `slow` (`pytest -m "not slow"` is the fast tier). Any test
that asks for the `smollm` or `minilm` fixture, directly or through another fixture, is marked `slow` here at
collection, so the fast tier cannot load them by accident."""
import json, os, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
import numpy as np
import pytest
from megrag_kit.models import ChatModel, Generation, LLMCache, load_llm, load_embedder

def shared_dir(environ=os.environ) -> Path:
    "The benchmark data folder the tests read: `$MEGRAG_KIT_DATA` when set (as for the kit), else ../shared/data beside the checkout."
    return Path(environ["MEGRAG_KIT_DATA"]) if environ.get("MEGRAG_KIT_DATA") else Path(__file__).resolve().parents[2] / "shared" / "data"

SHARED = shared_dir()
needs_shared = pytest.mark.skipif(not (SHARED / "multihop").is_dir(), reason=f"benchmark data not present at {SHARED} (set MEGRAG_KIT_DATA)")


REAL_MODEL_FIXTURES = ("smollm", "minilm")

def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(f in getattr(item, "fixturenames", ()) for f in REAL_MODEL_FIXTURES): item.add_marker(pytest.mark.slow)


class ScriptedLLM(ChatModel):
    """Fake LLM for control-flow unit tests: answers from a list (or a function of the last user message)."""
    model_id = "scripted"
    def __init__(self, script, latency_s: float = 0.0):
        super().__init__(cache=False)
        self.script, self.seen, self.latency_s = script, [], latency_s
    def _generate(self, messages, **params):
        out = []
        for m in messages:
            self.seen.append(m)
            text = self.script(m[-1]["content"]) if callable(self.script) else self.script.pop(0)
            out.append(Generation(text, 10, 3, latency_s=self.latency_s))
        return out


@pytest.fixture(scope="session")
def smollm(tmp_path_factory):
    "The real offline SmolLM2-135M with a fresh call cache."
    return load_llm("smollm2-135m", "cpu", cache=LLMCache(tmp_path_factory.mktemp("llmcache")))


@pytest.fixture(scope="session")
def minilm():
    "The real offline all-MiniLM-L6-v2 embedder."
    return load_embedder("minilm", "cpu")


class _Stub(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.requests.append((self.path, body))
        if srv.fail_next > 0:
            srv.fail_next -= 1
            self.send_response(503); self.end_headers(); self.wfile.write(b"busy"); return
        if self.path.endswith("/chat/completions"):
            user = body["messages"][-1]["content"]
            if srv.respond: text = srv.respond(body)
            else: text = json.dumps({"echo": user[::-1]}) if body.get("response_format") else f"echo: {user}"
            resp = {"choices": [{"message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": len(user.split()), "completion_tokens": len(text.split())}}
        elif self.path.endswith("/embeddings"):
            def vec(s):
                v = np.random.default_rng(abs(hash(s)) % 2**32).normal(size=8); return v.tolist()
            resp = {"data": [{"index": i, "embedding": vec(s)} for i, s in enumerate(body["input"])]}
        else:
            self.send_response(404); self.end_headers(); return
        data = json.dumps(resp).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)


@pytest.fixture()
def stub_server():
    "A local server speaking the chat-completions and embeddings protocol on 127.0.0.1."
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    srv.requests, srv.fail_next, srv.respond = [], 0, None   # respond(body) -> text overrides the echo
    t = threading.Thread(target=srv.serve_forever, daemon=True); t.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield srv
    srv.shutdown()
