"""IRCoT and ITER-RETGEN with the real offline models on two demo (2Wiki dev) questions (slow). Their control flow,
the stop rules, the pooled ranking worked out by hand, the worked examples and the run summaries are checked in
nbs/11_ircot.ipynb and nbs/12_iter_retgen.ipynb, beside the code, with a scripted LLM and a bag-of-words embedder."""
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.method import Resources, build_method


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


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
