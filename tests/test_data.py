import copy, gzip, json, re, warnings
from collections import Counter
from pathlib import Path
import pytest
import conftest
from megrag_kit.core import DataError, DataWarning, Passage
from megrag_kit.data import (load_dataset, load_hipporag, load_contexts, load_corpus, load_stark_qa, read_records, parse_question,
                             clean_corpus)
from conftest import SHARED, needs_shared, shared_dir


def test_demo_ships_in_package():
    d = load_dataset("demo")
    assert (len(d.questions), len(d.corpus)) == (30, 254)
    q = d.questions[0]
    assert q.question == "Where was the place of burial of Charles Mathew's father?" and q.answers == ["Cork"]
    assert [d.corpus[p].title for p in q.gold_pids] == ["Charles Mathew", "James Charles Mathew"]
    assert q.qtype == "compositional" and q.evidence_triples


@needs_shared
def test_2wiki_registry_matches_hipporag_counts():
    d = load_dataset("2wikimultihopqa", SHARED)
    assert (len(d.questions), len(d.corpus)) == (1000, 6119)
    assert sum(len(q.gold_pids) for q in d.questions) == 2470
    q = d.questions[0]
    assert q.answers[0] == "Detroit" and "Detroit, Michigan" in q.answers
    assert {d.corpus[p].title for p in q.gold_pids} == {"Aretha Franklin", "I Can't See Myself Leaving You"}


@needs_shared
def test_musique_and_hotpotqa_contexts():
    m = load_dataset("musique", SHARED)
    assert len(m.questions) == 292 and len({q.qid for q in m.questions}) == 292
    assert any("skipped" in n for n in m.notes)  # the 8 ids in both files are reported, not silently merged
    assert all(q.gold_pids for q in m.questions) and m.questions[0].decomposition
    h = load_dataset("hotpotqa", SHARED)
    assert len(h.questions) == 200 and all(len(q.gold_pids) == 2 for q in h.questions)
    # HotpotQA sentences carry leading spaces and are joined with "": the gold text has no doubled spaces
    assert "  " not in h.corpus[h.questions[0].gold_pids[0]].text


@needs_shared
def test_legacy_layouts_and_stark():
    hp = load_hipporag(SHARED / "multihop/legacy_hipporag1/hotpotqa_train.json.gz", SHARED / "multihop/legacy_hipporag1/hotpotqa_train_corpus.json.gz")
    assert len(hp.questions) == 100 and len(hp.corpus) == 994 and sum(len(q.gold_pids) for q in hp.questions) == 200
    q = hp.questions[0]   # HippoRAG 1 corpus {title: [sentence]}: found by exact title + joined text
    assert q.answers == ["a spirit"] and [hp.corpus[p].title for p in q.gold_pids] == ["Lilu (mythology)", "Alû"]
    s = load_hipporag(SHARED / "multihop/sample.json.gz", SHARED / "multihop/sample_corpus.json.gz")
    assert s.questions[0].answers == ["Thomas C. Sudhof"] and [s.corpus[p].title for p in s.questions[0].gold_pids] == ["Thomas C. Sudhof"]
    st = load_stark_qa(SHARED / "stark", "prime", "test")
    assert len(st.questions) == 2801 and st.corpus == [] and any("SKB" in n for n in st.notes)
    assert (st.questions[0].qid, st.questions[0].gold_pids, st.questions[0].answers) == ("10328", [18423], [])


def _write(path, recs, jsonl=False):
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps(r) for r in recs) if jsonl else json.dumps(recs))
    return path


def test_bad_record_names_file_record_and_field(tmp_path):
    p = _write(tmp_path / "q.json.gz", [{"id": "a", "question": "Q?", "answer": "x", "paragraphs": [{"title": "T", "paragraph_text": "P", "is_supporting": True}]},
                                         {"id": "b", "answer": "y", "paragraphs": []}])
    with pytest.raises(DataError) as e: load_contexts(p)
    assert e.value.file == p and e.value.record == "b" and e.value.field == "question"


def test_duplicate_ids_are_an_error(tmp_path):
    rec = {"id": "a", "question": "Q?", "answer": "x", "paragraphs": [{"title": "T", "paragraph_text": "P", "is_supporting": True}]}
    p = _write(tmp_path / "q.jsonl.gz", [rec, rec], jsonl=True)
    with pytest.raises(DataError, match="duplicate question ids"): load_contexts(p)


def test_gold_title_missing_from_corpus(tmp_path):
    c = _write(tmp_path / "c.json.gz", [{"title": "A", "text": "a"}])
    q = _write(tmp_path / "q.json.gz", [{"id": "1", "question": "Q?", "answer": "x", "supporting_facts": ["B"]}])
    with pytest.raises(DataError, match="gold passage not in corpus") as e: load_hipporag(q, c)
    assert (e.value.file, e.value.record, e.value.field) == (q, "1", "supporting_facts")
    m = _write(tmp_path / "m.json.gz", [_rec("2", "x", [("A", "other text", True)])])   # by content, and the title is not unique
    c2 = _write(tmp_path / "c2.json.gz", [{"title": "A", "text": "a"}, {"title": "A", "text": "a2"}])
    with pytest.raises(DataError, match=r"gold passage not in corpus: \['A'\]") as e: load_hipporag(m, c2)
    assert (e.value.file, e.value.record, e.value.field) == (m, "2", "paragraphs")
    bad = _write(tmp_path / "bad.json.gz", [{"title": "A"}])
    with pytest.raises(DataError) as e: load_corpus(bad)
    assert (e.value.record, e.value.field) == (0, "text")


