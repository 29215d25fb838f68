"""IRCoT and ITER-RETGEN: the control flow with a scripted fake LLM and a hashing embedder over the demo corpus
(stop rule, step counts, query composition, the pooled ranking worked out by hand), and a short run of the real
offline models on two demo (2Wiki dev) questions (slow)."""
import re
import json
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.ircot import IRCOT_SYSTEM, cot_answer, merge_hits
from megrag_kit.models import Generation
from megrag_kit.method import ConfigError, Resources, build_method, get_method
from megrag_kit.runner import run
from conftest import ScriptedLLM
from fakes import HashEmbedder


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.fixture(scope="module")
def root(tmp_path_factory): return tmp_path_factory.mktemp("store")


def make(name, demo, root, llm, **params):
    return build_method(name, params, Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=root))


class Reasoner(ScriptedLLM):
    "Tells reason calls (the IRCoT system prompt) from reader calls by the system message; scripted replies for each."
    def __init__(self, thoughts, answer="Cork"):
        self.thoughts, self.answer, self.kinds = list(thoughts), answer, []
        super().__init__(None)

    def _generate(self, messages, **params):
        out = []
        for m in messages:
            reason = m[0]["content"] == IRCOT_SYSTEM
            self.kinds.append("reason" if reason else "read"); self.seen.append(m)
            text = self.thoughts.pop(0) if reason else (self.answer if isinstance(self.answer, str) else self.answer.pop(0))
            out.append(Generation(text, 10, 3))
        return out


# ---- the pooled ranking, by hand

def test_merge_hits_by_hand():
    """Question hits 7 (.9), 3 (.5); thought hits 3 (.8), 5 (.5); a third query 9 (.95), 7 (.1).
    By score: 9 .95, 7 .9 (its best, not .1), 3 .8, 5 .5. By first appearance: 7, 3, 5, 9."""
    steps = [[(7, 0.9), (3, 0.5)], [(3, 0.8), (5, 0.5)], [(9, 0.95), (7, 0.1)]]
    assert merge_hits(steps) == [(9, 0.95), (7, 0.9), (3, 0.8), (5, 0.5)]
    assert merge_hits(steps, "order") == [(7, 0.9), (3, 0.8), (5, 0.5), (9, 0.95)]
    assert merge_hits(steps, cap=3) == [(9, 0.95), (7, 0.9), (3, 0.8)]
    assert merge_hits([[(2, 0.5)], [(1, 0.5)]]) == [(2, 0.5), (1, 0.5)]          # a tie: first found first
    assert merge_hits([]) == [] and merge_hits([[], []]) == []
    with pytest.raises(ValueError, match=re.escape("merge must be score|order, got 'max'")): merge_hits(steps, "max")
    with pytest.raises(ValueError, match="cap"): merge_hits(steps, cap=0)


def test_cot_answer():
    assert cot_answer("So the answer is: New York City.") == "New York City"
    assert cot_answer("the answer is yes") == "yes"
    assert cot_answer("Franklin died in Detroit.") is None and cot_answer("") is None


# ---- IRCoT control flow

def test_ircot_stops_when_a_sentence_announces_the_answer(demo, root):
    q = demo.questions[0]
    llm = Reasoner(["Mathew was born in Cork. Then more.", "So the answer is: Cork."])
    a = make("ircot", demo, root, llm, k=3).answer([q])[0]
    assert llm.kinds == ["reason", "reason", "read"]
    assert a.trace["thoughts"] == ["Mathew was born in Cork.", "So the answer is: Cork."]     # first sentence only
    assert [s["query"] for s in a.trace["steps"]] == [q.question, "Mathew was born in Cork."]  # the stopping one is not a query
    assert a.trace["stopped"] == "answer" and a.trace["cot_answer"] == "Cork" and a.fields["steps"] == 2
    assert a.cost.llm_calls == 3 and a.cost.prompt_tokens == 30 and a.prediction == "Cork"
    pool = merge_hits([[tuple(h) for h in s["hits"]] for s in a.trace["steps"]])
    assert a.retrieved == [p for p, _ in pool] and len(a.retrieved) == len(set(a.retrieved)) <= 6
    # the second reason step saw the first sentence and the pool's best passages, best last
    second = llm.seen[1][-1]["content"]
    assert second.endswith(f"Question: {q.question}\nReasoning so far: Mathew was born in Cork.\nNext sentence:")


