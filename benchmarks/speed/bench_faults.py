"""Fault injection over the whole pipeline: `megrag-kit run` against a misbehaving OpenAI-compatible server, killed with
SIGKILL mid-run and resumed, compared with a clean run of the same command.

The server (loopback only; bounded: a request cap, a body-size cap and a wall-clock limit) answers every chat request
deterministically from the request itself (the same question gets the same reply whatever happened before: a re-ask
after an unusable reply or a retry with more room gets the reply the clean run got), and injects, per attempt, one of
a scripted mix of faults with probability `--p`: a timeout (no reply within the client's timeout), HTTP 429 with
`Retry-After: 1`, HTTP 500, a reply cut by the token limit (`finish_reason: length`, JSON replies only: the
free-text replies here are one or two words, shorter than any limit), prose where JSON is asked, empty content, and
the reply wrapped in chat-template tokens (`<|im_start|>assistant ... <|im_end|>`). Embeddings are hashed bags of
words (no faults: an embedding failure stops the index build, not a question).

For each method: a clean run (no faults), then the faulty run: started, killed with SIGKILL once a third of its
rows are written, and the same command run again until no question is left failed (at most `--resumes` times).
Each run has its own cache folder (`MEGRAG_KIT_CACHE`). The table:

- `as clean`: questions whose final prediction equals the clean run's; `differs`: answered, but otherwise;
- `failed`: questions still marked failed after the last resume;
- `lost`: questions of the run with no row (must be 0); `dup`: questions with more than one answered row (must be 0);
- `bad cache`: entries of the faulty run's LLM call cache holding a failure (empty text, a cut or refused reply,
  a reply still wrapped in template tokens, or prose where JSON was asked; must be 0).

    python benchmarks/speed/bench_faults.py                          # 30 demo questions, every method (a few minutes)
    python benchmarks/speed/bench_faults.py --limit 6 --methods direct,native_rag --p 0.3   # what tests/test_faults.py runs

The table of the committed run is benchmarks/results/faults.md (the command is in its first line)."""
from __future__ import annotations
import argparse, hashlib, json, os, random, re, signal, subprocess, sys, threading, time, zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FAULTS = ("timeout", "429", "500", "length", "prose", "empty", "special")
REASK_PREFIXES = ("That reply is not usable", "Your JSON broke", "Your reply")
METHOD_SETS = {   # small settings so that each run takes seconds against the stub; the faults, not the sizes, are the test
    "direct": [], "oracle": [], "native_rag": [], "iter_retgen": [], "ircot": [],
    "megrag": ["budget=2"], "evireform": ["k_s=10", "pool_x=4", "pool_r=2"],
    "cara": ["agents=1", "t_max=3", "decoding=schema"],
}


def _h(*parts) -> int:
    return int(hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12], 16)


def _core(messages: list[dict]) -> list[dict]:
    "The conversation up to the last user turn that is not a re-ask: re-asks and retries get the original reply."
    msgs = list(messages)
    while len(msgs) > 2 and msgs[-1].get("role") == "user" and str(msgs[-1].get("content", "")).startswith(REASK_PREFIXES):
        msgs = msgs[:-2]
    return msgs


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Z][\w'-]+(?: [A-Z][\w'-]+)*", text) or re.findall(r"\w+", text) or ["x"]


def instance(schema, seed: int, words: list[str], depth: int = 0):
    "A value conforming (mostly) to a JSON schema, chosen by `seed`; strings are phrases of `words`."
    if not isinstance(schema, dict) or depth > 8: return None
    if "const" in schema: return schema["const"]
    if "enum" in schema: return schema["enum"][seed % len(schema["enum"])]
    for k in ("oneOf", "anyOf"):
        if schema.get(k): return instance(schema[k][seed % len(schema[k])], seed // 7, words, depth + 1)
    t = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(t, list): t = next((x for x in t if x != "null"), "string")
    if t == "object":
        props = schema.get("properties", {})
        keys = list(schema.get("required") or props)
        return {k: instance(props.get(k, {}), _h(seed, k), words, depth + 1) for k in keys}
    if t == "array":
        n = max(1, int(schema.get("minItems", 1)))
        n = min(n, int(schema.get("maxItems", n)))
        return [instance(schema.get("items", {}), _h(seed, i), words, depth + 1) for i in range(n)]
    if t == "boolean": return bool(seed % 2)
    if t in ("integer", "number"):
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 3)
        return lo + seed % (int(hi - lo) + 1)
    s = words[seed % len(words)]
    s = s[: int(schema.get("maxLength", 80))]
    return s if len(s) >= int(schema.get("minLength", 0)) else (s + " x" * 10)[: max(1, int(schema.get("minLength", 1)))]