def test_jsonl_error_names_line(tmp_path):
    p = tmp_path / "x.jsonl"; p.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match="line 2"): read_records(p)


def test_column_oriented_frame_and_hipporag1_corpus(tmp_path):
    frame = tmp_path / "frame.json"      # pandas DataFrame.to_json(): {column: {row: value}}
    frame.write_text(json.dumps({"title": {"0": "A", "1": "B"}, "text": {"0": "a.", "1": "b."}}))
    assert read_records(frame) == [{"title": "A", "text": "a."}, {"title": "B", "text": "b."}]
    assert [(p.pid, p.title, p.text) for p in load_corpus(frame)] == [(0, "A", "a."), (1, "B", "b.")]
    h1 = _write(tmp_path / "h1.json.gz", {"Lilu": ["Lilu is a spirit.", " It is female."], "Gallu": ["Gallu is a demon."]})
    assert [(p.pid, p.content) for p in load_corpus(h1)] == [(0, "Lilu\nLilu is a spirit. It is female."), (1, "Gallu\nGallu is a demon.")]


def _rec(qid, answer, paras):
    return {"id": qid, "question": f"{qid}?", "answer": answer,
            "paragraphs": [{"title": t, "paragraph_text": x, "is_supporting": g} for t, x, g in paras]}


def test_contexts_corpus_is_deduplicated_union_and_repeats_are_noted(tmp_path):
    f1 = _write(tmp_path / "a.json.gz", [_rec("q1", "x", [("T", "shared", True), ("U", "u", False)]),
                                         _rec("q2", "y", [("U", "u", False), ("V", "v", True)])])
    f2 = _write(tmp_path / "b.jsonl.gz", [_rec("q2", "other", [("W", "w", True)]), _rec("q3", "z", [("T", "shared", True)])], jsonl=True)
    d = load_contexts(f1, f2, name="toy")
    assert [p.content for p in d.corpus] == ["T\nshared", "U\nu", "V\nv"]          # first-seen order, no duplicates
    assert [(q.qid, q.answers, q.gold_pids) for q in d.questions] == [("q1", ["x"], [0]), ("q2", ["y"], [2]), ("q3", ["z"], [0])]
    assert [q.context_pids for q in d.questions] == [[0, 1], [1, 2], [0]]          # each question's own paragraphs, gold and distractor
    assert d.notes == [f"{f2}: 1 question ids already loaded from an earlier file were skipped"]


def test_load_dataset_by_path_and_unknown_name(tmp_path):
    c = _write(tmp_path / "c.json.gz", [{"title": "A", "text": "a"}, {"title": "B", "text": "b"}])
    q = _write(tmp_path / "toy.json.gz", [{"id": "1", "question": "Q?", "answer": "b", "supporting_facts": ["B"]}])
    d = load_dataset(f"{q}:{c}")
    assert d.name == "toy" and d.questions[0].gold_pids == [1] and len(d.corpus) == 2 and d.questions[0].context_pids is None   # no contexts in the record
    with pytest.raises(KeyError, match="registered: .*'demo'"): load_dataset("no-such-dataset")


def test_shared_follows_megrag_kit_data(tmp_path):
    assert shared_dir({"MEGRAG_KIT_DATA": str(tmp_path)}) == tmp_path
    assert shared_dir({"MEGRAG_KIT_DATA": ""}) == shared_dir({}) == Path(conftest.__file__).resolve().parents[2] / "shared" / "data"


# ---- one small file per public layout -------------------------------------------------------------------------------

MUSIQUE = {"id": "2hop__1_2", "question": "Where was the author of Dune born?", "answer": "Tacoma", "answer_aliases": ["Tacoma, Washington"],
           "answerable": True,
           "paragraphs": [{"idx": 0, "title": "Dune", "paragraph_text": "Dune is a novel by Frank Herbert.", "is_supporting": True},
                          {"idx": 1, "title": "Frank Herbert", "paragraph_text": "Herbert was born in Tacoma.", "is_supporting": True},
                          {"idx": 2, "title": "Arrakis", "paragraph_text": "Arrakis is a desert planet.", "is_supporting": False}],
           "question_decomposition": [{"id": 1, "question": "author of Dune", "answer": "Frank Herbert", "paragraph_support_idx": 0},
                                      {"id": 2, "question": "where was #1 born", "answer": "Tacoma", "paragraph_support_idx": 1}]}
SAMPLE = {"id": "sample/question_1.json", "question": "Which professor works on Alzheimer's?", "answer": ["Thomas C. Sudhof"], "answerable": True,
          "paragraphs": [{"title": "Thomas C. Sudhof", "text": "Sudhof is a professor at Stanford.", "is_supporting": True, "idx": 0},
                         {"title": "David Eagleman", "text": "Eagleman is a neuroscientist.", "is_supporting": False, "idx": 1}]}
