"""Graph-construction distillation: the single policy's control flow (scripted LLM), serialization, the disjointness
check, the gold teacher on real MuSiQue questions, collect under SIGKILL, and a short real LoRA run (slow)."""
import re
import json, os, signal, subprocess, sys, time, uuid
from pathlib import Path
import pytest
from megrag_kit.core import DataError, Question
from megrag_kit.data import load_dataset
from megrag_kit.distill import (check_disjoint, eval_questions, gold_examples, gold_hops, load_training, read_examples, serialize,
                                TrainConfig, train, distill_config, collection_counts, validation_by_source)
from megrag_kit.jsonl import JsonlAppender, read_jsonl
from megrag_kit.megrag import MEGRAG, EvidenceGraph
from megrag_kit.models import adapter_hash, load_student
from megrag_kit.method import Resources, build_method
from conftest import ScriptedLLM, needs_shared, shared_file
from fakes import HashEmbedder


def single(level, ids, ans=None, b="A", nq="query two", rel="then the next hop"):
    head = dict(level=level, selected=ids, intermediate_answer=b, resolved_path=f"-> {b}")
    if ans: return json.dumps(dict(head, stop=True, answer=ans, missing="none", next_query="", relation=""))
    return json.dumps(dict(head, stop=False, answer="", missing=f"about {b}", next_query=nq, relation=rel))


def openie(msg):
    title = msg.split("\n")[1]
    return json.dumps({"triples": [[title, "has title", title]]})


class Policy(ScriptedLLM):
    def __init__(self, outs):
        self.outs, self.prompts = list(outs), []
        super().__init__(self.route)
    def route(self, msg):
        if msg.startswith("Passage:"): return openie(msg)
        self.prompts.append(msg)
        return self.outs.pop(0)


@pytest.fixture(scope="module")
def demo(): return load_dataset("demo")


@pytest.fixture(scope="module")
def root(tmp_path_factory): return tmp_path_factory.mktemp("store")     # one demo store per module (vectors, sentences)


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


def _method(ds, llm, root, **params):
    llm.model_id = f"scripted-{uuid.uuid4().hex}"
    return build_method("megrag", {"policy": "single", **params}, Resources(ds, llm=llm, embedder=HashEmbedder(), store_root=root))


def test_single_policy_one_call_per_step_builds_a_path(demo, root):
    p = Policy([single("T+S", ["s0.0", "t99.9"]), single("T", ["p999"], ans="Cork")])
    m = _method(demo, p, root)
    (r,) = m.answer(demo.questions[:1])
    g = EvidenceGraph.from_dict(r.trace)
    assert [n.composition for n in g.nodes] == ["T+S", "T"] and g.edges == [[1, "then the next hop", 2], [2, "STOP"]]
    assert r.prediction == "Cork" and r.cost.llm_calls == 2 and len(p.prompts) == 2          # one call per step
    assert "Candidates:\nTriples (T):" in p.prompts[0] and "Passages (P):" in p.prompts[0]    # all three granularities
    assert g.nodes[1].dropped_ids == ["p999"] and list(g.nodes[1].evidence) == ["triples"]   # no valid id: the whole level
    assert len(g.nodes[1].evidence["triples"]) == len(g.nodes[1].unit_ids())
    assert "t99.9" in g.nodes[0].dropped_ids
    assert "Step 1: query: " + demo.questions[0].question in p.prompts[1]                    # H_2 from v_1


def test_single_policy_invalid_output_is_re_asked_then_coerced(demo, root):
    bad = json.dumps(dict(level="T", selected=["t0.0"], intermediate_answer="A", resolved_path="a", stop=False, answer="x",
                          missing="none", next_query="", relation=""))
    p = Policy([bad, bad, single("T", ["t0.0"], ans="Cork")])
    (r,) = _method(demo, p, root, budget=2).answer(demo.questions[:1])
    n = EvidenceGraph.from_dict(r.trace).nodes[0]
    assert n.repaired and n.coerced and not n.parsed_ok and n.llm_calls == 2 and n.next_query == demo.questions[0].question
    assert "not usable" in p.prompts[1]


