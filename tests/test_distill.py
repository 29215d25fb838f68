"""Graph-construction distillation, what needs the benchmark data, a subprocess or a real model: the disjointness
check, the gold teacher on real MuSiQue questions, collect under SIGKILL, short real LoRA runs (slow), and the
adapter hash (its notebook, nbs/02_models.ipynb, was being edited elsewhere when the other tests moved). The rest
live beside the code: nbs/10_megrag.ipynb (the single policy), nbs/40_distill.ipynb, 40a_distill_teachers,
40b_distill_collect and 40c_distill_train."""
import re
import json, os, signal, subprocess, sys, time, uuid
from pathlib import Path
import pytest
from megrag_kit.core import DataError, Question
from megrag_kit.distill import (check_disjoint, eval_questions, gold_examples, gold_hops, load_training, read_examples,
                                TrainConfig, train, distill_config, collection_counts, validation_by_source)
from megrag_kit.jsonl import JsonlAppender, read_jsonl
from megrag_kit.megrag import MEGRAG
from megrag_kit.models import adapter_hash, load_student
from megrag_kit.method import Resources
from conftest import ScriptedLLM, needs_shared, shared_file
from megrag_kit.testing import HashEmbedder

def openie(msg):
    title = msg.split("\n")[1]
    return json.dumps({"triples": [[title, "has title", title]]})


def _musique_file(dest, n=12):
    "The first `n` MuSiQue train-fixture records (20 paragraphs each) as a questions file: a small real corpus, quick to index."
    from megrag_kit.data import read_records
    recs = read_records(shared_file("multihop/legacy_hipporag1/musique_train.json.gz"))[:n]
    dest.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return dest


@pytest.fixture(scope="module")
def musique(tmp_path_factory):
    "The first 12 MuSiQue train questions over their own paragraphs, and one store folder for them."
    d = tmp_path_factory.mktemp("mstore")
    return load_training(str(_musique_file(d / "musique12.jsonl"))), d


@needs_shared
def test_disjointness_check_fails_loudly_naming_the_overlap():
    ev = eval_questions(names=["2wikimultihopqa"])
    e = ev["2wikimultihopqa"]
    train = [Question("mine-1", "  " + e[3].question.upper() + "  ", ["x"]), Question(e[7].qid, "a question of my own?", ["y"]),
             Question("mine-2", "Who wrote a question nobody asked?", ["z"])]
    with pytest.raises(DataError, match=re.escape(f"2wikimultihopqa: 2 (mine-1, {e[7].qid})")): check_disjoint(train, ev)
    kept, hits = check_disjoint(train, ev, drop_overlap=True)
    assert [q.qid for q in kept] == ["mine-2"] and hits == {"2wikimultihopqa": ["mine-1", e[7].qid]}


def test_gold_teacher_on_three_real_musique_questions(musique):
    ds, sroot = musique
    qs = ds.questions[:3]
    assert [h[0] for h in gold_hops(qs[0])] == ["What company published Journal of Psychotherapy Integration?",
                                                "Who was the first president of American Psychological Association?"]
    assert [h[0] for h in gold_hops(qs[1])] == ["What is the performer of Hello Love?", "What city did Hank Snow live when he died?",
                                                "Which state borders Tennessee to the east?", "how many publix stores are in North Carolina"]
    assert gold_hops(qs[2])[1][0] == "What is a term for the Church of England and churches that align with it?"
    llm = ScriptedLLM(openie); llm.model_id = f"scripted-{uuid.uuid4().hex}"
    m = MEGRAG(distill_config({"n_p": 5}), Resources(ds, llm=llm, embedder=HashEmbedder(), store_root=sroot))
    recs = gold_examples(m, qs)
    for r in recs:
        q = qs[[x.qid for x in qs].index(r["qid"])]
        hops = gold_hops(q)
        traj = [e for e in r["examples"] if e["kind"] == "trajectory"]
        query = q.question                                                             # step 1 reads the question itself
        for e in traj:
            o, user = json.loads(e["target"]), e["messages"][-1]["content"]
            assert f"Current query: {query}\n" in user
            assert all(f"[{u}] " in user for u in o["selected"])                      # ids of real candidates
            assert o["intermediate_answer"] in [""] + [b for _, b in hops]
            if o["intermediate_answer"] == "": assert o["next_query"] in [s for s, _ in hops] and not o["stop"]
            query = o["next_query"]
        for e in r["examples"]:
            if e["kind"] == "hop":                                                   # a one-step question of an answered hop
                o = json.loads(e["target"])
                assert o["stop"] and (e["messages"][-1]["content"].split("\n")[1][len("Current query: "):], o["answer"]) in hops
    r0 = recs[0]
    if r0["kept"]:
        traj = [e for e in r0["examples"] if e["kind"] == "trajectory"]
        assert json.loads(traj[-1]["target"])["stop"] and json.loads(traj[-1]["target"])["answer"] == qs[0].answers[0]
        assert all(not json.loads(e["target"])["stop"] for e in traj[:-1])
        assert "intermediate answer: American Psychological Association" in traj[-1]["messages"][-1]["content"]
    else: assert "is in no candidate" in r0["reason"] or "within budget" in r0["reason"]