WIKI2 = {"_id": "8813f87c", "type": "compositional", "question": "Who is the mother of the director of film Polish-Russian War?",
         "answer": "Małgorzata Braunek",
         "context": [["Polish-Russian War (film)", ["Polish-Russian War is a 2009 film.", "It was directed by Xawery Żuławski."]],
                     ["Xawery Żuławski", ["Xawery Żuławski is a director.", "His mother is Małgorzata Braunek."]],
                     ["Snow White", ["Snow White is a fairy tale."]]],
         "supporting_facts": [["Polish-Russian War (film)", 1], ["Xawery Żuławski", 1]],
         "evidences": [["Polish-Russian War", "director", "Xawery Żuławski"], ["Xawery Żuławski", "mother", "Małgorzata Braunek"]]}
HOTPOT = {"_id": "5a8b57f2", "type": "comparison", "level": "hard", "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
          "answer": "yes",
          "context": [["Scott Derrickson", ["Scott Derrickson is an American director.", " He lives in Los Angeles."]],
                      ["Ed Wood", ["Ed Wood was an American filmmaker."]],
                      ["Doctor Strange", ["Doctor Strange is a 2016 film.", " Derrickson directed it."]]],
          "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0], ["Scott Derrickson", 1]]}
HF_HOTPOT = {"id": "5a8b57f2", "question": HOTPOT["question"], "answer": "yes", "type": "comparison", "level": "hard",   # datasets' hotpot_qa
             "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood", "Scott Derrickson"], "sent_id": [0, 0, 1]},
             "context": {"title": ["Scott Derrickson", "Ed Wood", "Doctor Strange"],
                         "sentences": [["Scott Derrickson is an American director.", " He lives in Los Angeles."],
                                       ["Ed Wood was an American filmmaker."], ["Doctor Strange is a 2016 film.", " Derrickson directed it."]]}}
HF_2WIKI = {"_id": "8813f87c", "type": "compositional", "question": WIKI2["question"],                                     # datasets' 2WikiMultihopQA
            "context": {"title": ["Polish-Russian War (film)", "Xawery Żuławski", "Snow White"],
                        "content": [["Polish-Russian War is a 2009 film.", "It was directed by Xawery Żuławski."],
                                    ["Xawery Żuławski is a director.", "His mother is Małgorzata Braunek."], ["Snow White is a fairy tale."]]},
            "supporting_facts": {"title": ["Polish-Russian War (film)", "Xawery Żuławski"], "sent_id": [1, 1]},
            "evidences": {"fact": ["Polish-Russian War", "Xawery Żuławski"], "relation": ["director", "mother"],
                          "entity": ["Xawery Żuławski", "Małgorzata Braunek"]},
            "answer": "Małgorzata Braunek"}
GFMRAG = {"id": "8813f87c", "question": WIKI2["question"], "answer": "Małgorzata Braunek", "answer_aliases": ["Malgorzata Braunek"],
          "supporting_facts": ["Polish-Russian War (film)", "Xawery Żuławski"], "question_entities": ["polish russian war"], "supporting_entities": []}
PAIRS = {"_id": "5a8b57f2", "question": HOTPOT["question"], "answer": "yes", "supporting_facts": [["Ed Wood", 0], ["Scott Derrickson", 0], ["Ed Wood", 1]]}
CORPUS = [{"title": "Scott Derrickson", "text": "Scott Derrickson is an American director. He lives in Los Angeles.", "idx": 0},
          {"title": "Ed Wood", "text": "Ed Wood was an American filmmaker.", "idx": 1},
          {"title": "Polish-Russian War (film)", "text": "Polish-Russian War is a 2009 film. It was directed by Xawery Żuławski.", "idx": 2},
          {"title": "Xawery Żuławski", "text": "Xawery Żuławski is a director. His mother is Małgorzata Braunek.", "idx": 3}]
WIKI2_GOLD = ["Polish-Russian War (film)\nPolish-Russian War is a 2009 film. It was directed by Xawery Żuławski.",
              "Xawery Żuławski\nXawery Żuławski is a director. His mother is Małgorzata Braunek."]
HOTPOT_GOLD = ["Scott Derrickson\nScott Derrickson is an American director. He lives in Los Angeles.", "Ed Wood\nEd Wood was an American filmmaker."]


def _gold(d, i=0): return [d.corpus[p].content for p in d.questions[i].gold_pids]


def test_layout_musique_paragraphs(tmp_path):
    d = load_contexts(_write(tmp_path / "musique.json", [MUSIQUE]))
    q = d.questions[0]
    assert (q.qid, q.answers, q.qtype, len(q.decomposition)) == ("2hop__1_2", ["Tacoma", "Tacoma, Washington"], "2hop", 2)
    assert _gold(d) == ["Dune\nDune is a novel by Frank Herbert.", "Frank Herbert\nHerbert was born in Tacoma."] and len(d.corpus) == 3


def test_layout_hipporag_sample_paragraphs_with_text_and_answer_list(tmp_path):
    d = load_contexts(_write(tmp_path / "sample.json", [SAMPLE]))
    assert d.questions[0].answers == ["Thomas C. Sudhof"] and _gold(d) == ["Thomas C. Sudhof\nSudhof is a professor at Stanford."]