def test_ablation_examples_show_only_what_the_variant_keeps(demo, root):
    for params, absent in (({"relation": "none"}, "relation"), ({"history": "evidence"}, "Step 1: query")):
        p = Policy([single("T", ["t0.0"], ans="Cork")])
        m = _method(demo, p, root, **params)
        m.answer(demo.questions[:1])
        msgs = m.policy_prompt(demo.questions[0], "q", EvidenceGraph("x"), m.store and __import__("megrag_kit.megrag").megrag.Candidates([], [], []))
        assert not any(absent in x["content"] for x in msgs), (params, absent)
    # the cascade's node prompt too
    from megrag_kit.megrag import node_prompt, graph_summary
    nr = node_prompt("x", "q", "none", [], with_relation=False)
    assert not any("relation" in x["content"] for x in nr)
    nh = node_prompt("x", "q", "none", [], history_of=lambda g: graph_summary(g, "evidence"))
    assert "Step 1: query" not in nh[3]["content"] and "[t0.0] Polish-Russian War" in nh[3]["content"]


def test_serialization_is_the_inference_prompt_then_the_target_token_for_token(demo, root):
    from transformers import AutoTokenizer
    from megrag_kit.models import smollm2_path
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    m = _method(demo, Policy([]), root)
    q = demo.questions[0]
    from megrag_kit.megrag import collect_candidates
    cands = collect_candidates(m.store, m.store.search([q.question], 3)[0], 8, 8, ("sentences",))
    msgs = m.policy_prompt(q, q.question, EvidenceGraph(q.question), cands)
    target = single("T+S", ["s0.0"], ans="Żuławski")
    s = serialize(tok, msgs, target)
    prompt = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)       # what HFChatModel.render feeds
    assert s["input_ids"][:s["n_prompt"]] == tok(prompt, add_special_tokens=False)["input_ids"]
    assert tok.decode(s["input_ids"][s["n_prompt"]:]) == target + "<|im_end|>"
    assert s["text"] + "\n" == tok.apply_chat_template(msgs + [{"role": "assistant", "content": target}], tokenize=False)
    assert s["labels"][:s["n_prompt"]] == [-100] * s["n_prompt"] and s["labels"][s["n_prompt"]:] == s["input_ids"][s["n_prompt"]:]
    # the marked tokens spell the answers' values, b_1 = "A" and y = "Żuławski" as JSON escapes it, with the closing
    # quote (and the opening one where a token holds it with the value's first character), nothing of the prompt
    spelled = tok.decode([i for i, a in zip(s["input_ids"], s["answer"]) if a])
    assert spelled == 'A", "\\u017bu\\u0142awski",' and not any(s["answer"][:s["n_prompt"]]), spelled
    assert len(s["answer"]) == len(s["input_ids"]) == len(s["stop"])
    assert tok.decode([i for i, a in zip(s["input_ids"], s["stop"]) if a]) == " true"          # the stop decision's value
    assert tok.decode([i for i, a in zip(s["input_ids"], s["selected"]) if a]) == ' ["s0.0"],'  # the ids it selects


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


def test_model_teacher_examples_are_the_prompts_the_policy_saw(demo, root):
    "A scripted teacher continues then stops: the kept trajectory's examples rebuild each step's prompt exactly; a wrong answer is dropped."
    from megrag_kit.distill import teacher_examples
    from megrag_kit.reader import answer_options
    q0, q1 = demo.questions[0], next(q for q in demo.questions[1:] if not answer_options(q.question))
    p = Policy([single("T+S", ["s0.0"]), single("T", ["t0.0"], ans=q0.answers[0])])
    m = _method(demo, p, root)
    (r,) = teacher_examples(m, [q0])
    seen = [msgs for msgs in p.seen if not msgs[-1]["content"].startswith("Passage:")]
    assert r["kept"] and r["f1"] == 1.0 and [e["messages"] for e in r["examples"]] == seen
    assert [json.loads(e["target"])["stop"] for e in r["examples"]] == [False, True]
    p2 = Policy([single("T", ["t0.0"], ans="certainly not the answer")])
    (r2,) = teacher_examples(_method(demo, p2, root), [q1])
    assert not r2["kept"] and r2["examples"] == [] and r2["reason"].startswith("final F1 0.00 < 0.5")


