"The explorer (megrag_kit.viz) on the committed run folders: widgets, static HTML, highlight spans."
import html, json, re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import needs_shared
from megrag_kit.core import Passage
from megrag_kit.jsonl import read_jsonl
from megrag_kit.viz import Explorer, RunView, compare_html, highlight, node_html, run_page, steps, unit_spans

ROOT = Path(__file__).resolve().parents[1]
SEAM = ROOT / "runs" / "2wiki21-megrag-full-seam"
PRESEAM = ROOT / "runs" / "2wiki21-megrag-full-preseam"
NATIVE = ROOT / "runs" / "2wiki20-native_rag"
EVI = ROOT / "runs" / "2wiki20-evireform"


class _Marks(HTMLParser):
    "Text inside each <mark title=UID> (nested marks included), by UID."
    def __init__(self):
        super().__init__(); self.open, self.got = [], {}
    def handle_starttag(self, tag, attrs):
        if tag == "mark": self.open.append([dict(attrs)["title"], ""])
    def handle_endtag(self, tag):
        if tag == "mark":
            uid, t = self.open.pop(); self.got.setdefault(uid, []).append(t)
    def handle_data(self, data):
        for m in self.open: m[1] += data

def _marked(h):
    p = _Marks(); p.feed(h); return p.got

def _rows(d): return read_jsonl(d / "predictions.jsonl")           # a committed run may be stored gzipped


def test_unit_spans_worked():
    text = "Sofia's Last Ambulance is a film by Ilian Metev. It premiered at Cannes in 2012."
    # sentence: exact substring; 'It premiered' starts after the first sentence and its space (48 + 1)
    assert unit_spans(text, "s7.1", "It premiered at Cannes in 2012.") == [(49, 80)]
    # triple: subject and object, case-insensitive, relation never
    assert unit_spans(text, "t7.0", "ilian metev | premiered at | Cannes") == [(36, 47), (65, 71)]
    assert unit_spans(text, "p7", "") == [(0, 80)]
    # overlapping candidates merge into one span
    assert unit_spans("Ilian Metev", "t7.1", "Ilian Metev | is | Ilian") == [(0, 11)]
    with pytest.raises(ValueError, match="malformed unit id"): unit_spans(text, "7.1", "x")


def test_highlight_escapes_and_merges():
    # (2, 5) crosses the end of (0, 3): it is cut at 3 and nested
    out = highlight("a<b & c", [(0, 3, "s1.0"), (2, 5, "t1.0")])
    assert out == '<mark class="ev ev-s" title="s1.0">a&lt;<mark class="ev ev-t" title="t1.0">b</mark></mark> &amp; c'


def test_steps_of_each_trace_kind():
    seam = _rows(SEAM)
    two = [r for r in seam if r["steps"] == 2]
    assert len(two) == 1                                  # question 12 is the only two-node graph of the run
    n1, n2 = steps(two[0], method="megrag")               # the method's own view (Method.view_nodes)
    assert (n1["step"], n1["composition"], n1["stop"], n2["stop"]) == (1, "T+S", False, True)
    assert n1["relation"] == two[0]["trace"]["nodes"][0]["relation"] and n2["query"] == n1["next_query"]
    assert len(n1["evidence"]) == len(two[0]["trace"]["nodes"][0]["evidence"]["triples"]) + len(two[0]["trace"]["nodes"][0]["evidence"]["sentences"])
    nat = _rows(NATIVE)[0]
    (only,) = steps(nat, method="native_rag")
    assert [u for u, _ in only["evidence"]] == [f"p{p}" for p in nat["retrieved"][:5]]
    evi = _rows(EVI)[0]
    es = steps(evi, method="evireform")
    assert es == RunView(EVI, dataset=[]).steps(0)              # the run folder names its method
    assert len(es) == 1 + len(evi["trace"]["rounds"])
    assert [u for u, _ in es[0]["evidence"]] == [u for u, _ in evi["trace"]["selected"]]


def test_static_html_holds_every_node_of_every_trace():
    view = RunView(SEAM, dataset=[])                     # no corpus: units listed alone
    page = run_page(view)
    assert page.count("<details") == len(view) == 21
    for r in view.rows:
        for n in steps(r, method=view.method):
            assert html.escape(n["query"]) in page
            assert html.escape(n["answer"]) in page
            for uid, unit in n["evidence"]: assert html.escape(unit) in page
    assert page.count('class="mk-node"') == sum(r["steps"] for r in view.rows)