def test_layout_2wiki_context_lists_and_supporting_fact_pairs(tmp_path):
    d = load_contexts(_write(tmp_path / "2wiki.json", [WIKI2]))
    q = d.questions[0]
    assert _gold(d) == WIKI2_GOLD and len(d.corpus) == 3              # 2Wiki sentences are joined with a space
    assert (q.qid, q.qtype, q.evidence_triples) == ("8813f87c", "compositional", WIKI2["evidences"])


def test_layout_hotpotqa_context_lists_with_leading_space_sentences(tmp_path):
    d = load_contexts(_write(tmp_path / "hotpot.jsonl", [HOTPOT], jsonl=True))
    assert _gold(d) == HOTPOT_GOLD and d.questions[0].qtype == "comparison"   # joined with "", no doubled spaces


def test_layout_hf_datasets_hotpotqa_columnar_jsonl(tmp_path):
    d = load_contexts(_write(tmp_path / "hotpot_qa.jsonl", [HF_HOTPOT], jsonl=True))
    ref = load_contexts(_write(tmp_path / "hotpot.json", [HOTPOT]))
    assert _gold(d) == HOTPOT_GOLD and [p.content for p in d.corpus] == [p.content for p in ref.corpus]
    assert (d.questions[0].qid, d.questions[0].answers) == ("5a8b57f2", ["yes"])


def test_layout_hf_datasets_2wiki_columnar_json_with_content_and_evidences(tmp_path):
    d = load_contexts(_write(tmp_path / "2wiki_hf.json", [HF_2WIKI]))
    assert _gold(d) == WIKI2_GOLD and d.questions[0].evidence_triples == WIKI2["evidences"]


def test_layout_gfmrag_titles_with_hipporag_corpus(tmp_path):
    d = load_hipporag(_write(tmp_path / "test.json", [GFMRAG]), _write(tmp_path / "corpus.json", CORPUS))
    assert d.questions[0].gold_pids == [2, 3] and d.questions[0].answers == ["Małgorzata Braunek", "Malgorzata Braunek"]
    assert [p.pid for p in d.corpus] == [0, 1, 2, 3] and d.notes == []   # `idx` is ignored: pid = position


def test_layout_supporting_fact_pairs_without_context(tmp_path):
    # HotpotQA-style [title, sentence_index] pairs and no context: the gold titles are the pairs' first elements
    d = load_hipporag(_write(tmp_path / "hotpot.json", [PAIRS]), _write(tmp_path / "corpus.json", CORPUS))
    assert d.questions[0].gold_pids == [1, 0] and d.questions[0].qtype is None


def test_layout_hipporag_corpus_gold_by_content_when_titles_repeat(tmp_path):
    # MuSiQue corpora repeat titles: gold passages are then found by exact title + text
    corpus = [{"title": "Dune", "text": "Dune is a 1984 film."}, {"title": "Dune", "text": "Dune is a novel by Frank Herbert."},
              {"title": "Frank Herbert", "text": "Herbert was born in Tacoma."}, {"title": "Arrakis", "text": "Arrakis is a desert planet."}]
    d = load_hipporag(_write(tmp_path / "musique.json", [MUSIQUE]), _write(tmp_path / "musique_corpus.jsonl.gz", corpus, jsonl=True))
    assert d.questions[0].gold_pids == [1, 2]


def test_layout_hipporag1_title_to_sentences_corpus(tmp_path):
    corpus = _write(tmp_path / "hotpot_corpus.json", {"Scott Derrickson": ["Scott Derrickson is an American director.", " He lives in Los Angeles."],
                                                      "Ed Wood": ["Ed Wood was an American filmmaker."]})
    d = load_hipporag(_write(tmp_path / "hotpot.json", [PAIRS]), corpus)
    assert [p.content for p in d.corpus] == HOTPOT_GOLD and d.questions[0].gold_pids == [1, 0]


def _frame(recs):   # pandas DataFrame.to_json(): {column: {row: value}}
    cols = dict.fromkeys(k for r in recs for k in r)
    return {c: {str(i): r.get(c) for i, r in enumerate(recs)} for c in cols}

@pytest.mark.parametrize("name,content", [
    ("q.json", lambda: json.dumps([MUSIQUE, SAMPLE]).encode()),
    ("q.jsonl", lambda: "\n".join(json.dumps(r) for r in [MUSIQUE, SAMPLE]).encode() + b"\n\n"),
    ("q.json.gz", lambda: gzip.compress(json.dumps([MUSIQUE, SAMPLE]).encode())),
    ("q.jsonl.gz", lambda: gzip.compress("\n".join(json.dumps(r, indent=None) for r in [MUSIQUE, SAMPLE]).encode())),
    ("q.json", lambda: b"\xef\xbb\xbf" + json.dumps([MUSIQUE, SAMPLE], indent=2).encode()),     # UTF-8 BOM, pretty-printed
    ("q.json", lambda: json.dumps(_frame([MUSIQUE, SAMPLE])).encode()),                          # pandas column-oriented frame
])
def test_file_containers_read_alike(tmp_path, name, content):
    p = tmp_path / name; p.write_bytes(content())
    d = load_contexts(p)
    assert [(q.qid, q.answers, _gold(d, i)) for i, q in enumerate(d.questions)] == \
        [("2hop__1_2", ["Tacoma", "Tacoma, Washington"], ["Dune\nDune is a novel by Frank Herbert.", "Frank Herbert\nHerbert was born in Tacoma."]),
         ("sample/question_1.json", ["Thomas C. Sudhof"], ["Thomas C. Sudhof\nSudhof is a professor at Stanford."])]