def test_student_prompt_has_no_worked_example_and_cuts_candidates_keeping_ids(demo, root):
    "The distillation configuration's prompt: system + the question only, every candidate line kept with its id, long texts cut."
    from transformers import AutoTokenizer
    from megrag_kit.megrag import Candidates, single_prompt
    from megrag_kit.models import smollm2_path
    cfg = distill_config()
    assert (cfg.shots, cfg.passage_chars, cfg.sentence_chars) == (0, 300, 160)
    m = MEGRAG(cfg, Resources(demo, llm=Policy([]), embedder=HashEmbedder(), store_root=root))
    q = demo.questions[0]
    long_p = "A Title\n" + " ".join(f"w{i}" for i in range(200))
    c = Candidates([("p0", long_p), ("p1", "Short\nshort text")], [("s0.0", "x " * 120), ("s0.1", "fine")], [("t0.0", "a | b | c")])
    msgs = m.policy_prompt(q, q.question, EvidenceGraph(q.question), c)
    assert [x["role"] for x in msgs] == ["system", "user"] and "Polish-Russian" not in msgs[-1]["content"]
    lines = msgs[-1]["content"].split("\n")
    p0 = next(x for x in lines if x.startswith("[p0] "))
    assert len(p0) <= len("[p0] ") + 300 and p0.endswith("...") and p0.startswith("[p0] A Title: w0 w1")
    assert "[p1] Short: short text" in lines and "[s0.1] fine" in lines and "[t0.0] a | b | c" in lines
    assert next(x for x in lines if x.startswith("[s0.0] ")).endswith("...")
    # the same prompt, token for token, is the training sequence's prefix
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    s = serialize(tok, msgs, single("P", ["p0"], ans="w1"))
    assert s["input_ids"][:s["n_prompt"]] == tok(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False),
                                                 add_special_tokens=False)["input_ids"]
    full = single_prompt(q.question, q.question, "none", c.of("T+S+P"))
    assert len(full) == 6 and " ".join(f"w{i}" for i in range(200)) in full[-1]["content"]     # the usual prompt: 2 shots, whole texts


def test_too_long_examples_are_counted_and_named_not_dropped_silently():
    from transformers import AutoTokenizer
    from megrag_kit.distill import serialize_examples
    from megrag_kit.models import smollm2_path
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    ex = lambda qid, n: dict(qid=qid, step=1, kind="hop", messages=[{"role": "user", "content": "word " * n}], target='{"a": 1}')
    seqs, long = serialize_examples(tok, [ex("a", 5), ex("b", 400), ex("c", 10)], 100)
    assert [s["qid"] for s in seqs] == ["a", "c"] and long == ["b:1:hop"]


def test_answer_hop_makes_a_one_step_example_of_a_supported_question_but_not_of_yes_no():
    from megrag_kit.distill import answer_hop
    assert answer_hop(Question("h1", "Which city is X in?", ["Paris"], gold_pids=[3, 4])) == [("Which city is X in?", "Paris")]
    assert answer_hop(Question("h2", "Are X and Y both French?", ["yes"], gold_pids=[3, 4])) == []
    assert answer_hop(Question("h3", "Which city is X in?", ["Paris"])) == []
    q = Question("m", "Who?", ["B"], decomposition=[{"question": "Who is A?", "answer": "B"}])
    assert gold_hops(q) == [("Who is A?", "B")]