def test_explorer_widgets_from_real_run_and_compare():
    ex = Explorer(SEAM, PRESEAM, dataset=[])
    assert len(ex.pick.options) == 21 and ex.pick.options[11][1] == _rows(SEAM)[11]["id"]
    ex.pick.value = ex.pick.options[11][1]
    assert ex.node.max == 2 and ex.node.value == 0
    ex.node.value = 1
    v = ex.view.value
    assert v.count('class="mk-side"') == 1 and v.count('class="mk-node"') == 2 and v.count("<h4>v1 ") == 2
    assert "Who is the mother of Xawery Żuławski?" in v
    a = RunView(SEAM, dataset=[])
    b = RunView(NATIVE, dataset=[])
    with pytest.raises(KeyError): compare_html(a, b, 20)  # the 20-question run lacks question 21


def test_node_marks_fake_passages():
    p = Passage(3, "X", "Anna Bell was born in Rome. She died in Oslo.")
    node = dict(step=1, query="q", composition="T+S", evidence=[("s3.1", "She died in Oslo."), ("t3.0", "Anna Bell | born in | Rome")],
                answer="Oslo", missing="", relation="", next_query="", stop=True, final="Oslo")
    h = node_html(node, {3: p})
    assert '<mark class="ev ev-t" title="t3.0">Anna Bell</mark> was born in <mark class="ev ev-t" title="t3.0">Rome</mark>. ' \
           '<mark class="ev ev-s" title="s3.1">She died in Oslo.</mark>' in h
    assert "<b>b1 intermediate answer</b>: Oslo" in h and "<b>answer</b>: Oslo" in h


@needs_shared
def test_highlights_at_sentence_spans_in_real_passages(monkeypatch):
    monkeypatch.setenv("MEGRAG_KIT_DATA", str(Path(__import__("conftest").SHARED)))
    view = RunView(SEAM)
    assert view.passages is not None and len(view.passages) == 6119
    r = view.row(11)
    h = view.question_html(11, step=1)
    sents = [(u, t) for u, t in view.steps(11)[0]["evidence"] if u.startswith("s")]
    assert len(sents) == 22
    for uid, text in sents:                                # each selected sentence is marked, whole, under its own id
        assert _marked(h).get(uid) == [text], uid
    p = view.passages[1050]
    s, e = unit_spans(p.text, "s1050.1", "It was directed by Chano Urueta.")[0]
    assert p.text[s:e] == "It was directed by Chano Urueta." and e == len(p.text)


def test_graph_svg_draws_units_gold_relations_and_stop():
    from megrag_kit.viz import graph_svg, explore_html
    row = {"id": "q1", "question": "Where did the performer of the song die?", "gold_pids": [3, 9], "gold_answers": ["Detroit"],
           "prediction": "Detroit", "f1": 1.0,
           "trace": {"nodes": [
               {"step": 1, "query": "Who performed the song?", "composition": "T+S", "intermediate_answer": "Aretha Franklin",
                "relation": "performer -> place of death", "next_query": "Where did Aretha Franklin die?", "stop": False,
                "evidence": {"triples": [["t9.0", "song | performer | Aretha Franklin"]], "sentences": [["s4.1", "Unrelated."]]}},
               {"step": 2, "query": "Where did Aretha Franklin die?", "composition": "P", "intermediate_answer": "Detroit",
                "stop": True, "answer": "Detroit", "evidence": {"passages": [["p3", ""]]}}]}}
    svg = graph_svg(row, passages={3: Passage(3, "Aretha Franklin", "She died in Detroit.")}, method="megrag")
    assert svg.count('class="mkg-node"') == 2 and svg.count('class="mkg-edge"') == 2
    assert svg.count('class="mkg-u mkg-goldu"') == 2 and svg.count('class="mkg-u"') == 1        # t9.0 and p3 gold, s4.1 not
    assert "r: performer -&gt; place of death" in svg and "STOP · answer: Detroit" in svg
    assert "★ p3 Aretha Franklin" in svg                                      # a passage unit is named by its title
    row["trace"]["nodes"][1]["stop"] = False                                  # the budget ran out instead
    assert "budget spent" in graph_svg(row, method="megrag")
    page = explore_html(RunView(SEAM, dataset=[]))
    assert page.count('class="mkg-question"') == 21 and "<script src" not in page and "cdn" not in page.lower()