CLI = [sys.executable, "-c", "from megrag_kit.cli import main; main()"]


def test_sigkill_during_collect_then_the_same_command_finishes(tmp_path, stub_server):
    def respond(body):
        time.sleep(0.05)
        return openie(body["messages"][-1]["content"])
    stub_server.respond = respond
    out = tmp_path / "ex.jsonl"
    data = _musique_file(tmp_path / "musique8.jsonl", 8)
    cmd = CLI + ["distill", "collect", "--teacher", "gold", "--dataset", str(data), "--limit", "8", "--batch-size", "1",
                 "--openie-llm", f"openai:{stub_server.url}#openie", "--embedder", f"openai:{stub_server.url}#emb", "--out", str(out)]
    env = {**os.environ, "MEGRAG_KIT_CACHE": str(tmp_path / "cache")}
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    while time.time() - t0 < 120:
        if out.exists() and out.read_bytes().count(b"\n") >= 3: break
        if p.poll() is not None: pytest.fail(f"finished before the kill: {p.stdout.read()[-2000:]}")
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL); p.wait()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = read_jsonl(out)
    ds = load_training(str(data))
    assert "header" in rows[0] and [x["qid"] for x in rows[1:]] == [q.qid for q in ds.questions[:8]]   # each once, in order
    c = collection_counts(out)
    assert c["questions"] == 8 and c["kept"] + c["dropped"] == 8 and f'"questions": 8' in r.stdout


@pytest.mark.slow
def test_five_lora_steps_lower_the_loss_and_the_adapter_reloads(musique, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    from megrag_kit.models import smollm2_path, load_llm
    ds, sroot = musique
    llm = ScriptedLLM(openie); llm.model_id = f"scripted-{uuid.uuid4().hex}"
    m = MEGRAG(distill_config({"n_p": 3, "n_s": 2, "n_t": 2, "shots": 0}), Resources(ds, llm=llm, embedder=HashEmbedder(), store_root=sroot))
    recs = [r for r in gold_examples(m, ds.questions[:12]) if r["examples"]][:1]
    assert recs, "no grounded hop among the first 12 questions"
    data = tmp_path / "ex.jsonl"
    with JsonlAppender(data) as log:
        for r in recs: log.write(dict(r, examples=r["examples"][-1:]))
    man = train(data, tmp_path / "student", cfg=TrainConfig(steps=5, batch=1, lr=2e-3, rank=2, alpha=4, max_len=1024, val_frac=0.0,
                                                             save_every=5, kinds="trajectory,hop"), progress=False)
    assert man["losses"][-1] < man["losses"][0] and man["steps"] == 5 and man["train_examples"] == 1
    st = load_student(f"smollm2-135m+lora:{tmp_path / 'student'}", device="cpu", cache=False)
    base_id, _, adapter = st.model_id.partition("+lora@")          # the base's identity, then the adapter's own hash
    assert base_id.startswith("smollm2-135m-instruct-q4_1@") and len(adapter) == 12 and adapter != base_id.split("@")[1]
    ref = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32), tmp_path / "student").eval()
    ex = read_examples(data)[0]
    enc = st.tok(st.render(ex["messages"]), return_tensors="pt", add_special_tokens=False)
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=st.tok.pad_token_id)
    with torch.no_grad(): a, b = st.model.generate(**enc, **kw), ref.generate(**enc, **kw)
    assert a.tolist() == b.tolist()