def test_batches_are_seeded_length_sorted_and_cover_each_epoch():
    from megrag_kit.distill import _batches
    tr = [dict(input_ids=[0] * n) for n in (5, 50, 6, 51, 7, 52, 8, 53, 9, 54)]
    a, b = _batches(tr, 7, 2, 0), _batches(tr, 7, 2, 0)
    assert a == b and a != _batches(tr, 7, 2, 1) and len(a) == 7
    assert sorted(i for bt in a[:5] for i in bt) == list(range(10))      # epoch 1: every example once
    assert all(abs(len(tr[x]["input_ids"]) - len(tr[y]["input_ids"])) < 45 for x, y in a[:5])   # short with short: 8*batch window sorted


def test_lora_targets_of_the_top_layers_only():
    from transformers import LlamaConfig, LlamaForCausalLM
    from megrag_kit.distill import lora_targets
    m = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=5, num_attention_heads=2,
                                     num_key_value_heads=2))
    assert len(lora_targets(m)) == 20 and len(lora_targets(m, 2)) == 8
    assert all(".layers.3." in n or ".layers.4." in n for n in lora_targets(m, 2))


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


def _tables_cells(**given):
    "The parameters and set-up cells of nbs/50_megrag_tables.ipynb run with `given` over the parameters: their namespace."
    nb = json.loads((Path(__file__).parents[1] / "nbs" / "50_megrag_tables.ipynb").read_text())
    code = {c.get("id"): "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"}
    ns = {}
    exec(code["d43fa94f"], ns); ns.update(given); exec(code["c80a18bb"], ns)
    return ns


def test_tables_notebook_uses_the_shipped_student_with_its_own_procedure(monkeypatch, tmp_path):
    "Table 1's distilled row and Table 3's w/o-SFT row: the shipped adapter for its base, the student's procedure for both."
    import megrag_kit.distill as D
    from megrag_kit.distill import DISTILL_DEFAULTS
    monkeypatch.setattr(D, "STUDENT_DIR", tmp_path)
    ns = _tables_cells()
    assert ns["student"] == "" and ns["params"]["student"] == ""                   # no adapter files: the rows say "not run"
    (tmp_path / "adapter_model.safetensors").write_bytes(b"x")
    ns = _tables_cells()
    assert ns["student"] == f"smollm2-135m+lora:{tmp_path}" and ns["student_base"] == "smollm2-135m"
    assert ns["params"]["student"] == ns["student"]
    assert ns["student_opts"] == {**ns["megrag"], **DISTILL_DEFAULTS} and ns["student_opts"]["shots"] == 0
    ns = _tables_cells(llm="py:fakes:ScriptedPolicy")                              # another base: the shipped adapter does not apply
    assert ns["student"] == ""
    ns = _tables_cells(student="py:fakes:ScriptedPolicy", megrag={"n_p": 5, "budget": 2})
    assert ns["student"] == "py:fakes:ScriptedPolicy" and ns["student_opts"]["budget"] == 2 and ns["student_opts"]["n_p"] == 3


def test_shipped_student_adapter_and_manifest_are_in_the_package():
    from megrag_kit.distill import STUDENT_DIR, shipped_student
    if not (STUDENT_DIR / "adapter_model.safetensors").exists(): pytest.skip("no shipped adapter in this checkout")
    man = json.loads((STUDENT_DIR / "manifest.json").read_text())
    assert man["adapter_sha256"] == adapter_hash(STUDENT_DIR)                     # the files are the ones the manifest describes
    assert man["base"].startswith("smollm2-135m-instruct-q4_1@") and man["val_loss"] is not None and man["examples_by_source"]
    assert shipped_student().endswith(str(STUDENT_DIR.name)) and shipped_student("hf:/elsewhere") is None
    v6 = ROOT / "runs/distill/student-v6-240"                                     # the committed run it was copied from
    if (v6 / "adapter_model.safetensors").exists():
        assert man == json.loads((v6 / "manifest.json").read_text()) and adapter_hash(v6) == man["adapter_sha256"]


