"""Light stand-ins for the fast test tier: an embedder that needs no model (control-flow tests only)."""
import re, zlib
import numpy as np
from megrag_kit.models import Embedder


class HashEmbedder(Embedder):
    """Bag-of-words vectors hashed into `dim` buckets (crc32 of each lower-cased word), L2-normalized.

    Not a language model: passages that share words with a query score higher, which is all the control-flow
    tests of the methods need from a retriever. Loads in microseconds. `model_id` and `dim` name and size it (an
    index keyed by another name or size is another index); `encode_calls` counts `encode` calls."""
    model_id, dim, encode_calls = "hash-bow-256", 256, 0

    def __init__(self, model_id: str | None = None, dim: int | None = None):
        if model_id is not None: self.model_id = model_id
        if dim is not None: self.dim = dim

    def encode(self, texts, batch_size=64):
        self.encode_calls += 1
        x = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()): x[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


import json as _json
from megrag_kit.models import ChatModel, Generation


class ScriptedPolicy(ChatModel):
    """A deterministic stand-in for every LLM call of the kit's methods, for control-flow tests and the fast-tier
    papermill runs of the experiment notebooks (`llm="py:fakes:ScriptedPolicy"`); its answers are not meant to be right.

    OpenIE: one triple `(title, has title, title)` per passage; sufficiency: triples are enough for a question that
    names a film, else not; a node: continues once (to "the director") for a question that names a director, then
    stops with the first word of its intermediate answer; under a continue-only schema (fixed depth) it continues;
    any other prompt (reader, resolver) gets the first capitalized word of the prompt's last line. 0.01 s per call."""
    model_id = "scripted-policy"

    def __init__(self, cache=False): super().__init__(cache=cache)

    def _one(self, msgs, schema) -> str:
        last = msgs[-1]["content"]
        if last.startswith("Passage:"):
            title = last.split("\n")[1]
            return _json.dumps({"triples": [[title, "has title", title]]})
        if "Is the evidence sufficient" in last: return _json.dumps({"sufficient": "film" in last.split("\n")[0].lower()})
        if last.startswith("Initial Query:") or last.startswith("Your JSON broke"):
            turn = next(m["content"] for m in reversed(msgs) if m["content"].startswith("Initial Query:"))
            x, q = turn.split("\n")[0], turn.split("\n")[1]
            only_continue = isinstance(schema, dict) and len(schema.get("oneOf", [])) == 1
            if only_continue or ("director" in x.lower() and q == x.replace("Initial Query:", "Current query:")):
                return _json.dumps(dict(intermediate_answer="the director", resolved_path="film -> director", stop=False, answer="",
                                        missing="the director's details", next_query="Who is the director?", relation="from the film to its director"))
            opts = (schema or {}).get("oneOf", [{}])[0].get("properties", {}).get("answer", {}).get("enum")
            ans = opts[0] if opts else "Paris"
            return _json.dumps(dict(intermediate_answer=ans, resolved_path=f"-> {ans}", stop=True, answer=ans, missing="none", next_query="", relation=""))
        words = [w for w in last.split("\n")[-1].split() if w[:1].isupper()]
        return words[0].strip("?,.") if words else "yes"

    def _generate(self, messages, **params):
        return [Generation(self._one(m, params.get("json_schema")), 20, 5, latency_s=0.01, finish_reason="stop") for m in messages]