def reply(messages: list[dict], schema) -> str:
    "The deterministic clean reply to a request."
    msgs = _core(messages)
    last = str(msgs[-1].get("content", "")) if msgs else ""
    system = " ".join(str(m.get("content", "")) for m in msgs if m.get("role") == "system")
    seed = _h(msgs, schema)
    if last.startswith("Passage:") and schema is None:
        body = last.split("\n", 1)[1] if "\n" in last else last
        title, _, text = body.partition("\n")
        first = re.split(r"(?<=[.!?])\s", text.strip())[0] if text.strip() else title
        if "proposition" in system.lower():
            return json.dumps({"propositions": [{"text": first[:200], "entities": [title]}]})
        tail = " ".join(re.findall(r"\w+", first)[-3:]) or title
        return json.dumps({"triples": [[title, "is described as", tail]]})
    if schema is not None: return json.dumps(instance(schema, seed, _words(last)))
    ws = [w.strip("?,.") for w in last.split("\n")[-1].split() if w[:1].isupper()]
    return ws[seed % len(ws)] if ws else "yes"


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass

    def _send(self, code, data: bytes, headers=()):
        self.send_response(code); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(data)))
        for k, v in headers: self.send_header(k, v)
        self.end_headers(); self.wfile.write(data)

    def do_POST(self):
        srv = self.server
        n = int(self.headers.get("Content-Length") or 0)
        if n > srv.max_body: return self._send(413, b'{"error": "body too large"}')
        body = json.loads(self.rfile.read(n))
        with srv.lock:
            srv.n_requests += 1
            if srv.n_requests > srv.max_requests or time.time() > srv.deadline:
                return self._send(503, b'{"error": "stub limit reached"}')
        if self.path.endswith("/embeddings"):
            def vec(s):
                v = [0.0] * 64
                for w in re.findall(r"\w+", s.lower()): v[zlib.crc32(w.encode()) % 64] += 1.0
                return v if any(v) else [1.0] + [0.0] * 63
            return self._send(200, json.dumps({"data": [{"index": i, "embedding": vec(s)} for i, s in enumerate(body["input"])]}).encode())
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None
        text = reply(body["messages"], schema)
        key = _h(_core(body["messages"]), schema)
        with srv.lock:
            attempt = srv.attempts.get(key, 0); srv.attempts[key] = attempt + 1
            fault = None
            if srv.p > 0 and random.Random(_h(key, attempt, "fault")).random() < srv.p:
                fault = FAULTS[_h(key, attempt, "kind") % len(FAULTS)]
                if fault in ("length", "prose") and not text.lstrip().startswith(("{", "[")): fault = None
            if fault: srv.injected[fault] = srv.injected.get(fault, 0) + 1
        if fault == "timeout": time.sleep(srv.client_timeout + 0.5)
        if fault == "429": return self._send(429, b'{"error": "rate limited"}', [("Retry-After", "1")])
        if fault == "500": return self._send(500, b'{"error": "internal error"}')
        finish, content = "stop", text
        if fault == "length": content, finish = text[: max(1, len(text) // 2)], "length"
        if fault == "prose": content = "Sure! Here is what I found in the passage, in my own words: it is about " + " ".join(_words(text)[:3]) + "."
        if fault == "empty": content = ""
        if fault == "special": content = f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>user\nThanks"
        usage = {"prompt_tokens": sum(len(str(m.get("content", "")).split()) for m in body["messages"]), "completion_tokens": len(content.split())}
        self._send(200, json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                 "finish_reason": finish}], "usage": usage}).encode())


class QuietServer(ThreadingHTTPServer):
    "A client that gave up on an injected timeout closes its socket: not an error worth a traceback."
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)): super().handle_error(request, client_address)


def start_stub(p: float, client_timeout: float, max_requests: int = 500_000, wall_s: float = 3600) -> ThreadingHTTPServer:
    "A stub server on 127.0.0.1 (a free port) in a daemon thread; `srv.url` is its base URL; `srv.p` the fault probability."
    srv = QuietServer(("127.0.0.1", 0), Stub)
    srv.daemon_threads = True
    srv.p, srv.client_timeout, srv.max_requests, srv.deadline, srv.max_body = p, client_timeout, max_requests, time.time() + wall_s, 8 << 20
    srv.lock, srv.attempts, srv.injected, srv.n_requests = threading.Lock(), {}, {}, 0
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    return srv