def test_gold_selection_reads_the_text_the_policy_is_shown():
    "An answer past a candidate's cut is not in what the student sees: the teacher does not select that unit."
    from megrag_kit.distill import gold_selection
    from megrag_kit.megrag import Candidates
    c = Candidates([("p1", "T\n" + "x " * 200 + "Paris")], [("s1.0", "y " * 100 + "Paris"), ("s1.1", "Paris is here")], [("t1.0", "a | b")])
    assert gold_selection(c, "Paris") == ("T+S", ["s1.0", "s1.1"])
    assert gold_selection(c, "Paris", passage_chars=300, sentence_chars=160) == ("T+S", ["s1.1"])
    assert gold_selection(Candidates(c.passages, c.sentences[:1], []), "Paris", passage_chars=300, sentence_chars=160) is None


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

def test_batch_loss_on_the_output_positions_equals_the_models_own_loss():
    "The head applied at the labelled positions only: the same mean cross-entropy as the model's loss over the labels."
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from megrag_kit.distill import _batch_loss
    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     num_key_value_heads=2)).eval()
    class Tok: pad_token_id, eos_token_id = 0, 0
    seqs = [dict(input_ids=[5, 6, 7, 8, 9, 10], labels=[-100, -100, -100, 8, 9, 10]), dict(input_ids=[11, 12, 13, 14], labels=[-100, -100, 13, 14])]
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 0, 0]])
    lab = torch.tensor([[-100, -100, -100, 8, 9, 10], [-100, -100, 13, 14, -100, -100]])
    att = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        ref = m(input_ids=ids, attention_mask=att, labels=lab).loss
        assert torch.allclose(_batch_loss(m, Tok(), seqs), ref, atol=1e-6)
        # answer_weight: a weighted mean, the marked tokens counted w times
        marks = [[False] * 4 + [True, False], [False] * 3 + [True]]
        seqs = [dict(s, answer=a, stop=[False] * len(a)) for s, a in zip(seqs, marks)]
        ce = torch.nn.functional.cross_entropy(m(input_ids=ids, attention_mask=att).logits[:, :-1].transpose(1, 2), lab[:, 1:],
                                               reduction="none")
        w = torch.tensor([[1, 1, 1, 3.0, 1], [1, 1, 3, 0, 0]]) * (lab[:, 1:] != -100)
        assert torch.allclose(_batch_loss(m, Tok(), seqs, weights=dict(answer=3.0)), (ce * w).sum() / w.sum(), atol=1e-6)
        assert torch.allclose(_batch_loss(m, Tok(), seqs, weights=dict(answer=1.0, stop=1.0)), ref, atol=1e-6)
        # stop_weight weighs the stop decision's tokens the same way, beside the answer's
        seqs[0]["stop"] = [False] * 5 + [True]
        w = torch.tensor([[1, 1, 1, 3.0, 2], [1, 1, 3, 0, 0]]) * (lab[:, 1:] != -100)
        assert torch.allclose(_batch_loss(m, Tok(), seqs, weights=dict(answer=3.0, stop=2.0)), (ce * w).sum() / w.sum(),
                              atol=1e-6)
        # a token with two marks counts 1 plus both excesses: the selected ids' mark on the answer's token too
        seqs = [dict(s, selected=[False] * 4 + [True, True]) if i == 0 else dict(s, selected=[False] * 4)
                for i, s in enumerate(seqs)]
        w = torch.tensor([[1, 1, 1, 7.0, 6], [1, 1, 3, 0, 0]]) * (lab[:, 1:] != -100)
        got = _batch_loss(m, Tok(), seqs, weights=dict(answer=3.0, stop=2.0, selected=5.0))
        assert torch.allclose(got, (ce * w).sum() / w.sum(), atol=1e-6)
        with pytest.raises(ValueError, match="the loss weights of answer need the tokens marked"):
            _batch_loss(m, Tok(), [dict(seqs[0], answer=None)], weights=dict(answer=3.0, stop=1.0))