def test_single_object_file_is_one_record(tmp_path):
    d = load_contexts(_write(tmp_path / "one.json", MUSIQUE))
    assert [q.qid for q in d.questions] == ["2hop__1_2"]


# ---- degenerate records ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_empty_question_is_refused(tmp_path, question):
    p = _write(tmp_path / "q.json", [dict(MUSIQUE, question=question)])
    with pytest.raises(DataError, match="empty text") as e: load_contexts(p)
    assert (e.value.file, e.value.record, e.value.field) == (p, "2hop__1_2", "question")


@pytest.mark.parametrize("change,field", [
    (dict(answer=""), "answer"), (dict(answer="  "), "answer"), (dict(answer="."), "answer"), (dict(answer="The The"), "answer"),
    (dict(answer=["Tacoma", "an"]), "answer[1]"), (dict(answer_aliases=["Tacoma, Washington", "a."]), "answer_aliases[1]"),
])
def test_gold_answer_that_normalizes_to_empty_is_refused(tmp_path, change, field):
    p = _write(tmp_path / "q.json", [dict(MUSIQUE, **change)])
    with pytest.raises(DataError, match="empty after answer normalization") as e: load_contexts(p)
    assert (e.value.file, e.value.record, e.value.field) == (p, "2hop__1_2", field)


def test_empty_answer_list_is_refused(tmp_path):
    p = _write(tmp_path / "q.json", [dict(SAMPLE, answer=[])])
    with pytest.raises(DataError, match="no gold answer") as e: load_contexts(p)
    assert (e.value.file, e.value.record, e.value.field) == (p, "sample/question_1.json", "answer")


def test_supporting_title_missing_from_the_record_context_is_refused(tmp_path):
    p = _write(tmp_path / "q.json", [dict(WIKI2, supporting_facts=[["Polish-Russian War (film)", 1], ["Nowhere", 0]])])
    with pytest.raises(DataError, match=r"not among the record's context titles: \['Nowhere'\]") as e: load_contexts(p)
    assert (e.value.file, e.value.record, e.value.field) == (p, "8813f87c", "supporting_facts")


def test_question_without_gold_passages_loads_and_is_noted(tmp_path):
    rec = dict(MUSIQUE, paragraphs=[dict(x, is_supporting=False) for x in MUSIQUE["paragraphs"]])
    p = _write(tmp_path / "q.json", [rec, dict(SAMPLE)])
    d = load_contexts(p)
    assert [q.gold_pids for q in d.questions] == [[], [3]] and d.notes == [f"{p}: 1 questions have no gold passage (retrieval metrics skip them)"]
    g = _write(tmp_path / "contextless.json", [GFMRAG])
    with pytest.raises(DataError, match="record has no contexts") as e: load_contexts(g)   # titles alone need a corpus file
    assert (e.value.file, e.value.record, e.value.field) == (g, "8813f87c", "supporting_facts")


# ---- no raw exception leaves a loader -----------------------------------------------------------------------------------

BAD_VALUES = [None, 0, True, 1.5, "", " ", "x", [], [None], [[]], [1], {}, {"title": 1}, [["T", 0]]]

def _paths(v, prefix=()):
    "Every position in a record (lists: their first two entries)."
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items(): yield from _paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:2]): yield from _paths(x, prefix + (i,))

def _replace(rec, path, value):
    if not path: return value
    rec = copy.deepcopy(rec); node = rec
    for k in path[:-1]: node = node[k]
    node[path[-1]] = value
    return rec

@pytest.mark.filterwarnings("ignore::megrag_kit.core.DataWarning")
@pytest.mark.parametrize("layout", ["MUSIQUE", "SAMPLE", "WIKI2", "HOTPOT", "HF_HOTPOT", "HF_2WIKI", "GFMRAG", "PAIRS"])
def test_any_bad_shape_in_any_layout_is_a_data_error_naming_file_and_record(tmp_path, layout):
    rec = globals()[layout]
    corpus = _write(tmp_path / "corpus.json", CORPUS)
    load = (lambda p: load_hipporag(p, corpus)) if layout in ("GFMRAG", "PAIRS") else load_contexts
    outcomes = Counter()
    for path in _paths(rec):
        for bad in BAD_VALUES:
            p = _write(tmp_path / "q.json", [_replace(rec, path, bad)])
            try: load(p); outcomes["loaded"] += 1
            except DataError as e:   # any other exception fails the test
                assert e.file == p and e.record is not None, (path, bad, str(e))
                assert "malformed record" not in str(e), (path, bad, str(e))   # an explicit check named the problem
                outcomes["refused"] += 1
    assert outcomes["refused"] > 50 and outcomes["loaded"] > 0