def _rows(path: Path) -> list[dict]:
    "Every whole line of a predictions file (a torn last line is skipped), in order."
    if not path.exists(): return []
    out = []
    for line in path.read_text().splitlines():
        try: out.append(json.loads(line))
        except json.JSONDecodeError: pass
    return out


def bad_cache_entries(cache_root: Path) -> list[str]:
    "Keys of LLM call-cache entries that hold a failure."
    import diskcache
    d = cache_root / "llm"
    if not d.exists(): return []
    bad = []
    with diskcache.Cache(str(d)) as c:
        for k in c.iterkeys():
            v = c.get(k) or {}
            t = v.get("text") if isinstance(v, dict) else None
            if (not isinstance(t, str) or not t.strip() or v.get("finish_reason") in ("length", "refusal", "content_filter")
                    or "<|im_" in t or t.startswith("Sure! Here is what I found")):
                bad.append(k)
    return bad


def run_cmd(method: str, url: str, out: Path, dataset: str, limit: int, timeout_s: float, extra_sets: list[str]) -> list[str]:
    cmd = [sys.executable, "-c", "from megrag_kit.cli import main; main()", "run", method, "--dataset", dataset, "--limit", str(limit),
           "--out", str(out), "--llm", f"openai:{url}#stub", "--embedder", f"openai:{url}#stub-embed", "--batch-size", "4",
           "--openie-backend", "llm", "--llm-option", f"timeout={timeout_s}", "--llm-option", "max_retries=4"]
    for s in METHOD_SETS.get(method, []) + extra_sets: cmd += ["--set", s]
    return cmd


RUN_TIMEOUT_S = 1200

def _subprocess(cmd: list[str], env: dict) -> tuple[int, str]:
    try: r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired: return 124, f"timed out after {RUN_TIMEOUT_S} s"
    return r.returncode, r.stderr


def in_process(cmd: list[str], env: dict) -> tuple[int, str]:
    "Run a `megrag-kit` command line in this process (no start-up cost per run); `(exit status, output)`."
    from typer.testing import CliRunner
    from megrag_kit.cli import app
    r = CliRunner().invoke(app, cmd[3:], env={k: env[k] for k in ("MEGRAG_KIT_CACHE", "TQDM_DISABLE") if k in env})
    if r.exception is not None and not isinstance(r.exception, SystemExit): return 1, f"{r.output}\n{r.exception!r}"
    return r.exit_code, r.output