def test_adapter_config_is_normalized_to_machine_independent_bytes(tmp_path):
    "The cache path of the base and peft's set order of target modules do not reach the adapter's hash."
    from megrag_kit.distill import normalize_adapter_config
    for d, path, mods in (("a", "/root/.cache/x", ["q_proj", "k_proj"]), ("b", "/home/u/.cache/y", ["k_proj", "q_proj"])):
        (tmp_path / d).mkdir()
        (tmp_path / d / "adapter_config.json").write_text(json.dumps({"target_modules": mods, "base_model_name_or_path": path, "r": 8}))
        (tmp_path / d / "adapter_model.safetensors").write_bytes(b"w")
    assert adapter_hash(tmp_path / "a") != adapter_hash(tmp_path / "b")
    for d in ("a", "b"): normalize_adapter_config(tmp_path / d, "smollm2-135m")
    assert adapter_hash(tmp_path / "a") == adapter_hash(tmp_path / "b")
    assert json.loads((tmp_path / "a" / "adapter_config.json").read_text())["target_modules"] == ["k_proj", "q_proj"]


ROOT = Path(__file__).resolve().parents[1]
FINGERPRINTS = ROOT / "runs/distill/eval-fingerprints.json"


def test_no_evaluation_id_or_question_text_is_in_the_training_data():
    "Every committed training file against the committed fingerprints of the evaluation subsets: no data folder needed."
    from megrag_kit.distill import DEFAULT_DATA, check_fingerprints
    prints = json.loads(FINGERPRINTS.read_text())
    assert {n: len(p["ids"]) for n, p in prints.items()} == {"2wikimultihopqa": 200, "musique": 200, "hotpotqa": 200, "demo": 30}
    rows = [r for p in DEFAULT_DATA for r in read_jsonl(ROOT / p) if "qid" in r]
    assert len(rows) > 1000                          # the training data at scale, every question checked
    assert check_fingerprints(rows, prints) == {}
    # the check bites: an evaluation id, and a (shipped) evaluation question's text in other case and spacing
    ev = prints["musique"]["ids"][0]
    assert check_fingerprints([{"qid": ev, "question": "x"}], prints) == {"musique": [ev]}
    q = load_dataset("demo").questions[0]
    assert check_fingerprints([{"qid": "mine", "question": "  " + q.question.upper()}], prints) == {"demo": ["mine"]}


@needs_shared
def test_committed_fingerprints_are_the_evaluation_subsets_of_the_data():
    from megrag_kit.distill import eval_fingerprints
    assert eval_fingerprints(eval_questions()) == json.loads(FINGERPRINTS.read_text())
    # the training sets beyond the evaluation subsets hold none of their questions
    for name in ("musique-dev-rest", "2wiki-dev-rest"):
        ds = load_training(name)
        kept, hits = check_disjoint(ds.questions, eval_questions())
        assert hits == {} and len(kept) == len(ds.questions) > 90


def test_committed_students_keep_their_run_key():
    "Options added after a student was trained leave its key unchanged when unset, so its checkpoint still resumes."
    from megrag_kit.distill_train import TrainConfig, _key_hyperparameters
    seen = 0
    for f in sorted((ROOT / "runs/distill").glob("student-v[3-7]*/manifest.json")):     # before select_weight
        hp = {k: v for k, v in json.loads(f.read_text())["hyperparameters"].items() if k not in ("steps", "save_every")}
        assert _key_hyperparameters(TrainConfig(**hp)) == hp, f
        seen += 1
    assert seen >= 8                                       # v3 to v7, committed
    assert _key_hyperparameters(TrainConfig(select_weight=5))["select_weight"] == 5