@pytest.mark.parametrize("path,bad,field", [
    ((0,), 5, None), ((0, "title"), None, "title"), ((0, "title"), ["T"], "title"), ((1, "text"), {"t": 1}, "text"),
    ((1, "text"), "\ud800", "text"),
])
def test_bad_corpus_record_names_record_and_field(tmp_path, path, bad, field):
    p = _write(tmp_path / "corpus.json", _replace(CORPUS, path, bad))
    with pytest.raises(DataError) as e: load_corpus(p)
    assert (e.value.file, e.value.record, e.value.field) == (p, path[0], field)


# ---- bad files -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content,message,record", [
    (b"", "file is empty", None), (b"  \n\n", "file is empty", None), (gzip.compress(b""), "file is empty", None),
    (b"[]", "file holds no records", None), (b"{}", "file holds no records", None),
    (b"42", "expected a JSON list of records, got a number", None), (b"null", "expected a JSON list of records, got null", None),
    (b"not json", "invalid JSON document: Expecting value at line 1, column 1", "line 1, column 1"),
    (b'{"a": 1} xx', "invalid JSON document: Extra data at line 1, column 10", "line 1, column 10"),
    (b'[{"a": 1},\n {"a": 2}', "JSON document is cut short (it ends before it is complete): Expecting ',' delimiter at line 2, column 10",
     "line 2, column 10"),
    (b'[{"a": 1},\n {"a": "tw', "JSON document is cut short (it ends before it is complete): Unterminated string starting at line 2, column 8",
     "line 2, column 8"),
    (b'{"a": 1}\n{"a": 2', "JSON Lines record is cut short (it ends before it is complete): Expecting ',' delimiter at line 2, column 8",
     "line 2, column 8"),
    (b'{"a": 1}\n{"a": }\n{"a": 3}\n', "invalid JSON Lines record: Expecting value at line 2, column 7", "line 2, column 7"),
    (b"\x1f\x8b\x08\x00garbage", "broken gzip data", None), (gzip.compress(b'[{"a": 1}]')[:-6], "broken gzip data", None),
    ('[{"title": "Café"},\n {"title": "Straße"}]'.encode("latin-1"), "not UTF-8 text: byte 0xe9 at line 1, column 16 (byte 15)",
     "line 1, column 16"),
    (gzip.compress('[\n {"title": "Straße"}]'.encode("cp1252")), "not UTF-8 text: byte 0xdf at line 2, column 17", "line 2, column 17"),
], ids=["empty", "blank", "empty-gzip", "empty-list", "empty-object", "number", "null", "not-json", "extra-data", "list-cut-short",
        "list-cut-in-string", "jsonl-last-line-cut", "jsonl-bad-line", "not-gzip", "gzip-cut-short", "latin-1", "cp1252-in-gzip"])
def test_bad_file_is_a_data_error_naming_the_file(tmp_path, content, message, record):
    p = tmp_path / "questions.json.gz"; p.write_bytes(content)
    for load in (read_records, load_contexts, load_corpus):
        with pytest.raises(DataError) as e: load(p)
        assert message in str(e.value) and (e.value.file, e.value.record) == (p, record)


def test_corpus_mapping_given_as_questions_is_refused(tmp_path):
    p = _write(tmp_path / "hotpot_corpus.json", {"Ed Wood": ["Ed Wood was an American filmmaker."]})
    with pytest.raises(DataError, match=r"expected question records, got a \{title: \[sentence, ...\]\} mapping") as e: load_contexts(p)
    assert e.value.file == p


def test_missing_files_are_named(tmp_path):
    q = _write(tmp_path / "q.json", [GFMRAG])
    for name, missing in [(str(tmp_path / "nope.json"), tmp_path / "nope.json"), ("nope.jsonl", Path("nope.jsonl")),
                          (f"{q}:{tmp_path / 'nope_corpus.json'}", tmp_path / "nope_corpus.json"),
                          (f"{tmp_path / 'nope.json'}:{q}", tmp_path / "nope.json")]:
        with pytest.raises(DataError, match="file does not exist") as e: load_dataset(name)
        assert e.value.file == missing
    with pytest.raises(DataError, match="file does not exist") as e: load_dataset("2wikimultihopqa", tmp_path)
    assert e.value.file == tmp_path / "multihop/2wikimultihopqa/gfmrag/test.json.gz"   # the questions file is read first


def test_lone_surrogate_is_not_text(tmp_path):
    p = tmp_path / "q.json"
    p.write_text(json.dumps([MUSIQUE]).replace("Herbert was born", "Herbert \\ud800 was born"))
    with pytest.raises(DataError, match="lone surrogate") as e: load_contexts(p)
    assert (e.value.file, e.value.record, e.value.field) == (p, "2hop__1_2", "paragraphs[1].paragraph_text")


