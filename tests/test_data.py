import gzip, json
import pytest
from megrag_kit.core import DataError
from megrag_kit.data import load_dataset, load_hipporag, load_contexts, load_corpus, load_stark_qa, read_records
from conftest import SHARED, needs_shared


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
    q = _write(tmp_path / "q.json.gz", [{"id": "1", "question": "Q?", "answer": "a", "supporting_facts": ["B"]}])
    with pytest.raises(DataError, match="gold passage not in corpus") as e: load_hipporag(q, c)
    assert e.value.record == "1"
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
    assert d.notes == [f"{f2}: 1 question ids already loaded from an earlier file were skipped"]


def test_load_dataset_by_path_and_unknown_name(tmp_path):
    c = _write(tmp_path / "c.json.gz", [{"title": "A", "text": "a"}, {"title": "B", "text": "b"}])
    q = _write(tmp_path / "toy.json.gz", [{"id": "1", "question": "Q?", "answer": "b", "supporting_facts": ["B"]}])
    d = load_dataset(f"{q}:{c}")
    assert d.name == "toy" and d.questions[0].gold_pids == [1] and len(d.corpus) == 2
    with pytest.raises(KeyError, match="registered: .*'demo'"): load_dataset("no-such-dataset")