def test_adapter_hash_is_deterministic_and_sensitive_to_every_byte(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir(); (tmp_path / d / "adapter_config.json").write_text('{"r": 8}')
        (tmp_path / d / "adapter_model.safetensors").write_bytes(bytes(range(256)))
    assert adapter_hash(tmp_path / "a") == adapter_hash(tmp_path / "b") == adapter_hash(tmp_path / "a")
    (tmp_path / "b" / "adapter_model.safetensors").write_bytes(bytes(range(255)) + b"\x00")
    assert adapter_hash(tmp_path / "a") != adapter_hash(tmp_path / "b")
    (tmp_path / "b" / "manifest.json").write_text("{}")         # the manifest is not part of the adapter's identity
    (tmp_path / "a" / "manifest.json").write_text('{"x": 1}')
    (tmp_path / "b" / "adapter_model.safetensors").write_bytes(bytes(range(256)))
    assert adapter_hash(tmp_path / "a") == adapter_hash(tmp_path / "b")
    with pytest.raises(FileNotFoundError): adapter_hash(tmp_path)


def _gold_records(musique, questions: int, keep: int) -> list[dict]:
    "The first `keep` gold-teacher records with examples among the first `questions` MuSiQue questions (scripted OpenIE)."
    ds, sroot = musique
    llm = ScriptedLLM(openie); llm.model_id = f"scripted-{uuid.uuid4().hex}"
    m = MEGRAG(distill_config({"n_s": 2, "n_t": 2}), Resources(ds, llm=llm, embedder=HashEmbedder(), store_root=sroot))
    return [r for r in gold_examples(m, ds.questions[:questions]) if r["examples"]][:keep]


def _write(path, recs):
    "`recs` written to the collected file `path`; returns `path`."
    with JsonlAppender(path) as log:
        for r in recs: log.write(r)
    return path


@pytest.mark.slow
def test_same_seed_and_data_give_the_same_adapter_hash_and_a_resumed_run_matches_an_unbroken_one(musique, tmp_path):
    "Retrained from scratch: the same adapter bytes; trained 2 steps, then continued to 4: the same bytes as 4 unbroken steps."
    data = _write(tmp_path / "ex.jsonl", _gold_records(musique, 12, 2))
    # hashed vectors retrieve nearly at random, so few whole trajectories are grounded: train on every kind collected
    cfg = lambda steps: TrainConfig(steps=steps, batch=2, rank=2, alpha=4, val_frac=0.0, save_every=1, layers=2,
                                    kinds="trajectory,hop")
    a = train(data, tmp_path / "a", cfg=cfg(4), progress=False)
    b = train(data, tmp_path / "b", cfg=cfg(4), progress=False)
    assert a["adapter_sha256"] == b["adapter_sha256"] == adapter_hash(tmp_path / "a") and a["losses"] == b["losses"]
    assert (a["device"], a["device_name"]) == ("cpu", "cpu") and "gpu_peak_mb" not in a
    train(data, tmp_path / "c", cfg=cfg(2), progress=False)
    c = train(data, tmp_path / "c", cfg=cfg(4), progress=False)          # continues from the step-2 checkpoint
    assert c["adapter_sha256"] == a["adapter_sha256"] and c["steps"] == 4
    with pytest.raises(DataError, match="past steps=3"): train(data, tmp_path / "c", cfg=cfg(3), progress=False)


@pytest.mark.slow
def test_repeats_draw_a_small_file_more_often_and_each_files_validation_loss_is_recorded(musique, tmp_path):
    "Two data files, the first drawn twice per epoch: the epoch holds its examples twice; each file's held-out loss is in the manifest and rebuilt the same."
    recs = _gold_records(musique, 20, 6)
    files = [_write(tmp_path / "a.jsonl", recs[::2]), _write(tmp_path / "b.jsonl", recs[1::2])]
    cfg = TrainConfig(steps=2, batch=2, rank=2, alpha=4, val_frac=0.4, save_every=1, layers=2, kinds="trajectory,hop",
                      repeats="2,1")
    with pytest.raises(ValueError, match="gives 2 numbers for 1 data files"): train(files[:1], tmp_path / "x", cfg=cfg, progress=False)
    man = train(files, tmp_path / "s", cfg=cfg, progress=False)
    assert man["epoch_examples"] > man["train_examples"]               # the first file's training examples twice
    assert set(man["val_loss_by_source"]) == {"a.jsonl", "b.jsonl"}     # no header names a dataset: the paths' names
    assert validation_by_source(tmp_path / "s") == {"all": man["val_loss"], **man["val_loss_by_source"]}


ROOT = Path(__file__).resolve().parents[1]
FINGERPRINTS = ROOT / "runs/distill/eval-fingerprints.json"


@needs_shared
def test_committed_fingerprints_are_the_evaluation_subsets_of_the_data():
    from megrag_kit.distill import eval_fingerprints
    assert eval_fingerprints(eval_questions()) == json.loads(FINGERPRINTS.read_text())
    # the training sets beyond the evaluation subsets hold none of their questions
    for name in ("musique-dev-rest", "2wiki-dev-rest"):
        ds = load_training(name)
        kept, hits = check_disjoint(ds.questions, eval_questions())
        assert hits == {} and len(kept) == len(ds.questions) > 90