def test_ircot_never_stop_runs_max_steps_and_retrieves_after_each(demo, root):
    q = demo.questions[0]
    llm = Reasoner(["So the answer is: Cork.", "Cork is in Ireland.", "So the answer is: Cork."], answer="Dublin")
    a = make("ircot", demo, root, llm, k=2, max_steps=3, stop="never").answer([q])[0]
    assert llm.kinds == ["reason"] * 3 + ["read"] and a.fields["steps"] == 3 and a.trace["stopped"] == "max_steps"
    assert len(a.trace["steps"]) == 4 and a.trace["steps"][-1]["query"] == "So the answer is: Cork."
    assert a.prediction == "Dublin" and a.trace["cot_answer"] == "Cork"                # the reader answers by default
    llm = Reasoner(["So the answer is: Cork."], answer="Dublin")
    b = make("ircot", demo, root, llm, answer_from="cot").answer([q])[0]
    assert b.prediction == "Cork" and llm.kinds == ["reason"] and b.cost.llm_calls == 1 and b.trace["raw"] is None


def test_ircot_batch_keeps_each_question_apart(demo, root):
    """Two questions step together: q0 stops at step 1, q1 runs both steps; an empty thought stops a chain."""
    qs = demo.questions[:2]
    llm = Reasoner(["So the answer is: Cork.", "Some fact here.", "So the answer is: Sleep, My Love."], answer="Sleep, My Love")
    a0, a1 = make("ircot", demo, root, llm, k=2).answer(qs)      # q1 is "A or B?": the reader's options hold the answer
    assert (a0.fields["steps"], a1.fields["steps"]) == (1, 2) and llm.kinds == ["reason", "reason", "reason", "read", "read"]
    assert (a0.prediction, a1.prediction, a1.cost.llm_calls, a1.cost.unparsed) == ("Sleep, My Love", "Sleep, My Love", 3, 0)
    assert [s["query"] for s in a1.trace["steps"]] == [qs[1].question, "Some fact here."]
    c = make("ircot", demo, root, Reasoner([""], answer="x")).answer(qs[:1])[0]
    assert c.trace["stopped"] == "empty" and c.trace["thoughts"] == [] and len(c.trace["steps"]) == 1


def test_ircot_pool_cap_and_order(demo, root):
    q = demo.questions[0]
    a = make("ircot", demo, root, Reasoner(["Fact one here.", "Fact two here."]), k=4, max_steps=2, max_passages=5, cot_passages=2, merge="order").answer([q])[0]
    first_seen = list(dict.fromkeys(h[0] for s in a.trace["steps"] for h in s["hits"]))
    assert a.retrieved == first_seen[:5]
    with pytest.raises(ConfigError, match="cot_passages"): make("ircot", demo, root, None, cot_passages=6, max_passages=5)
    with pytest.raises(ConfigError, match="stop must be one of"): make("ircot", demo, root, None, stop="sometimes")


# ---- ITER-RETGEN control flow

def test_iter_retgen_queries_rounds_and_stop(demo, root):
    q = demo.questions[0]
    llm = Reasoner([], answer=["Dublin", "Cork", "Cork"])
    a = make("iter_retgen", demo, root, llm).answer([q])[0]
    assert [r["query"] for r in a.trace["rounds"]] == [q.question, q.question + " Dublin", q.question + " Cork"]
    assert [r["answer"] for r in a.trace["rounds"]] == ["Dublin", "Cork", "Cork"] and a.prediction == "Cork"
    assert a.fields["rounds"] == 3 and a.cost.llm_calls == 3 and a.trace["stopped"] == "iterations"
    assert a.retrieved == [h[0] for h in a.trace["rounds"][-1]["hits"]] and len(a.retrieved) == 5
    # same_answer: the third round is the first to repeat, so a fourth never runs
    b = make("iter_retgen", demo, root, Reasoner([], answer=["Dublin", "Cork", "Cork"]), iterations=4, stop="same_answer").answer([q])[0]
    assert b.fields["rounds"] == 3 and b.trace["stopped"] == "same_answer"
    m = make("iter_retgen", demo, root, Reasoner([], answer=["Dublin", "Cork"]), iterations=2, ranking="merged").answer([q])[0]
    assert m.retrieved == [p for p, _ in merge_hits([[tuple(h) for h in r["hits"]] for r in m.trace["rounds"]])]
    with pytest.raises(ConfigError, match="iterations must be >= 1"): make("iter_retgen", demo, root, None, iterations=0)


