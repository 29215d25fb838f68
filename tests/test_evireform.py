"""EviReform with the real offline models (slow) and the parser propositions (slow: spaCy is loaded). The other
tests, with the shared stand-ins (`megrag_kit.testing`), are in the EviReform notebooks beside the code they test
(nbs/20_evireform.ipynb, 20a_evireform_propositions, 20b_evireform_signals, 20c_evireform_policy,
20d_evireform_summary), run by nbdev_test."""
import json, uuid
import pytest
from megrag_kit.data import load_dataset
from megrag_kit.evireform import propositions_path
from megrag_kit.method import Resources, build_method
from conftest import ScriptedLLM
from megrag_kit.testing import HashEmbedder


class Script(ScriptedLLM):
    """Routes by prompt kind: extraction (each passage's first sentence, its title as entity), selector, writer, reorder, reader."""
    def __init__(self, selected=(1,), queries=(("Sir James Charles Mathew",),), order=(3, 1), fail_pids=()):
        self.selected, self.queries, self.order, self.kinds = selected if isinstance(selected, str) else list(selected), list(queries), list(order), []
        self.fail_titles = set(fail_pids)
        super().__init__(self.route)
        self.model_id = f"scripted-{uuid.uuid4().hex}"          # a fresh proposition file per test

    def route(self, msg):
        if msg.startswith("Passage:"):
            self.kinds.append("extract"); lines = msg.split("\n")
            if lines[1] in self.fail_titles: return "no propositions here"
            return json.dumps({"propositions": [{"text": lines[2].split(". ")[0], "entities": [lines[1]]}]})
        if msg.startswith("That reply is not usable"):
            self.kinds.append("reask"); return "still not JSON"
        if "Observed passages:" in msg:
            self.kinds.append("write"); qs = self.queries.pop(0) if self.queries else ()
            return qs if isinstance(qs, str) else json.dumps({"queries": list(qs)})     # a str: the raw reply (prose)
        if "\nPassages:\n" in msg: self.kinds.append("reorder"); return json.dumps({"order": self.order})
        if "\nStatements:\n" in msg:
            self.kinds.append("select"); return self.selected if isinstance(self.selected, str) else json.dumps({"selected": self.selected})
        self.kinds.append("read"); return "Cork"


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.mark.slow
def test_parser_propositions_rule_on_a_hand_written_passage():
    from megrag_kit.evireform import default_proposition_parser
    text = ("Lothair II\nLothair II (835 \u2013 8 August 869) was the king of Lotharingia. He was the second son of Emperor Lothair I; "
            "his mother was Ermengarde of Tours. It is near the Rhine. In 855 he married Teutberga.")
    got, none = default_proposition_parser().extract([text, "Untitled\n1999."])
    assert got == [
        {"text": "Lothair II (835 \u2013 8 August 869) was the king of Lotharingia.", "entities": ["lothair ii", "lotharingia"]},
        {"text": "Lothair II was the second son of Emperor Lothair I", "entities": ["lothair ii", "lothair"]},   # split at ';', He -> title
        {"text": "Lothair II's mother was Ermengarde of Tours.", "entities": ["lothair ii", "ermengarde of tours"]},  # his -> title's
        {"text": "Lothair II is near the Rhine.", "entities": ["lothair ii"]},
        {"text": "In 855 he married Teutberga.", "entities": ["teutberga"]}]      # a pronoun that does not start the piece stays
    assert none == []


@pytest.mark.slow
def test_parser_backend_switches_the_proposition_view(demo, tmp_path):
    from megrag_kit.index import ParsedView
    res = Resources(demo, llm=Script(), embedder=HashEmbedder(), store_root=tmp_path, openie_backend="parser")
    m = build_method("evireform", dict(propositions="eager"), res)
    assert isinstance(m.view, ParsedView) and propositions_path(res.store).name.endswith("-propositions1.jsonl")
    assert len(m.view.extracted) == len(demo.corpus) and m.view.path.exists()               # the whole corpus, eagerly
    (a,) = m.answer(demo.questions[:1])
    assert "extract" not in m.llm.kinds and m.llm.kinds.count("select") == 1 and a.fields["pool_propositions"] > a.fields["pool_passages"]
    vec = tmp_path / "vectors" / "hash-bow-256" / f"propositions-{m.view.path.stem}.keys"
    assert len(vec.read_text().split()) == m.index.store_vectors.encoded > 0                 # the vectors it searched are on disk
    llm_res = Resources(demo, llm=Script(), embedder=HashEmbedder(), store_root=tmp_path)
    assert propositions_path(llm_res.store) != propositions_path(res.store)                  # never the LLM's file


# ---- the real offline models

@pytest.mark.slow
def test_real_offline_models_on_two_questions(demo, minilm, smollm, demo_store):
    """SmolLM2-135M extracts, selects, writes and reads; MiniLM ranks. Two questions (one batch of two) and small pools
    (2 passages of x, 1 per residual query) keep it near a minute on the CPU: what only the real models show is that
    their replies pass through every stage, which one batch shows as well as many."""
    res = Resources(demo, llm=smollm, embedder=minilm, store_root=demo_store)
    m = build_method("evireform", dict(pool_x=2, pool_r=1, L=1, scope="pool"), res)
    answers = m.answer(demo.questions[:2])
    for q, a in zip(demo.questions[:2], answers):
        assert len(a.retrieved) == 20 and len(set(a.retrieved)) == 20 and a.prediction.strip()
        t = a.trace
        assert t["pool"][:2] == [p for p, _ in m.store.search([q.question], 2)[0]] and len(t["pool"]) <= 2 + 2 * 1
        assert t["selected"] or a.fields["pool_propositions"] == 0
        assert a.fields["pool_passages"] == len(t["pool"]) and a.cost.llm_calls >= 2
        json.dumps(t)
    done = m.view.extracted
    assert sum(map(len, done.values())) > 0 and all(it["text"] and isinstance(it["entities"], list) for its in done.values() for it in its)
