"""Light stand-ins for the fast test tier (control-flow tests only): the shared hashing embedder, and a scripted policy
that answers every LLM call of the kit's methods."""
import json as _json
from megrag_kit.models import ChatModel, Generation
from megrag_kit.testing import HashEmbedder    # the shared hashing embedder (nbs/02i_testing.ipynb), imported from here


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