def test_runner_writes_steps_and_summary(demo, root, tmp_path):
    m = make("ircot", demo, root, Reasoner(["So the answer is: Cork."] * 3, answer="Cork"))
    s = run(m, demo, tmp_path / "r", limit=3)
    rows = [json.loads(l) for l in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    assert [r["steps"] for r in rows] == [1, 1, 1] and s["steps"] == 1.0 and s["stopped_answer"] == 100.0
    assert get_method("iter_retgen").summarize([{"rounds": 2, "trace": {"rounds": [{"answer": "A"}, {"answer": "a."}]}},
                                                {"rounds": 1, "trace": {"rounds": [{"answer": "A"}]}}]) == {"rounds": 1.5, "converged": 50.0}


# ---- the real models, two 2Wiki dev questions of the shipped demo

def test_real_models_on_two_demo_questions(demo, minilm, smollm, demo_store):
    """IRCoT and ITER-RETGEN with SmolLM2-135M and MiniLM: each first retrieval is the dense top 5, a real reply feeds
    the next query. The demo corpus (254 passages, its vectors shared by the real-model tests), not the 6,119-passage
    2Wiki corpus, which a fresh machine spent 16 minutes embedding."""
    ds = demo
    qs = ds.questions[:2]
    res = Resources(ds, llm=smollm, embedder=minilm, store_root=demo_store)
    top = [[p for p, _ in h] for h in res.store.search([q.question for q in qs], 5)]
    for a, t in zip(build_method("ircot", {"max_steps": 1}, res).answer(qs), top):
        assert a.trace["steps"][0]["query"] and [h[0] for h in a.trace["steps"][0]["hits"]] == t
        assert set(t) <= set(a.retrieved) and len(a.retrieved) == len(set(a.retrieved)) <= 10
        assert a.fields["steps"] == 1 and a.cost.llm_calls >= 2 and a.trace["raw"] is not None     # one reason step, then the reader
    for a, t in zip(build_method("iter_retgen", {"iterations": 2}, res).answer(qs), top):
        r1, r2 = a.trace["rounds"]
        assert [h[0] for h in r1["hits"]] == t and r2["query"] == f"{r1['query']} {r1['raw']}".strip() and a.prediction == r2["answer"]
        assert a.cost.llm_calls >= 2 and len(a.retrieved) == 5


# ---- issue 24: why no chain stopped on "answer is"

def test_ircot_worked_examples_are_single_reason_steps():
    "Each worked example answers with one sentence of its chain after the sentences before it, as the question's turn asks."
    from megrag_kit.ircot import IRCOT_CHAINS, chain_sentences, cot_prompt
    p = cot_prompt("Who?", ["a"], [])
    shots = [(p[i]["content"], p[i + 1]["content"]) for i in range(1, len(p) - 1, 2)]
    for (user, reply), chain in zip(shots, IRCOT_CHAINS):
        sents = chain_sentences(chain)
        assert reply in sents and len(chain_sentences(reply)) == 1                    # one sentence, never the whole chain
        done = sents[:sents.index(reply)]
        assert user.endswith("Next sentence:" if done else "?") and all(s in user for s in done)
    assert sum(r.startswith("So the answer is") for _, r in shots) >= 2 and sum("Reasoning so far" not in u for u, _ in shots) >= 2


def test_ircot_a_repeated_thought_stops_the_chain_and_is_counted(demo, root):
    q = demo.questions[0]
    llm = Reasoner(["Mathew was born in Cork.", "Mathew was born in Cork. So the answer is: Cork."])
    a = make("ircot", demo, root, llm, k=2).answer([q])[0]
    assert a.trace["stopped"] == "repeat" and a.trace["thoughts"] == ["Mathew was born in Cork."] and len(a.trace["steps"]) == 2
    assert llm.kinds == ["reason", "reason", "read"]
    s = get_method("ircot").summarize([{"steps": 2, "trace": a.trace}, {"steps": 1, "trace": {"stopped": "answer"}}])
    assert (s["stopped_repeat"], s["stopped_answer"], s["stopped_empty"]) == (50.0, 50.0, 0.0)


def test_ircot_default_depth_reaches_the_answer_sentence_of_a_two_fact_chain(demo, root):
    q = demo.questions[0]
    llm = Reasoner(["Charles Mathew's father is James Charles Mathew.", "James Charles Mathew was buried in Cork.", "So the answer is: Cork."])
    a = make("ircot", demo, root, llm).answer([q])[0]
    assert a.trace["stopped"] == "answer" and a.fields["steps"] == 3 and len(a.trace["steps"]) == 3