def test_non_english_text_loads_unchanged_without_a_warning(tmp_path):
    rec = {"id": "多言語-1", "question": "Wo wurde der Autor von „Der Steppenwolf“ geboren? 作者はどこで生まれましたか？",
           "answer": "Calw", "answer_aliases": ["カルフ", "كالف"],
           "paragraphs": [{"title": "Hermann Hesse", "paragraph_text": "Hermann Hesse wurde in Calw geboren. ヘッセはカルフで生まれた。", "is_supporting": True},
                          {"title": "Ελλάδα", "paragraph_text": "Η Ελλάδα είναι χώρα.", "is_supporting": False}]}
    p = _write(tmp_path / "q.jsonl.gz", [rec], jsonl=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = load_contexts(p)
    q = d.questions[0]
    assert (q.qid, q.question, q.answers) == (rec["id"], rec["question"], ["Calw", "カルフ", "كالف"]) and d.notes == []
    assert [p.content for p in d.corpus] == ["Hermann Hesse\nHermann Hesse wurde in Calw geboren. ヘッセはカルフで生まれた。", "Ελλάδα\nΗ Ελλάδα είναι χώρα."]


@pytest.mark.parametrize("row,field,message", [
    ('7,"Q?","[1, 2]"\nx,"Q?","[3]"\n', "id", "expected an integer id, got 'x'"),
    ('7,"Q?","[1, 2]"\n8,"  ","[3]"\n', "query", "empty text"),
    ('7,"Q?","[1, 2]"\n8,"Q?","[3, \'a\']"\n', "answer_ids", "answer_ids is not a list literal of integers"),
    ('7,"Q?","[1, 2]"\n8,"Q?","[3"\n', "answer_ids", "answer_ids is not a list literal of integers"),
])
def test_bad_stark_row_names_row_and_field(tmp_path, row, field, message):
    (tmp_path / "qa/prime/stark_qa").mkdir(parents=True); (tmp_path / "qa/prime/split").mkdir()
    f = tmp_path / "qa/prime/stark_qa/stark_qa.csv.gz"
    f.write_bytes(gzip.compress(("id,query,answer_ids\n" + row).encode()))
    (tmp_path / "qa/prime/split/test.index").write_text("7\n8\n")
    with pytest.raises(DataError) as e: load_stark_qa(tmp_path, "prime")
    assert message in str(e.value) and (e.value.file, e.value.record, e.value.field) == (f, 1, field)
    (tmp_path / "qa/prime/split/test.index").write_text("7\n")                 # row 1 is outside the split: not read
    if field != "id": assert [(q.qid, q.gold_pids) for q in load_stark_qa(tmp_path, "prime").questions] == [("7", [1, 2])]


# ---- corpus hygiene -------------------------------------------------------------------------------------------------------

def test_corpus_duplicates_and_empty_passages_are_dropped_and_said(tmp_path):
    corpus = [CORPUS[0], {"title": "Blank", "text": " \n\t "}, CORPUS[1], CORPUS[0], {"title": "Nothing", "text": ""}, CORPUS[1], CORPUS[2]]
    c = _write(tmp_path / "corpus.json", corpus)
    with pytest.warns(DataWarning) as w: d = load_hipporag(_write(tmp_path / "q.json", [PAIRS]), c)
    note = (f"{c}: dropped 2 duplicate passages (same title and text; the first copy kept) and 2 empty or whitespace-only passages; "
            "3 of 7 passages kept, pids re-numbered 0..2")
    assert [str(x.message) for x in w] == [note] and d.notes == [note]
    assert [(p.pid, p.title) for p in d.corpus] == [(0, "Scott Derrickson"), (1, "Ed Wood"), (2, "Polish-Russian War (film)")]
    assert d.questions[0].gold_pids == [1, 0]                                  # the duplicated gold passages map to the kept copies
    m = _write(tmp_path / "m.json", [dict(HOTPOT, context=HOTPOT["context"][:2])])   # gold found by content: also the kept copy
    with pytest.warns(DataWarning): assert load_hipporag(m, c).questions[0].gold_pids == [0, 1]


def test_clean_corpus_keeps_same_title_with_other_text_and_renumbers():
    raw = [Passage(0, "A", "a."), Passage(1, "A", "a. "), Passage(2, "B", "\u00a0"), Passage(3, "A", "a.")]
    with pytest.warns(DataWarning, match="dropped 1 duplicate passages .* and 1 empty"):
        kept, notes = clean_corpus(raw, "c.json")
    assert [(p.pid, p.text) for p in kept] == [(0, "a."), (1, "a. ")] and len(notes) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clean_corpus(kept, "c.json") == (kept, [])


def test_gold_passage_that_is_empty_is_an_error(tmp_path):
    c = _write(tmp_path / "corpus.json", CORPUS[:1] + [{"title": "Ed Wood", "text": "   "}])
    q = _write(tmp_path / "q.json", [PAIRS])
    with pytest.warns(DataWarning), pytest.raises(DataError, match=r"gold passage is empty in the corpus .*\['Ed Wood'\]") as e:
        load_hipporag(q, c)
    assert (e.value.file, e.value.record, e.value.field) == (q, "5a8b57f2", "supporting_facts")
    ctx = _write(tmp_path / "ctx.json", [dict(HOTPOT, context=[["Scott Derrickson", ["S."]], ["Ed Wood", [" ", ""]]])])
    with pytest.raises(DataError, match="gold passage is empty") as e: load_contexts(ctx)
    assert (e.value.file, e.value.record, e.value.field) == (ctx, "5a8b57f2", "context[1]")
    mus = _write(tmp_path / "mus.json", [_replace(MUSIQUE, ("paragraphs", 1, "paragraph_text"), "\n")])
    with pytest.raises(DataError, match="gold passage is empty") as e: load_contexts(mus)
    assert (e.value.file, e.value.record, e.value.field) == (mus, "2hop__1_2", "paragraphs[1].paragraph_text")


def test_contexts_layout_leaves_empty_paragraphs_out(tmp_path):
    rec = _replace(MUSIQUE, ("paragraphs", 2, "paragraph_text"), "  ")
    p = _write(tmp_path / "q.json", [rec, dict(SAMPLE, paragraphs=SAMPLE["paragraphs"] + [{"title": "E", "text": "", "is_supporting": False}])])
    with pytest.warns(DataWarning) as w: d = load_contexts(p)
    note = f"{p}: 2 empty or whitespace-only context paragraphs left out of the corpus"
    assert [str(x.message) for x in w] == [note] and d.notes == [note]
    assert [p.title for p in d.corpus] == ["Dune", "Frank Herbert", "Thomas C. Sudhof", "David Eagleman"]
    assert [q.gold_pids for q in d.questions] == [[0, 1], [2]]


@needs_shared
def test_registered_datasets_need_no_hygiene():
    # measured: no duplicate and no empty passage in the three registered corpora (their evidence stores keep their names)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        for name, n in [("2wikimultihopqa", 6119), ("musique", 4543), ("hotpotqa", 1971)]:
            d = load_dataset(name, SHARED)
            assert len(d.corpus) == n and not [x for x in d.notes if "dropped" in x or "left out" in x or "no gold" in x]
        raw = load_corpus(SHARED / "multihop/2wikimultihopqa_corpus.json.gz")
        assert clean_corpus(raw)[0] == raw


def test_text_in_nfd_is_read_in_nfc_so_a_gold_title_is_found(tmp_path):
    "A gold title written decomposed (NFD: z + combining dot) was refused as 'gold passage not in corpus'."
    import unicodedata
    nfd = lambda s: unicodedata.normalize("NFD", s)
    assert nfd("Xawery Żuławski") != "Xawery Żuławski"
    rec = {**GFMRAG, "id": nfd("ż1"), "question": nfd(GFMRAG["question"]), "answer": nfd("Małgorzata Żuławska"),
           "supporting_facts": ["Polish-Russian War (film)", nfd("Xawery Żuławski")]}
    corpus = [dict(c, title=nfd(c["title"]), text=nfd(c["text"])) if i == 2 else c for i, c in enumerate(CORPUS)]
    d = load_hipporag(_write(tmp_path / "test.json", [rec]), _write(tmp_path / "corpus.json", corpus))
    q = d.questions[0]
    assert [d.corpus[p].title for p in q.gold_pids] == ["Polish-Russian War (film)", "Xawery Żuławski"]
    assert q.answers == ["Małgorzata Żuławska", "Malgorzata Braunek"] and q.qid == "ż1" and q.question == GFMRAG["question"]
    assert all(unicodedata.is_normalized("NFC", s) for p in d.corpus for s in (p.title, p.text))
    # the contexts layout: a context title in NFC, its supporting fact in NFD, and the reverse, are one passage
    ctx = {"_id": "w1", "question": "Who?", "answer": "x", "context": [["Żuławski", ["Ż is a letter."]], [nfd("Ąb"), ["Other."]]],
           "supporting_facts": [[nfd("Żuławski"), 0], ["Ąb", 0]]}
    d = load_contexts(_write(tmp_path / "ctx.json", [ctx]))
    assert [d.corpus[p].title for p in d.questions[0].gold_pids] == ["Żuławski", "Ąb"]


def test_questions_keyed_by_id_are_read_and_other_shapes_are_named(tmp_path):
    "A JSON object keyed by question id was read as a column-oriented frame and refused as 'missing field id/_id'."
    recs = {"q1": {"question": "Who?", "answer": "x", "supporting_facts": ["Ed Wood"]},
            "q2": {"_id": "q2", "question": "Where?", "answer": "y", "supporting_facts": ["Scott Derrickson"]}}
    p, c = tmp_path / "keyed.json", _write(tmp_path / "corpus.json", CORPUS)
    p.write_text(json.dumps(recs))
    d = load_hipporag(p, c)
    assert [(q.qid, q.question, q.answers) for q in d.questions] == [("q1", "Who?", ["x"]), ("q2", "Where?", ["y"])]
    assert [d.corpus[q.gold_pids[0]].title for q in d.questions] == ["Ed Wood", "Scott Derrickson"]
    p.write_text(json.dumps({**recs, "q3": {"id": "q9", "question": "When?", "answer": "z", "supporting_facts": ["Ed Wood"]}}))
    with pytest.raises(DataError, match=r"record key 'q3' differs from its own id 'q9'") as e: load_hipporag(p, c)
    assert (e.value.file, e.value.record, e.value.field) == (p, "q3", "id")
    for shape, says in [({"data": [1, 2], "version": "1.1"}, "found an object with keys ['data', 'version']"),
                        ({"q1": {"question": "Who?"}, "q2": [1]}, "found an object with keys ['q1', 'q2']")]:
        p.write_text(json.dumps(shape))
        with pytest.raises(DataError, match=re.escape(says)) as e: load_hipporag(p, c)
        assert e.value.file == p