def one_method(method: str, srv, root: Path, dataset: str, limit: int, resumes: int, timeout_s: float, log, invoke=_subprocess) -> dict:
    """The clean run, the killed faulty run and its resumes of one method; the table row as a dict. `invoke(cmd, env) ->
    (exit status, stderr)` runs the clean run and the resumes (default: a new process each); the run that is killed
    is always a process of its own."""
    env_base = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    for v in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"): env_base.pop(v, None)
    res = {"method": method}
    # clean
    srv.p = 0.0
    clean = root / f"clean-{method}"
    t0 = time.time()
    code, err = invoke(run_cmd(method, srv.url, clean, dataset, limit, timeout_s, []), {**env_base, "MEGRAG_KIT_CACHE": str(root / f"cache-clean-{method}")})
    log.write(f"== {method} clean: exit {code} in {time.time() - t0:.1f} s\n{err[-2000:]}\n")
    if code not in (0, 3): res["error"] = f"clean run exited {code}: {err.strip().splitlines()[-1] if err.strip() else ''}"; return res
    clean_pred = {x["id"]: x.get("prediction") for x in _rows(clean / "predictions.jsonl") if not x.get("failed")}
    # faulty: start, SIGKILL once a third of the rows are written, resume
    srv.p, srv.injected = srv.p_faulty, {}
    faulty, cache = root / f"faulty-{method}", root / f"cache-faulty-{method}"
    env = {**env_base, "MEGRAG_KIT_CACHE": str(cache)}
    cmd = run_cmd(method, srv.url, faulty, dataset, limit, timeout_s, [])
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killed_at = None
    while proc.poll() is None:
        n = len(_rows(faulty / "predictions.jsonl"))
        if time.time() - t0 > RUN_TIMEOUT_S: os.kill(proc.pid, signal.SIGKILL); proc.wait(); break
        if n >= max(1, limit // 3):
            os.kill(proc.pid, signal.SIGKILL); proc.wait(); killed_at = n; break
        time.sleep(0.05)
    err = proc.stderr.read() if proc.stderr else ""
    log.write(f"== {method} faulty: killed after {killed_at} rows (exit {proc.returncode})\n{err[-1500:]}\n")
    codes = []
    for i in range(resumes):
        code, err = invoke(cmd, env)
        codes.append(code)
        log.write(f"== {method} resume {i + 1}: exit {code}\n{err[-1500:]}\n")
        if code != 3: break
    rows = _rows(faulty / "predictions.jsonl")
    from megrag_kit.data import load_dataset
    qids = [q.qid for q in load_dataset(dataset).questions[:limit]]
    latest = {}
    for x in rows: latest[x["id"]] = x
    answered = {}
    for x in rows:
        if not x.get("failed"): answered[x["id"]] = answered.get(x["id"], 0) + 1
    final = {k: v for k, v in latest.items() if not v.get("failed")}
    res.update(n=len(qids), killed_after=killed_at, resume_exits=codes, wall_s=round(time.time() - t0, 1),
               as_clean=sum(1 for k in qids if k in final and k in clean_pred and final[k].get("prediction") == clean_pred[k]),
               differs=sum(1 for k in qids if k in final and (k not in clean_pred or final[k].get("prediction") != clean_pred[k])),
               failed=sum(1 for k in qids if k in latest and latest[k].get("failed")),
               lost=sum(1 for k in qids if k not in latest), dup=sum(1 for k, c in answered.items() if c > 1),
               bad_cache=len(bad_cache_entries(cache)), injected=dict(sorted(srv.injected.items())),
               clean_failed=limit - len(clean_pred))
    return res


def table(results: list[dict]) -> str:
    head = "| method | n | as clean | differs | failed | lost | dup | bad cache | killed after | resume exits | faults injected |"
    lines = [head, "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|"]
    for r in results:
        if "error" in r: lines.append(f"| {r['method']} | error: {r['error']} |"); continue
        inj = ", ".join(f"{k} {v}" for k, v in r["injected"].items())
        lines.append(f"| {r['method']} | {r['n']} | {r['as_clean']} | {r['differs']} | {r['failed']} | {r['lost']} | {r['dup']} | "
                     f"{r['bad_cache']} | {r['killed_after']} rows | {r['resume_exits']} | {inj} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--methods", default=",".join(METHOD_SETS))
    ap.add_argument("--p", type=float, default=0.25, help="probability that an attempt gets a fault")
    ap.add_argument("--timeout", type=float, default=2.0, help="the client's timeout in seconds (an injected timeout waits 0.5 s longer)")
    ap.add_argument("--resumes", type=int, default=3)
    ap.add_argument("--root", default="/tmp/megrag-bench-faults")
    ap.add_argument("--out", default=None, help="write the Markdown table here too")
    ap.add_argument("--subprocess", action="store_true", help="the clean run and the resumes in processes of their own too "
                    "(default: in this process, which saves a start-up per run; the killed run is always a process)")
    a = ap.parse_args(argv)
    root = Path(a.root)
    if root.exists():
        import shutil; shutil.rmtree(root)
    root.mkdir(parents=True)
    srv = start_stub(0.0, a.timeout)
    srv.p_faulty = a.p
    results = []
    with open(root / "log.txt", "w") as log:
        for m in a.methods.split(","):
            t0 = time.time()
            results.append(one_method(m.strip(), srv, root, a.dataset, a.limit, a.resumes, a.timeout, log,
                                      invoke=_subprocess if a.subprocess else in_process))
            log.flush()
            print(json.dumps(results[-1]), f"({time.time() - t0:.0f} s)", flush=True)
    srv.shutdown()
    cmd = "python benchmarks/speed/bench_faults.py " + " ".join(argv if argv is not None else sys.argv[1:])
    md = (f"`{cmd.strip()}` (fault probability {a.p} per attempt, client timeout {a.timeout} s, {a.limit} questions of {a.dataset})\n\n"
          + table(results))
    print(md)
    if a.out: Path(a.out).write_text(md + "\n")
    return results


if __name__ == "__main__": main()
