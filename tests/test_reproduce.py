"""`megrag-kit reproduce`: the experiment notebooks under papermill with tiny parameters and scripted models (their
figures exist, are valid images and hold the expected series), the kit-vs-FlashRAG table read from the committed
results, parameter typos, a profile file's values in the check cells, the latency and manifest fixes of the runner,
and the 2Wiki question type. What needs no kernel, scripted stand-in, runner or data lives beside the code:
nbs/95_reproduce.ipynb, 95a_reproduce_profiles, 10c_megrag_summary (the counts the figures show, on hand-made
traces), 20d_evireform_summary and 30_cara (round usage and the budget curve on hand-made rows)."""
import gzip, json, shutil, time, xml.etree.ElementTree as ET
from pathlib import Path
import numpy as np
import pytest
from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.core import Dataset, Question
from megrag_kit.data import infer_2wiki_type, load_dataset
from megrag_kit.method import Resources, build_method
from megrag_kit.models import LLMCache
from megrag_kit.megrag import savings, termination_counts
from megrag_kit.reproduce import EXPERIMENTS, ExperimentError, reproduce
from megrag_kit.runner import read_predictions, run
from conftest import SHARED, ScriptedLLM, needs_shared
from megrag_kit.testing import HashEmbedder, ScriptedPolicy

FAKE = dict(llm="py:megrag_kit.testing:ScriptedPolicy", embedder="py:megrag_kit.testing:HashEmbedder", limit=3, device="cpu",
            megrag={"budget": 2}, budgets=[1, 2],
            limit_rounds=2, limit_sweep=2, sweep_agents=[1, 2], sweep_t_max=[1, 2],          # BERTScore would load MiniLM: not in the fast tier
            answer_options={"read": True, "faithfulness": True}, sweep_options={"read": True},
            read_committed="always")        # EviReform's main tables: the committed runs, whatever the stand-in LLM


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    return out, reproduce("demo", params=FAKE, out=out, progress=False)


def _svg_ticks(p: Path, axes: int, axis: str) -> list[str]:
    "The tick labels of axis `x` or `y` of the `axes`-th axes (1-based) of a matplotlib SVG (text kept as text)."
    root = ET.parse(p).getroot()
    ax = next(g for g in root.iter() if g.get("id") == f"axes_{axes}")
    part = [g for g in ax if (g.get("id") or "").startswith("matplotlib.axis_")][0 if axis == "x" else 1]   # ids count across axes
    return [t.text.strip() for tick in part if (tick.get("id") or "").startswith(f"{axis}tick_") for t in tick.iter()
            if t.tag.endswith("text") and t.text and t.text.strip()]


def _svg_text(p: Path) -> str:
    root = ET.parse(p).getroot()                     # a valid SVG document (text kept as text)
    return " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))


def test_every_notebook_ran_and_wrote_its_outputs(done):
    out, d = done
    assert set(d) == set(EXPERIMENTS)
    for n, r in d.items():
        nb = json.loads(Path(r["notebook"]).read_text())
        assert Path(r["notebook"]).parent == out / "notebooks" and nb["cells"][1]["metadata"]["tags"][:1] == ["parameters"]
        assert r["outputs"] and all(Path(f).exists() and Path(f).stat().st_size > 0 for f in r["outputs"])
        rec = json.loads((out / "results" / f"{n}.json").read_text())
        for k in ("params", "models", "seed", "versions", "hardware", "wall_s", "runs"): assert k in rec, (n, k)
        assert rec["versions"]["git_commit"] and rec["runs"]
    assert {Path(f).name for f in d["megrag_tables"]["outputs"]} == {f"megrag_{t}.{e}" for t in ("table1", "table2", "table3", "budget", "flashrag", "gold_bound", "2wiki100", "2wiki100_paired") for e in ("md", "csv")}


def test_figures_are_images_with_the_expected_series(done):
    from PIL import Image
    out, d = done
    figs = sorted({Path(f).stem for f in d["megrag_figures"]["outputs"] + d["evireform_tables"]["outputs"] + d["cara_tables"]["outputs"] if f.endswith(".png")})
    assert figs == ["cara_causal_scores", "cara_fig2_budget", "cara_variants", "evireform_coverage", "evireform_fig_a1", "evireform_growth", "evireform_paired", "evireform_sweeps", "megrag_budget", "megrag_fig3_termination", "megrag_fig4_composition", "megrag_fig5_depth", "megrag_fig6_latency", "megrag_granularity_by_step"]
    for f in figs:
        with Image.open(out / "figures" / f"{f}.png") as im: im.verify(); assert im.format == "PNG"
        with Image.open(out / "figures" / f"{f}.png") as im: assert im.size[0] > 300 and im.size[1] > 200
    series = {"megrag_fig3_termination": ["ours", "paper", "n = 3 questions"], "megrag_fig4_composition": ["T+S+P", "T+S", "n = 3 questions"],
              "megrag_fig5_depth": ["F1 (ours)", "mean steps (ours)"], "megrag_granularity_by_step": ["step 1", "T+S+P", "n = 3 questions"], "megrag_fig6_latency": ["direct", "native_rag", "megrag", "megrag (paper)"],
              "megrag_budget": ["ours", "paper (MuSiQue)", "budget exhausted (%)"], "evireform_paired": ["ours: full minus control"],
              "cara_variants": ["Hit@1", "Recall@20", "MRR", "nodes examined", "n = 3 questions", "STaRK"],
              "evireform_coverage": ["ours (full)", "paper (2wikimultihopqa)", "paper (musique)", "final top 5", "n = 3 questions"],
              "evireform_sweeps": ["alpha", "beta", "k_r", "L", "ours recall@5", "ours chain@5", "n = 2 questions", "paper: R@5 range 0.12 (2Wiki)"],
              "evireform_growth": ["ours: dense", "ours: bm25", "ours: full", "paper: full, MuSiQue (200 q)", "55 p", "254 p", "n = 3 questions"],
              "evireform_fig_a1": ["ours: EviReform minus the strongest other run", "2wikimultihopqa: R@5 vs", "musique: R@10 vs", "11 of the 12 paired intervals"],
              "cara_fig2_budget": ["ours, m = 1", "ours, m = 2", "Recall@20", "BERTScore F1 (bert-score with all-MiniLM-L6-v2", "T_max",
                                   "n = 2 questions per point", "not computed: the budget runs did not score BERTScore"]}
    for f, want in series.items():
        text = _svg_text(out / "figures" / f"{f}.svg")
        assert all(w in text for w in want), (f, want, text[:300])


def test_figure_numbers_come_from_the_runs(done):
    "Figure 3's termination counts and savings are those of the run folders it names."
    import pandas as pd
    out, _ = done
    rec = json.loads((out / "results" / "megrag_figures.json").read_text())
    folder = {r["run_name"]: Path(r["folder"]) for r in rec["runs"]}
    rows = read_predictions(folder["megrag-full"] / "predictions.jsonl")[:3]
    fixed = read_predictions(folder["megrag-fixed_depth"] / "predictions.jsonl")[:3]
    assert all(r["steps"] == 2 for r in fixed)                      # B = 2 steps for every question
    data = pd.read_csv(out / "figures" / "megrag_fig3_termination.csv", dtype={"termination step": str})
    left = data[data.panel == "left"]
    assert dict(zip(left["termination step"].astype(str), left["questions"].astype(int))) == termination_counts(rows)
    ours = data[(data.panel == "right") & (data.source == "ours")].set_index("measure")["value"].to_dict()
    s = savings(rows, fixed)
    assert ours == pytest.approx({k: s[k] for k in ("calls saved %", "tokens saved %", "delta F1")})
    from megrag_kit.megrag import composition_by_step                    # the hop-by-hop granularity figure: the same rows, per step
    dh, hop = pd.read_csv(out / "figures" / "megrag_granularity_by_step.csv"), composition_by_step(rows)
    assert {(int(r["step"]), r["composition"]): (int(r["n"]), r["% of nodes"]) for _, r in dh.iterrows()} == \
        {(i, c): (v["n"], v.get(c, 0.0)) for i, v in hop.items() for c in ("T", "T+S", "T+S+P")} and hop[1]["n"] == 3


def test_megrag_table1_has_the_iterative_baselines_and_says_the_student_was_not_run(done):
    import pandas as pd
    out, _ = done
    t1 = pd.read_csv(out / "tables" / "megrag_table1.csv")
    assert list(t1["run"]) == ["direct", "native_rag", "oracle", "ircot", "iter_retgen", "megrag", "megrag (distilled): not run (no student adapter)"]
    assert t1["n"].iloc[:6].tolist() == [3] * 6 and pd.isna(t1["n"].iloc[6]) and pd.isna(t1["F1"].iloc[6])
    assert t1["paper F1"].iloc[5:].tolist() == [57.93, 76.34]                    # prompt-only beside w/o SFT, the distilled row beside Table 1
    t3 = pd.read_csv(out / "tables" / "megrag_table3.csv")
    # without a student every ablation runs the full row's procedure prompt-only; only w/o SFT is not run
    assert list(t3["run"]) == [f"{v} (prompt-only)" for v in ("full", "triples_only", "sentences_only", "passages_only", "no_history")] + ["no_sft: not run (no student adapter)"]
    assert t3["n"].iloc[:5].tolist() == [3] * 5
    with pytest.raises(ExperimentError, match="student must be a spec BASE\\+lora:ADAPTER_FOLDER"):
        reproduce("demo", only=["megrag_tables"], params={**FAKE, "student": "smollm2-135m"}, out=out, progress=False)


def test_a_student_adds_the_distilled_rows(tmp_path):
    "With a student spec the distilled rows are runs of the student (here a scripted stand-in), with their numbers."
    import pandas as pd
    reproduce("demo", only=["megrag_tables"], params={**FAKE, "limit": 2, "table1": ["megrag"], "budgets": [1],
                                                               "student": "py:megrag_kit.testing:ScriptedPolicy"},
              out=tmp_path, progress=False)
    t1 = pd.read_csv(tmp_path / "tables" / "megrag_table1.csv").set_index("run")
    assert list(t1.index) == ["megrag", "megrag (distilled)"] and t1.loc["megrag (distilled)", "n"] == 2
    assert t1.loc["megrag (distilled)", "paper F1"] == 76.34 and not pd.isna(t1.loc["megrag (distilled)", "F1"])
    t3 = pd.read_csv(tmp_path / "tables" / "megrag_table3.csv").set_index("run")
    assert t3.loc[["full (distilled)", "no_sft"], "n"].tolist() == [2, 2] and not any("not run" in r for r in t3.index)
    rec = json.loads((tmp_path / "results" / "megrag_tables.json").read_text())
    assert rec["params"]["student"] == "py:megrag_kit.testing:ScriptedPolicy"                     # the provenance names the student


def test_flashrag_comparison_comes_from_the_committed_files(done):
    """The kit-vs-FlashRAG table is the committed results scored again: the kit's EM, F1, Recall@5, calls and seconds
    are the means of its run folder's rows, FlashRAG's are its committed predictions scored by the kit's metrics, over
    the 20 questions both answered (whatever the notebook's own dataset and limit)."""
    import pandas as pd
    from megrag_kit.runner import score
    out, _ = done
    root = Path(__file__).parents[1]
    t = pd.read_csv(out / "tables" / "megrag_flashrag.csv")
    assert list(zip(t.pipeline, t.implementation)) == [("ircot", "kit"), ("ircot", "FlashRAG"), ("iter_retgen", "kit"), ("iter_retgen", "FlashRAG")]
    assert not t["run"].str.startswith("not run").any()
    mean = lambda xs: round(sum(xs) / len(xs), 2)
    for p in ("ircot", "iter_retgen"):
        kit_out = json.loads((root / "benchmarks/results/flashrag" / f"kit-{p}.meta.json").read_text())["out"]
        kit = {r["id"]: r for r in read_predictions(root / kit_out / "predictions.jsonl")}
        fr_file = root / "benchmarks" / "results" / "flashrag" / f"{p}.jsonl"
        fr = {r["id"]: r for r in map(json.loads, fr_file.read_text().splitlines())}
        meta = json.loads(fr_file.with_suffix(".meta.json").read_text())
        assert len(kit) == len(fr) == meta["n"] == 20 and set(kit) == set(fr) and not any(r.get("failed") for r in kit.values())
        k = t[(t.pipeline == p) & (t.implementation == "kit")].iloc[0]
        rows = list(kit.values())
        assert (k["n"], k["EM"], k["F1"], k["Recall@5"]) == pytest.approx((20, *(mean([100 * r[m] for r in rows]) for m in ("em", "f1", "recall@5"))))
        assert (k["LLM calls/q"], k["seconds/q"]) == pytest.approx((mean([r["llm_calls"] for r in rows]), mean([r["latency_s"] for r in rows])))
        f = t[(t.pipeline == p) & (t.implementation == "FlashRAG")].iloc[0]
        sc = [score(Question(i, kit[i]["question"], kit[i]["gold_answers"], kit[i]["gold_pids"]), fr[i]["prediction"], fr[i]["retrieved"]) for i in kit]
        assert (f["n"], f["EM"], f["F1"], f["Recall@5"]) == pytest.approx((20, *(mean([100 * s.get(m, 0.0) for s in sc]) for m in ("em", "f1", "recall@5"))))
        assert f["LLM calls/q"] == pytest.approx(mean([r["llm_calls"] for r in fr.values()])) and sum(r["llm_calls"] for r in fr.values()) == meta["llm_calls"]
        assert f["seconds/q"] == pytest.approx(meta["wall_s"] / 20, abs=0.006) and meta["pipeline"] in f["run"]  # 2 decimals
        assert k["seconds/q basis"].startswith("batch share, batch size 8") and f["seconds/q basis"].startswith("pipeline wall time / 20")
    md = (out / "tables" / "megrag_flashrag.md").read_text()
    assert "flashrag-dev" in md and "benchmarks/flashrag_compare.py" in md


def test_flashrag_comparison_without_the_files_says_not_run(tmp_path):
    "Where the committed results are missing, each side's row says 'not run' with the command that makes it, and the notebook still finishes."
    import pandas as pd
    reproduce("demo", only=["megrag_tables"], params={**FAKE, "limit": 1, "table1": ["direct"], "budgets": [1], "comparison_root": str(tmp_path / "none")},
              out=tmp_path, progress=False)
    t = pd.read_csv(tmp_path / "tables" / "megrag_flashrag.csv")
    assert t["run"].tolist() == ["not run: megrag-kit --threads 1 run ircot --dataset 2wikimultihopqa --limit 20 --device cpu --out runs/2wiki20-ircot",
                                 "not run: python benchmarks/flashrag_compare.py flashrag --work WORK --pipeline ircot (FlashRAG's venv, after the prepare step)",
                                 "not run: megrag-kit --threads 1 run iter_retgen --dataset 2wikimultihopqa --limit 20 --device cpu --out runs/2wiki20-iter_retgen",
                                 "not run: python benchmarks/flashrag_compare.py flashrag --work WORK --pipeline iter_retgen (FlashRAG's venv, after the prepare step)"]
    assert t["F1"].isna().all()


def test_cara_tables_come_from_the_runs(done):
    "The retrieval and cost tables are the run folders' summaries, one row per variant, with the paper's row named and the datasets said."
    import pandas as pd
    out, _ = done
    rec = json.loads((out / "results" / "cara_tables.json").read_text())
    assert [r["params"]["variant"] for r in rec["runs"]][:5] == ["full", "no_causal", "count", "no_causal_count", "global_search"]
    rec["runs"] = rec["runs"][:5]                                   # the retrieval runs; Table 2's and the sweep's are tested below
    assert rec["configs"]["cara"]["agents"] == 2 and rec["configs"]["cara"]["t_max"] == 2            # the demo profile's agent budget
    ret, cost = pd.read_csv(out / "tables" / "cara_retrieval.csv"), pd.read_csv(out / "tables" / "cara_cost.csv")
    for r in rec["runs"]:
        s = json.loads((Path(r["folder"]) / "summary.json").read_text())
        row = ret[ret.variant == r["params"]["variant"]].iloc[0]
        assert (row["n"], row["Hit@1"], row["Recall@20"], row["MRR"]) == (3, s["hit@1"], s["recall@20"], s["mrr"])
        c = cost[cost.variant == r["params"]["variant"]].iloc[0]
        assert (c["agent calls"], c["causal calls"], c["nodes examined"], c["total calls"]) == pytest.approx(
            (s["agent_calls"], s["causal_calls"], s["nodes_examined"], s["agent_calls"] + s["causal_calls"]))
    assert cost.set_index("variant").loc["global_search", "agent calls"] == 0
    assert ret.set_index("variant").loc["no_causal_count", "paper row"].startswith("ARK")
    md = (out / "tables" / "cara_retrieval.md").read_text()
    assert "STaRK" in md and "corpus graph" in md and "first 3 questions" in md
    assert set(pd.read_csv(out / "tables" / "cara_paired.csv")["against"]) == {"no_causal", "count", "no_causal_count", "global_search"}


def test_evireform_appendix_tables_come_from_the_committed_runs(done):
    "Table A.2's contrasts are paired differences of the newest committed runs of each setting (post-fix, version 2); Tables A.3/A.4 are `evireform_summary` of each run; the paper's values beside them."
    import pandas as pd
    from megrag_kit.evireform import evireform_summary
    from megrag_kit.metrics import paired_bootstrap
    out, _ = done
    root = Path(__file__).parents[1] / "runs"
    tc_all = pd.read_csv(out / "tables" / "evireform_controls.csv")
    assert tc_all["dataset"].drop_duplicates().tolist() == ["2wikimultihopqa", "musique"]
    tc = tc_all[tc_all["dataset"] == "2wikimultihopqa"].set_index("contrast")
    assert tc.loc["reformulation, with propagation", "runs"] == "2wiki100-evireform-parser-full minus 2wiki100-evireform-parser-no_reformulation"
    assert list(tc.index) == ["reformulation, with propagation", "propagation, with reformulation", "reformulation, without propagation",
                              "propagation, without reformulation", "full minus repeating the question", "full minus residual queries only"]
    first = lambda n: [r for r in read_predictions(root / n / "predictions.jsonl") if not r.get("failed")][:3]   # the tests' limit
    sc = lambda n: {r["id"]: 100 * r["chain@5"] for r in first(n)}
    d = paired_bootstrap(sc("2wiki100-evireform-parser-full"), sc("2wiki100-evireform-parser-no_reformulation"))
    assert tc.loc["reformulation, with propagation", "chain@5 diff"] == round(d["diff"], 2)
    assert tc.loc["reformulation, with propagation", ["paper recall@5 diff", "paper chain@5 diff"]].tolist() == [7.20, 18.00]
    assert pd.isna(tc.loc["propagation, without reformulation", "paper chain@5 diff"])
    tv = pd.read_csv(out / "tables" / "evireform_coverage.csv").set_index("run")
    cov = evireform_summary(first("2wiki100-evireform-parser-full"))
    assert tv.loc["2wiki100-evireform-parser-full", ["chain initial %", "chain expanded %", "incomplete initially", "became complete"]].tolist() == \
        [cov["chain_initial"], cov["chain_expanded"], cov["incomplete_initial"], cov["became_complete"]]
    assert tv.loc["2wiki100-evireform-parser-full", ["paper chain initial %", "paper became complete"]].tolist() == [53.0, 416]
    assert tv.loc["musique200-evireform-parser-full", ["paper chain initial %", "paper became complete"]].tolist() == [43.9, 150]
    assert "2wiki100-evireform-parser-no_reformulation" not in tv.index                    # no residual queries: no expanded pool to count


def test_evireform_rounds_tables_come_from_the_runs_made_there(done):
    "Tables A.5/A.6: one run per setting on the first `limit_rounds` questions; the means, paired differences and round usage are those of the run folders."
    import pandas as pd
    from megrag_kit.evireform import round_usage
    from megrag_kit.metrics import paired_bootstrap
    out, _ = done
    rec = json.loads((out / "results" / "evireform_tables.json").read_text())
    made = [r for r in rec["runs"] if str(out) in r["folder"]][:4]                  # then the sweeps' and index growth's runs
    assert [(r["params"]["variant"], r["params"]["rounds"]) for r in made] == [("full", 1), ("reorder", 1), ("full", 2), ("full", 3)]
    assert all(r["limit"] == 2 and r["dataset"] == "demo" and r["params"]["pool_x"] == 6 and not r["params"]["read"] for r in made)
    rows = {r["params"]["variant"] + str(r["params"]["rounds"]): read_predictions(Path(r["folder"]) / "predictions.jsonl") for r in made}
    t5 = pd.read_csv(out / "tables" / "evireform_rounds.csv").set_index("run")
    assert list(t5.index) == ["1 round", "reorder", "up to 2 rounds", "up to 3 rounds"] and t5["n"].tolist() == [2] * 4
    assert t5.loc["up to 3 rounds", "recall@5"] == round(100 * float(np.mean([r["recall@5"] for r in rows["full3"]])), 2)
    d = paired_bootstrap({r["id"]: 100 * r["recall@10"] for r in rows["reorder1"]}, {r["id"]: 100 * r["recall@10"] for r in rows["full1"]})
    assert t5.loc["reorder", "recall@10 minus 1 round"] == round(d["diff"], 2) and pd.isna(t5.loc["1 round", "recall@5 minus 1 round"])
    assert t5["paper recall@5 minus 1 round"].iloc[:3].isna().all()                   # the paper states only up to three rounds minus one
    assert t5.loc["up to 3 rounds", "paper recall@5 minus 1 round"] == -0.20           # demo questions are 2Wiki: the paper's 2Wiki value
    t6 = pd.read_csv(out / "tables" / "evireform_round_usage.csv").set_index("run")
    u = round_usage(rows["full3"])
    assert t6.loc["up to 3 rounds", ["1 round %", "2 rounds %", "3 rounds %", "entered round 2 %", "LLM calls/q", "tokens/q"]].tolist() == \
        [u["ended"].get(1, 0.0), u["ended"].get(2, 0.0), u["ended"].get(3, 0.0), u["entered"].get(2, 0.0), u["llm_calls"], u["tokens"]]
    assert t6.loc["reorder", "no round %"] == 100.0 and t6.loc["reorder", ["1 round %", "entered round 2 %"]].isna().all()
    assert t6.loc["up to 3 rounds", "paper feedback tokens added %"] == 80 and pd.isna(t6.loc["up to 3 rounds", "paper entered round 2 %"])
    assert "first 2 questions" in (out / "tables" / "evireform_rounds.md").read_text()


def test_evireform_sweeps_come_from_one_run_per_setting(done):
    "Tables A.8-A.10: one run per setting off the center (the center is the one-round run), means and paired differences from those folders."
    import pandas as pd
    from megrag_kit.metrics import paired_bootstrap
    out, _ = done
    rec = json.loads((out / "results" / "evireform_tables.json").read_text())
    made = {r["folder"]: r for r in rec["runs"] if str(out) in r["folder"] and r["limit"] == 2 and "index_passages" not in r}
    center = dict(alpha=0.5, beta=0.5, k_r=4, L=2)
    params = {tuple(r["params"][k] for k in center): f for f, r in made.items() if r["params"]["variant"] == "full" and r["params"]["rounds"] == 1}
    grid = {"alpha": [0.25, 0.375, 0.5, 0.625, 0.75], "beta": [0.25, 0.375, 0.5, 0.625, 0.75], "k_r": [1, 2, 4, 8], "L": [1, 2, 3]}
    want = {tuple(v if k == p else center[k] for k in center) for p, vs in grid.items() for v in vs}
    assert set(params) == want and len(want) == 14                    # 17 settings, the center four times: 14 runs
    ts = pd.read_csv(out / "tables" / "evireform_sweeps.csv", dtype={"value": str})
    assert ts[["parameter", "value"]].values.tolist() == [[p, str(v)] for p, vs in grid.items() for v in vs]
    rows = lambda key: {r["id"]: r for r in read_predictions(Path(params[key]) / "predictions.jsonl")}
    ref, k8 = rows(tuple(center.values())), rows((0.5, 0.5, 8, 2))
    r8 = ts[(ts["parameter"] == "k_r") & (ts["value"] == "8")].iloc[0]
    assert r8["recall@5"] == round(100 * float(np.mean([r["recall@5"] for r in k8.values()])), 2) and not r8["center"]
    d = paired_bootstrap({q: 100 * r["chain@5"] for q, r in k8.items()}, {q: 100 * r["chain@5"] for q, r in ref.items()})
    assert r8["chain@5 minus center"] == round(d["diff"], 2)
    assert ts["center"].sum() == 4 and ts[ts["center"]]["recall@5 minus center"].isna().all()
    assert ts["paper recall@5"].isna().all()                               # the paper's sweep numbers are MuSiQue's; the demo is 2Wiki
    tr = pd.read_csv(out / "tables" / "evireform_sweep_ranges.csv").set_index("parameter")
    assert tr.loc["alpha", "paper recall@5 range"] == 0.12 and pd.isna(tr.loc["beta", "paper recall@5 range"])
    assert tr.loc["k_r", "recall@5 range"] == round(ts[ts["parameter"] == "k_r"]["recall@5"].max() - ts[ts["parameter"] == "k_r"]["recall@5"].min(), 2)


def test_evireform_index_growth_searches_only_each_level(done):
    "Figure A.3: one run per (level, variant) on the first questions of group 1; every passage a run ranked is in its level's index."
    import pandas as pd
    from megrag_kit.evireform import growth_levels
    out, _ = done
    rec = json.loads((out / "results" / "evireform_tables.json").read_text())
    grown = [r for r in rec["runs"] if "index_passages" in r]
    levels = growth_levels(load_dataset("demo"), 5)
    assert [(r["index_passages"], r["params"]["variant"]) for r in grown] == [(lv["n_passages"], v) for lv in levels for v in ("dense", "bm25", "full")]
    for r in grown:
        lv = next(lv for lv in levels if lv["n_passages"] == r["index_passages"])
        preds = read_predictions(Path(r["folder"]) / "predictions.jsonl")
        assert [p["id"] for p in preds] == [q.qid for q in load_dataset("demo").questions[:3]]
        assert all(set(p["retrieved"]) <= set(lv["passages"]) and p["retrieved"] for p in preds), r["folder"]
        assert json.loads((Path(r["folder"]) / "run.json").read_text())["index_passages"] == lv["n_passages"]
    tg = pd.read_csv(out / "tables" / "evireform_growth.csv")
    assert tg["indexed passages"].tolist() == [lv["n_passages"] for lv in levels for _ in range(3)] == [55] * 3 + [110] * 3 + [166] * 3 + [215] * 3 + [254] * 3
    full = tg[tg["variant"] == "full"].set_index("level")
    assert full.loc[1, "paper recall@5"] == 76.46 and full.loc[5, "paper recall@10"] == 80.54 and full.loc[2:4, "paper recall@5"].isna().all()
    assert tg[tg["variant"] != "full"]["paper recall@5"].isna().all()
    last = read_predictions(Path(grown[-1]["folder"]) / "predictions.jsonl")
    assert full.loc[5, "recall@10"] == round(100 * float(np.mean([p["recall@10"] for p in last])), 2)


def test_cara_answer_table_and_budget_curve_come_from_the_runs(done):
    "Table 2: one read run per answer variant; Figure 2's table is `budget_curve` of the budget runs, with the paper's Prime points beside m = 3 only."
    import pandas as pd
    from megrag_kit.cara import budget_curve
    out, _ = done
    rec = json.loads((out / "results" / "cara_tables.json").read_text())
    ans = [r for r in rec["runs"] if r["params"]["read"] and r["limit"] == 3]
    assert [r["params"]["variant"] for r in ans] == ["full", "no_causal_count", "global_search"] and all(r["params"]["faithfulness"] for r in ans)
    t2 = pd.read_csv(out / "tables" / "cara_answers.csv").set_index("variant")
    for r in ans:
        rows = read_predictions(Path(r["folder"]) / "predictions.jsonl")
        f = [x["faithfulness"] for x in rows if x.get("faithfulness") is not None]
        assert t2.loc[r["params"]["variant"], "faithfulness n"] == len(f)
        if f: assert t2.loc[r["params"]["variant"], "faithfulness"] == round(100 * sum(f) / len(f), 2)
    assert t2.loc["full", "paper BERTScore F1 (Prime, m = 3, T_max = 150)"] == 41.6 and t2["BERTScore F1"].isna().all()   # not measured here
    sw = [r for r in rec["runs"] if r["limit"] == 2 and r["method"] == "cara"]
    assert [(r["params"]["agents"], r["params"]["t_max"]) for r in sw] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    bc = budget_curve({(r["params"]["agents"], r["params"]["t_max"]): read_predictions(Path(r["folder"]) / "predictions.jsonl") for r in sw})
    tb = pd.read_csv(out / "tables" / "cara_budget.csv")
    assert tb[["agents", "T_max", "n", "MRR", "Hit@1", "LLM calls/q"]].values.tolist() == [[b["agents"], b["t_max"], b["n"], b["mrr"], b["hit@1"], b["llm_calls"]] for b in bc]
    assert tb["paper BERTScore F1 (Prime)"].isna().all()                             # the demo grid has no m = 3 point


@pytest.mark.slow
def test_rounds_answers_and_budget_sections_with_the_real_models(tmp_path):
    "52's rounds runs and 53's Table 2 and budget sweep with SmolLM2-135M and MiniLM on one question: BERTScore (local MiniLM) is measured and the paper's Prime points are drawn."
    import pandas as pd
    reproduce("demo", only=["evireform_tables"], params=dict(limit=1, limit_rounds=1, rounds_settings=[3], limit_sweep=1, sweeps={"beta": [0.25, 0.5], "L": [1]},
                                                              growth_groups=2, limit_growth=1, growth_variants=["dense", "full"]), out=tmp_path, progress=False)
    reproduce("demo", only=["cara_tables"], params=dict(limit=1, limit_sweep=1, sweep_agents=[1], sweep_t_max=[1, 2], variants=["full"], answer_variants=["full"]),
              out=tmp_path, progress=False)
    t6 = pd.read_csv(tmp_path / "tables" / "evireform_round_usage.csv").set_index("run")
    assert list(t6.index) == ["1 round", "reorder", "up to 3 rounds"] and t6["n"].tolist() == [1] * 3 and t6.loc["1 round", "1 round %"] == 100.0
    ts = pd.read_csv(tmp_path / "tables" / "evireform_sweeps.csv", dtype={"value": str})
    assert ts[["parameter", "value", "n"]].values.tolist() == [["beta", "0.25", 1], ["beta", "0.5", 1], ["L", "1", 1]] and ts["center"].tolist() == [False, True, False]
    tg = pd.read_csv(tmp_path / "tables" / "evireform_growth.csv")
    assert tg[["level", "variant", "n"]].values.tolist() == [[1, "dense", 1], [1, "full", 1], [2, "dense", 1], [2, "full", 1]]
    assert tg["indexed passages"].tolist() == [136, 136, 254, 254] and tg["recall@20"].between(0, 100).all()
    t2 = pd.read_csv(tmp_path / "tables" / "cara_answers.csv")
    assert t2["BERTScore F1 n"].tolist() == [1] and 0 <= t2["BERTScore F1"].iloc[0] <= 100
    tb = pd.read_csv(tmp_path / "tables" / "cara_budget.csv")
    assert tb["T_max"].tolist() == [1, 2] and tb["BERTScore F1"].notna().all()
    assert "paper (STaRK Prime, m = 3)" in _svg_text(tmp_path / "figures" / "cara_fig2_budget.svg")


def test_a_second_reproduction_reuses_the_runs(done):
    out, _ = done
    before = {p: p.read_text() for p in (out / "runs").glob("*/predictions.jsonl")}
    reproduce("demo", only=["megrag_tables"], params=FAKE, out=out, progress=False)
    after = {p: p.read_text() for p in (out / "runs").glob("*/predictions.jsonl")}
    assert after == before                                          # nothing answered again


def test_a_profile_file_of_ones_own_reaches_the_check_cells(tmp_path):
    """`--profile PATH.toml`: a profile declared in a file outside the package, in the shipped files' form; its values
    reach the notebooks (their check cells see them: each check starts a kernel, so this stays here; the refusals of a
    bad file, before anything starts, are checked in nbs/95a_reproduce_profiles.ipynb)."""
    from megrag_kit.reproduce_profiles import PROFILES_DIR
    mine = tmp_path / "mine.toml"
    mine.write_text((PROFILES_DIR / "demo.toml").read_text().replace("sweep_agents = [1, 2] ", "sweep_agents = [0, 2] "))
    r = CliRunner().invoke(app, ["reproduce", "--profile", str(mine), "--check", "--only", "cara_tables", "--out", str(tmp_path / "o")])
    assert r.exit_code == 1 and "sweep_agents must be a list of distinct ints in 1..16, got [0, 2]" in r.output, r.output
    mine.write_text((PROFILES_DIR / "demo.toml").read_text())
    r = CliRunner().invoke(app, ["reproduce", "--profile", str(mine), "--check", "--only", "cara_tables", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0 and "cara_tables: parameters valid" in r.output, r.output


@needs_shared
def test_check_validates_the_paper_profile_without_answering(tmp_path):
    "`reproduce --check` runs each notebook's parameter and check cells only: the paper profile (meant for a GPU) is valid, and a bad value fails naming it."
    d = reproduce("paper", check=True, out=tmp_path, progress=False)
    assert set(d) == set(EXPERIMENTS) and all(v["notebook"] is None and v["outputs"] == [] for v in d.values())
    assert list(tmp_path.iterdir()) == []                                             # nothing answered, nothing written
    with pytest.raises(ExperimentError, match="evireform_tables failed its parameter check: ValueError: limit_growth must be an int >= 1 or None, got 0"):
        reproduce("paper", only=["evireform_tables"], params={"limit_growth": 0}, check=True, out=tmp_path, progress=False)
    r = CliRunner().invoke(app, ["reproduce", "--profile", "paper", "--check", "--only", "cara_tables", "--out", str(tmp_path)])
    assert r.exit_code == 0 and "cara_tables: parameters valid" in r.output, r.output
    r = CliRunner().invoke(app, ["reproduce", "--check", "--only", "cara_tables", "--param", "sweep_agents=[0]", "--out", str(tmp_path)])
    assert r.exit_code == 1 and "sweep_agents must be a list of distinct ints in 1..16, got [0]" in r.output, r.output


def test_parameter_typos_fail_naming_the_valid_names(tmp_path):
    with pytest.raises(ValueError, match="megrag_tables: unknown parameter limt; valid: dataset, table2_dataset, table_datasets, limit"):
        reproduce("demo", only=["megrag_tables"], params={"limt": 2}, out=tmp_path)
    with pytest.raises(ExperimentError, match="megrag_tables failed: ConfigError: megrag: unknown parameter budgte; valid: reader_max_passages"):
        reproduce("demo", only=["megrag_tables"], params={**FAKE, "megrag": {"budgte": 2}}, out=tmp_path, progress=False)
    r = CliRunner().invoke(app, ["reproduce", "--only", "megrag_figures", "--param", "latency_methods=[\"megrg\"]", "--limit", "1",
                                 "--llm", "py:megrag_kit.testing:ScriptedPolicy", "--embedder", "py:megrag_kit.testing:HashEmbedder",
                                 "--out", str(tmp_path)])
    assert r.exit_code == 1 and "unknown method 'megrg'" in r.output, r.output
    with pytest.raises(ExperimentError, match="cara_tables failed: ConfigError: cara: variant must be one of \\['full', 'no_causal'"):
        reproduce("demo", only=["cara_tables"], params={**FAKE, "variants": ["full", "no_casual"]}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="cara_tables failed: ConfigError: cara: unknown parameter agent; valid: "):
        reproduce("demo", only=["cara_tables"], params={**FAKE, "cara": {"agent": 2}}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="evireform_tables failed: ValueError: rounds_settings must be a list of distinct values among 2 and 3, got \\[4\\]"):
        reproduce("demo", only=["evireform_tables"], params={**FAKE, "rounds_settings": [4]}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="evireform_tables failed: ValueError: rounds_options: \\['rounds'\\] are set per run"):
        reproduce("demo", only=["evireform_tables"], params={**FAKE, "rounds_options": {"rounds": 2}}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="evireform_tables failed: ConfigError: evireform: unknown parameter alpah; valid: "):
        reproduce("demo", only=["evireform_tables"], params={**FAKE, "sweeps": {"alpah": [0.5]}}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="evireform_tables failed: ConfigError: evireform: variant must be one of"):
        reproduce("demo", only=["evireform_tables"], params={**FAKE, "growth_variants": ["ful"]}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="evireform_tables failed: ValueError: limit_growth must be an int >= 1 or None, got 0"):
        reproduce("demo", only=["evireform_tables"], params={**FAKE, "limit_growth": 0}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="evireform_tables failed: ValueError: sweeps: \\['pool_x'\\] cannot be swept here"):
        reproduce("demo", only=["evireform_tables"], params={**FAKE, "sweeps": {"pool_x": [3]}}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="cara_tables failed: ValueError: sweep_agents must be a list of distinct ints in 1..16, got \\[0, 2\\]"):
        reproduce("demo", only=["cara_tables"], params={**FAKE, "sweep_agents": [0, 2]}, out=tmp_path, progress=False)
    with pytest.raises(ExperimentError, match="cara_tables failed: ConfigError: cara: unknown parameter bertscor"):
        reproduce("demo", only=["cara_tables"], params={**FAKE, "answer_options": {"bertscor": True}}, out=tmp_path, progress=False)
    r = CliRunner().invoke(app, ["reproduce", "--only", "megrag_tabels"])
    assert r.exit_code == 2 and "unknown experiment 'megrag_tabels'" in r.output
    # a misspelled dataset is refused before any notebook runs, as an unknown experiment is
    r = CliRunner().invoke(app, ["reproduce", "--dry-run", "--param", "dataset=2wikimultihopq", "--out", str(tmp_path / "d")])
    assert r.exit_code == 2 and _invalid(r.output).startswith(_squash("unknown dataset '2wikimultihopq'; registered: [")), r.output
    assert not (tmp_path / "d").exists()


def _slow_openie(latency):
    "A scripted model whose OpenIE calls really take 0.4 s of wall time; other calls report `latency` seconds and take none."
    def script(msg):
        if msg.startswith("Passage:"):
            time.sleep(0.4); return json.dumps({"triples": [[msg.split("\n")[1], "has title", msg.split("\n")[1]]]})
        if "Is the evidence sufficient" in msg: return json.dumps({"sufficient": True})
        return json.dumps(dict(intermediate_answer="Cork", resolved_path="-> Cork", stop=True, answer="Cork", missing="none", next_query="", relation=""))
    return ScriptedLLM(script, latency_s=latency)


def test_latency_excludes_indexing_and_counts_cached_calls_at_first_cost(tmp_path):
    demo = load_dataset("demo")
    cache = LLMCache(tmp_path / "cache")
    lat = []
    for i in range(2):                                          # cold cache, then warm: same work, same latency
        llm = _slow_openie(0.5); llm.cache, llm.model_id = cache, "scripted-latency"
        res = Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=tmp_path / f"store{i}")
        s = run(build_method("megrag", {"n_p": 3}, res), demo, tmp_path / f"run{i}", limit=2, show_progress=False)
        rows = read_predictions(tmp_path / f"run{i}" / "predictions.jsonl")
        assert all(r["llm_seconds"] == pytest.approx(0.5 * r["llm_calls"]) for r in rows)
        assert all(r["latency_s"] >= r["llm_seconds"] for r in rows)           # a cached call counts what it cost when made
        assert all(r["indexing"]["llm_calls"] > 0 for r in rows) if i == 0 else True
        assert all(r["latency_s"] - r["llm_seconds"] < 0.4 for r in rows)      # the 6 x 0.4 s of OpenIE are not in it
        lat.append([r["llm_seconds"] for r in rows])
    assert lat[0] == lat[1]


def test_a_resumed_runs_manifest_says_what_was_finally_run(tmp_path):
    demo = load_dataset("demo")
    llm = ScriptedLLM(lambda m: "Cork")
    m = build_method("direct", {}, Resources(demo, llm=llm, embedder=None))
    run(m, demo, tmp_path, limit=1, show_progress=False)
    s = run(m, demo, tmp_path, limit=3, show_progress=False)
    mf = json.loads((tmp_path / "run.json").read_text())
    assert (s["n"], s["manifest"]["limit"], mf["limit"], mf["n_questions"], len(mf["invocations"])) == (3, 3, 3, 3, 2)
    assert json.loads((tmp_path / "summary.json").read_text())["manifest"]["limit"] == 3


@needs_shared
def test_2wiki_type_rule_agrees_with_the_labelled_questions():
    "The template rule against every labelled 2Wiki dev question held in the shared data (500 sampled + 2 full records)."
    d = SHARED / "multihop" / "2wikimultihopqa"
    s = json.load(gzip.open(d / "tts_sampled" / "sampled_ds.json.gz", "rt", encoding="utf-8"))
    labelled = [(s["question"][k], s["type"][k]) for k in s["question"]]
    labelled += [(r["question"], r["type"]) for r in json.load(gzip.open(d / "kag" / "qa_sub.json.gz", "rt", encoding="utf-8"))]
    wrong = [(q, t, infer_2wiki_type(q)) for q, t in labelled if infer_2wiki_type(q) != t]
    assert len(labelled) == 502 and wrong == []
    from collections import Counter
    ds = load_dataset("2wikimultihopqa", SHARED)
    assert Counter(q.qtype for q in ds.questions) == {"compositional": 416, "comparison": 243, "bridge_comparison": 236, "inference": 105}
    assert any("inferred from the 2Wiki templates" in n for n in ds.notes)


def test_count_and_budget_axes_have_whole_ticks_and_figure6_says_how_latency_was_measured(done):
    "Figure 3's question counts and the budget figure's B axis tick at whole numbers; Figure 6's log axis has readable labels."
    out, _ = done
    whole = lambda ts: ts and all(t.replace("\u2212", "-").lstrip("-").isdigit() for t in ts)
    assert whole(_svg_ticks(out / "figures" / "megrag_fig3_termination.svg", 1, "y")), _svg_ticks(out / "figures" / "megrag_fig3_termination.svg", 1, "y")
    for i in (1, 2, 3):                                          # one panel per measure, each on the budgets 1, 2 (ours) and 4 (the paper's)
        ticks = _svg_ticks(out / "figures" / "megrag_budget.svg", i, "x")
        assert ticks == ["1", "2", "4"], ticks
    xt = _svg_ticks(out / "figures" / "megrag_fig6_latency.svg", 1, "x")
    assert len(xt) >= 2 and all(float(t) > 0 for t in xt), xt
    text = _svg_text(out / "figures" / "megrag_fig6_latency.svg")
    assert "how latency was measured" in text and "batch size 1, 1 question per batch" in text and "measured" in text
    import pandas as pd
    d6 = pd.read_csv(out / "figures" / "megrag_fig6_latency.csv").set_index("method")
    assert d6.loc["megrag (paper)", "latency_s"] == 11.5 and set(d6["latency basis"].iloc[:3]) == {"measured"}


def test_figure6_rows_are_measured_per_question_at_batch_size_1(done):
    """Figure 6's runs are made at the demo profile's `latency_batch_size` (1): every row of each says `measured`, one
    question per batch, in run folders of their own (their key holds the batch size: the lock-step accuracy runs are not
    resumed for them) whose manifest says batch size 1 and no LLM call cache; the figure's data and text say so."""
    import pandas as pd
    from megrag_kit.reproduce import PROFILES
    out, _ = done
    assert PROFILES["demo"]["latency_batch_size"] == PROFILES["paper"]["latency_batch_size"] == 1
    d6 = pd.read_csv(out / "figures" / "megrag_fig6_latency.csv").set_index("method")
    ours = d6[d6["source"] == "ours"]
    assert list(ours.index) == ["direct", "native_rag", "megrag"]
    assert set(ours["latency basis"]) == {"measured"} and set(ours["batch"]) == {"batch size 1, 1 question per batch"}
    rec = json.loads((out / "results" / "megrag_figures.json").read_text())
    assert rec["params"]["latency_batch_size"] == 1 and rec["params"]["batch_size"] == 8
    timed = [r for r in rec["runs"] if r.get("latency_run")]
    assert sorted(r["method"] for r in timed) == ["direct", "megrag", "native_rag"]
    for r in timed:
        assert r["latency_run"] == {"batch_size": 1, "llm_cache": False}
        rows = read_predictions(Path(r["folder"]) / "predictions.jsonl")
        assert len(rows) == 3 and all(x["latency_basis"] == "measured" and x["batch_questions"] == 1 for x in rows)
        assert ours.loc[r["method"], "latency_s"] == pytest.approx(sum(x["latency_s"] for x in rows) / 3, abs=1e-3)
        mf = json.loads((Path(r["folder"]) / "run.json").read_text())
        assert {i["batch_size"] for i in mf["invocations"]} == {1} and mf["latency_run"]["llm_cache"] is False
    lockstep = {r["folder"] for r in rec["runs"] if not r.get("latency_run")}
    assert lockstep and not lockstep & {r["folder"] for r in timed}
    full = next(r for r in rec["runs"] if r["run_name"] == "megrag-full" and not r.get("latency_run"))
    assert {x["batch_questions"] for x in read_predictions(Path(full["folder"]) / "predictions.jsonl")} == {3}


def test_rows_say_how_latency_was_measured(tmp_path):
    "A lock-step batch's split time is labelled `batch share`; a call the backend timed, `measured per call`; one question alone, `measured`."
    from megrag_kit.models import Generation
    from conftest import ScriptedLLM
    class LockStep(ScriptedLLM):                                 # returns no latency of its own: generate splits the chunk's time
        def _generate(self, messages, **params): return [Generation(g.text, 10, 3) for g in super()._generate(messages, **params)]
    demo = load_dataset("demo")
    for name, llm, bs, want in (("lock", LockStep(lambda m: "Cork"), 2, "batch share"), ("timed", ScriptedLLM(lambda m: "Cork", 0.25), 2, "measured per call"),
                                ("alone", LockStep(lambda m: "Cork"), 1, "measured")):
        res = Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=tmp_path / "store")
        m = build_method("direct", {"reader_constrain_options": False}, res)      # free prompts: one generate for the batch
        run(m, demo, tmp_path / name, limit=2, batch_size=bs, show_progress=False)
        rows = read_predictions(tmp_path / name / "predictions.jsonl")
        assert [r["latency_basis"] for r in rows] == [want] * 2 and [r["batch_questions"] for r in rows] == [bs] * 2
        assert all(r["batch_wall_s"] >= 0 for r in rows)
    # a batch of one served from cache entries a lock-step batch made counts their shares: not `measured`
    cache = LLMCache(tmp_path / "cache")
    for name, bs, want in (("lock-cached", 2, "batch share"), ("alone-cached", 1, "batch share")):
        llm = LockStep(lambda m: "Cork"); llm.cache = cache
        res = Resources(demo, llm=llm, embedder=HashEmbedder(), store_root=tmp_path / "store")
        run(build_method("direct", {"reader_constrain_options": False}, res), demo, tmp_path / name, limit=2,
            batch_size=bs, show_progress=False)
        rows = read_predictions(tmp_path / name / "predictions.jsonl")
        assert [r["latency_basis"] for r in rows] == [want] * 2 and [r["cache_hits"] for r in rows] == [bs == 1] * 2


def test_table1_has_the_papers_baseline_rows_and_counts_print_whole(done):
    import pandas as pd
    out, _ = done
    t1 = pd.read_csv(out / "tables" / "megrag_table1.csv").set_index("run")
    assert (t1.loc["direct", "paper F1"], t1.loc["direct", "paper EM"]) == (28.51, 25.0)            # 2Wiki, Qwen3-8B (Table 1)
    assert (t1.loc["native_rag", "paper F1"], t1.loc["native_rag", "paper EM"]) == (32.10, 28.90)
    assert t1.loc["direct", "paper row"] == "Direct Model, Qwen3-8B (Table 1)" and pd.isna(t1.loc["oracle", "paper F1"])
    cov = (out / "tables" / "evireform_coverage.md").read_text()
    assert "| 459 | 416 |" in cov and "459.00" not in cov and "416.00" not in cov


def test_the_new_appendix_tables_carry_the_papers_values(done):
    "EviReform Table A.1 (strongest other retriever per metric) and A.11, CARA Table 5, each with the paper's values."
    import pandas as pd
    from megrag_kit.metrics import paired_bootstrap
    out, _ = done
    a1_all = pd.read_csv(out / "tables" / "evireform_table_a1.csv")
    a1 = a1_all[a1_all["dataset"] == "2wikimultihopqa"].set_index("metric")
    assert list(a1.index) == ["R@5", "R@10", "F1", "EM"] and set(a1["paper strongest system"].dropna()) == {"GeAR"}   # 2Wiki: GeAR for both
    assert a1.loc["F1", "comparator"].startswith("not run: 2wiki100-evireform-parser-full does not score F1 (retrieval only")
    runs = Path(__file__).parents[1] / "runs"
    k = int(a1.loc["R@5", "n"])                                       # the notebook's limit: the first k questions of each run
    rows = lambda n: {r["id"]: r for r in [r for r in read_predictions(runs / n / "predictions.jsonl") if not r.get("failed")][:k]}
    best = a1.loc["R@5", "comparator"]
    assert best in ("2wiki100-evireform-parser-dense", "2wiki100-evireform-parser-bm25", "2wiki20-native_rag")
    d = paired_bootstrap({q: 100 * v["recall@5"] for q, v in rows("2wiki100-evireform-parser-full").items()}, {q: 100 * v["recall@5"] for q, v in rows(best).items()})
    assert a1.loc["R@5", "diff"] == round(d["diff"], 2) and a1.loc["R@5", "above zero"] == (d["lo"] > 0)
    a11 = pd.read_csv(out / "tables" / "evireform_table_a11.csv")
    assert a11["paper musique"].tolist()[:5] == [-0.04, 5.90, 5.93, 5.72, 0.03] and a11["ours"][:5].str.startswith("not computed").all()
    cost = json.loads((Path(__file__).parents[1] / "benchmarks" / "results" / "retriever_cost.json").read_text())
    emb = {e["embedder"]: e for e in cost["embedders"]}
    bf16 = a11.set_index("comparison").loc[f"minilm@bf16 minus minilm, dense (demo, {cost['questions']} questions)", "ours"]
    assert float(bf16) == round(emb["minilm@bf16"]["dense recall@5"] - emb["minilm"]["dense recall@5"], 2)   # our row: the file's
    assert a11["paper musique"][5:].isna().all()
    t5 = pd.read_csv(out / "tables" / "cara_table5.csv").set_index("setting")
    assert t5.loc["agents m", "paper (§4.2, captions)"] == "3" and t5.loc["agents m", "ours (the full run)"] == "2"
    assert t5.loc["steps per agent T_max", "paper (§4.2, captions)"] == "150" and t5.loc["Neighbors k", "ours (the full run)"] == "5"


def test_cost_b2_and_configuration_tables_come_from_the_records(done):
    "EviReform Tables A.7, B.2 and C.1-C.10: the benchmark file's seconds, the committed runs' F1/EM, the run.json settings."
    import pandas as pd
    out, _ = done
    root = Path(__file__).parents[1]
    cost = json.loads((root / "benchmarks" / "results" / "retriever_cost.json").read_text())
    a7 = pd.read_csv(out / "tables" / "evireform_table_a7.csv").set_index("retriever")
    assert list(a7.index) == ["dense", "BM25", "MEGRAG views", "EviReform propositions", "CARA graph"]
    views = [s for s in cost["stages"] if s["retriever"] == "MEGRAG views"]
    assert a7.loc["MEGRAG views", "build CPU s"] == round(sum(s["cpu_s"] for s in views), 2) and len(views) == 2
    full = json.loads((root / "runs" / "2wiki100-evireform-parser-full" / "summary.json").read_text())
    assert a7.loc["EviReform propositions", ["LLM calls/q", "tokens/q"]].tolist() == [full["llm_calls"], full["tokens"]]
    b2 = pd.read_csv(out / "tables" / "evireform_table_b2.csv")
    ircot = b2[(b2["dataset"] == "2wikimultihopqa") & (b2["method"] == "ircot")].iloc[0]
    rows = [r for r in read_predictions(root / "runs" / ircot["run"] / "predictions.jsonl") if not r.get("failed")]
    assert ircot["F1"] == round(100 * float(np.mean([r["f1"] for r in rows])), 2) and ircot["n"] == len(rows)
    ev = b2[b2["method"] == "evireform"]["run"]
    assert ev.str.startswith("not run").all() and ev.str.contains("read=False").all() and ev.str.contains("--set read=true").all()
    assert b2[b2["method"].str.startswith("paper")]["F1"].tolist() == [4.06, 1.77]
    c5 = pd.read_csv(out / "tables" / "evireform_table_c5.csv").set_index("setting")
    mf = json.loads((root / "runs" / "2wiki100-evireform-parser-full" / "run.json").read_text())
    assert c5.loc["k_r", "ours: 2wikimultihopqa"] == str(mf["params"]["k_r"]) and c5.loc["alpha", "paper (its text)"] == "0.5"
    c1 = pd.read_csv(out / "tables" / "evireform_table_c1.csv").set_index("setting")
    assert c1.loc["embedding model", "ours: musique"].startswith("minilm (all-MiniLM-L6-v2@")
    c6 = pd.read_csv(out / "tables" / "evireform_table_c6.csv")
    assert len(c6) == 16 and set(c6["variant"]) >= {"full", "no_reformulation", "repeat_question", "dense", "bm25"}
    c8 = pd.read_csv(out / "tables" / "evireform_table_c8_c10.csv")
    assert c8["passages"].tolist() == [cost["passages"], 6119, 9811, 11656, 1131]
    for t in ("c2", "c3", "c4", "c7"): assert (out / "tables" / f"evireform_table_{t}.md").read_text().startswith("EviReform Table C.")


def _tree(root: Path) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_failing_notebook_never_replaces_the_outputs_it_would_have_rewritten(done):
    out, _ = done
    before = _tree(out)
    with pytest.raises(ExperimentError, match=r"megrag_tables failed: ConfigError.*\.stage-megrag_tables.*committed outputs in .* are unchanged"):
        reproduce("demo", only=["megrag_tables"], params={**FAKE, "megrag": {"budgte": 2}}, out=out, progress=False)
    after = {k: v for k, v in _tree(out).items() if not str(k).startswith(".stage-")}
    assert after == before                                   # the executed notebook, tables and record of the last success
    assert (out / ".stage-megrag_tables" / "notebooks" / "50_megrag_tables.ipynb").exists()   # the failing copy, to read


def test_a_dry_run_counts_the_runs_to_answer_and_changes_no_file(done):
    out, _ = done
    before = _tree(out)
    d = reproduce("demo", only=["megrag_tables"], params=FAKE, out=out, progress=False, dry_run=True)
    runs = d["megrag_tables"]["runs"]
    assert len(runs) >= 5 and d["megrag_tables"]["to_answer"] == 0 and all(r["to_answer"] == 0 for r in runs)
    assert _tree(out) == before                               # nothing answered, nothing rewritten
    gone = Path(runs[0]["folder"]); shutil.move(gone, out / "moved-away")
    try:
        d = reproduce("demo", only=["megrag_tables"], params=FAKE, out=out, progress=False, dry_run=True)
        missing = [r for r in d["megrag_tables"]["runs"] if r["to_answer"]]
        assert [r["folder"] for r in missing] == [str(gone)] and missing[0]["to_answer"] == missing[0]["questions"] == 3
        assert not gone.exists()                              # a dry run answers nothing
    finally: shutil.move(out / "moved-away", gone)
    fresh = out.parent / "never-made"                         # a dry run into a new folder makes no folder
    d = reproduce("demo", only=["megrag_tables"], params=FAKE, out=fresh, progress=False, dry_run=True)
    assert d["megrag_tables"]["to_answer"] == len(d["megrag_tables"]["runs"]) >= 1 and not fresh.exists()   # a lower bound:
    assert d["megrag_tables"]["stopped"]                      # a table cell needed the first missing run's rows
    d = reproduce("demo", only=["evireform_tables"], params=FAKE, out=fresh, progress=False, dry_run=True)
    assert d["evireform_tables"]["to_answer"] >= 1 and not fresh.exists()     # its growth runs' store: in the stage


def _invalid(output: str) -> str:
    """The message of a command line's `Invalid value:` error box without its box and without any whitespace (the box
    wraps a long path anywhere); compare it with `_squash` of the expected text."""
    box = [l.strip("│ ").strip() for l in output.splitlines() if l.startswith("│")]
    return _squash(" ".join(box).split("Invalid value: ", 1)[1])


def _squash(text: str) -> str: return "".join(text.split())


def _scripted_reply(body: dict) -> str:
    "The stub server's reply to a chat request: what the scripted stand-in `ScriptedPolicy` answers to its messages."
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    return ScriptedPolicy()._one(body["messages"], schema)


def test_the_paper_profile_runs_every_notebook_with_a_served_model(stub_server, tmp_path, monkeypatch):
    """One command runs the paper profile with a served model (here the local stub server, answering as the scripted
    stand-in, at sizes small enough for the fast tier; the datasets `demo`): every notebook's runs name the served
    model in their manifests and records, the server saw their requests, each with the `--llm-option` extra_body;
    MEGRAG's distilled rows ran with the served LoRA module `student`; EviReform's main tables, whose committed runs
    were made with SmolLM2, were answered anew with the served model."""
    import pandas as pd
    monkeypatch.setenv("MEGRAG_KIT_CACHE", str(tmp_path / "cache"))           # the LLM call cache: this test's own
    srv = stub_server
    srv.respond, srv.models = _scripted_reply, {"served", "student"}            # another model name: vLLM's 404
    llm, student = f"openai:{srv.url}#served", f"openai:{srv.url}#student"
    kwargs = {"chat_template_kwargs": {"enable_thinking": False}}
    small = dict(dataset="demo", table2_dataset="demo", table_datasets=["demo"], growth_dataset="demo",
                 budgets=[1], megrag={"budget": 2}, limit_rounds=1, rounds_settings=[2], limit_sweep=1,
                 sweeps={"alpha": [0.25]}, growth_questions=10, limit_growth=1, growth_variants=["full"],
                 cara={"agents": 1, "t_max": 2}, variants=["full", "global_search"], answer_variants=["full"],
                 answer_options={"read": True}, sweep_agents=[1], sweep_t_max=[1], sweep_options={"read": True})
    out = tmp_path / "paper"
    args = ["reproduce", "--profile", "paper", "--llm", llm, "--llm-option", f"extra_body={json.dumps(kwargs)}", "--embedder",
            "py:megrag_kit.testing:HashEmbedder", "--student", student, "--limit", "2", "--out", str(out), *[a for k, v in small.items() for a in ("--param", f"{k}={json.dumps(v)}")]]
    r = CliRunner().invoke(app, [*args, "--check"])                  # the served student is accepted; nothing is asked
    assert r.exit_code == 0 and all(f"\n{n}: parameters valid" in r.output for n in EXPERIMENTS), r.output
    assert srv.requests == [] and not out.exists()
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    chats = [b for p, b in srv.requests if p.endswith("/chat/completions")]
    assert {b["model"] for b in chats} == {"served", "student"} and len(chats) > 100
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in chats)     # the option reached every request
    made = {}
    for n in EXPERIMENTS:
        rec = json.loads((out / "results" / f"{n}.json").read_text())
        assert rec["params"]["llm"] == llm and rec["params"]["llm_options"] == {"extra_body": kwargs}, n
        assert rec["models"] and all(m["llm"].startswith(f"openai:{srv.url}#") for m in rec["models"].values()), n
        made[n] = [x for x in rec["runs"] if "summary" in x]                       # the runs answered here (not read)
        assert made[n] and {x["llm"] for x in made[n]} <= {llm, student}, n
        for x in made[n]:
            mf = json.loads((Path(x["folder"]) / "run.json").read_text())
            assert mf["llm"] == x["llm"] and mf["llm_options"] == {"extra_body": kwargs} and mf["dataset"] == "demo", x
            assert mf["models"]["llm"].startswith(f"openai:{srv.url}#{x['llm'].split('#')[1]}+"), mf["models"]
    assert {x["llm"] for x in made["megrag_tables"]} == {llm, student}                   # the distilled rows: the student
    t1 = pd.read_csv(out / "tables" / "megrag_table1.csv").set_index("run")
    assert t1.loc["megrag (distilled)", "n"] == 2 and not any("not run" in i for i in t1.index)
    t3 = pd.read_csv(out / "tables" / "megrag_table3.csv").set_index("run")
    assert t3.loc[["full (distilled)", "no_sft"], "n"].tolist() == [2, 2]
    no_sft = {x["folder"]: x for x in made["megrag_tables"] if x["llm"] == llm and x["params"].get("shots") == 0}
    assert [x["summary"]["n"] for x in no_sft.values()] == [2]       # w/o SFT: the served base with the student's procedure
    assert {x["params"].get("policy") for x in made["megrag_tables"] if x["method"] == "megrag"} == {"single"}   # Eq. 6
    # EviReform: the nine committed runs of its main tables were made with SmolLM2: answered here, on demo, with the served model
    runs52 = json.loads((out / "results" / "evireform_tables.json").read_text())["runs"]
    assert not [x for x in runs52 if "summary" not in x]                     # nothing read from the committed runs
    ta = pd.read_csv(out / "tables" / "evireform_runs.csv")
    assert ta["n"].tolist() == [2] * 9 and (out / "tables" / "evireform_runs.md").read_text().startswith(
        f"Answered here on demo with {llm} / py:megrag_kit.testing:HashEmbedder")
    assert set(ta["dataset"]) == {"demo"}                                     # 2Wiki's settings, answered once on demo
    variants = {json.loads((out / "runs" / n / "run.json").read_text())["params"].get("variant") for n in ta["run"]}
    assert variants - {None} == {"full", "dense", "bm25", "no_reformulation", "no_propagation",
                                 "no_reformulation_no_propagation", "residual_only", "repeat_question"}
    # no table shows a committed run made with other models (SmolLM2, its student, llama.cpp) as this reproduction's
    assert all(not [x for x in json.loads((out / "results" / f"{n}.json").read_text())["runs"] if "summary" not in x]
               for n in EXPERIMENTS)                                          # every run recorded was answered here
    tg = pd.read_csv(out / "tables" / "megrag_gold_bound.csv")
    assert len(tg) == 12 and "F1" not in tg and tg["folder"].str.startswith("not read: made with smollm2-135m").all()
    assert tg.set_index("run").loc["megrag (single, distilled student)", "folder"].iloc[0].startswith(
        "not read: made with smollm2-135m+lora:runs/distill/student-v2 / minilm, not with this reproduction's "
        f"{llm} / py:megrag_kit.testing:HashEmbedder")
    tf = pd.read_csv(out / "tables" / "megrag_flashrag.csv")
    assert len(tf) == 4 and tf["n"].isna().all() and tf["run"].str.startswith("not read: made with smollm2-135m").all()
    tw = pd.read_csv(out / "tables" / "megrag_2wiki100.csv")
    assert len(tw) == 4 and tw["F1"].str.startswith("not read: made with smollm2-135m").all() and "EM" not in tw
    for t in ("evireform_headline", "evireform_headline_paired", "cara_headline", "cara_headline_paired"):
        assert not (out / "tables" / f"{t}.md").exists(), t                  # every headline run: other models
    nb53 = json.loads((out / "notebooks" / EXPERIMENTS["cara_tables"]).read_text())
    assert "headline: left out 2wiki10-cara-full-t5: not read: made with smollm2-135m" in json.dumps(nb53)


def test_not_read_matches_committed_runs_by_model_identity(tmp_path):
    """`Experiment.not_read`: with the kit's shipped models every committed run is read (the demo profile, unchanged);
    with other models only a run made with the same models (by identity, not by spec), and a run recording no model
    is not read."""
    from megrag_kit.reproduce import Experiment
    base = dict(dataset="demo", limit=1, device="cpu", seed=0, out=str(tmp_path), batch_size=1)
    smol = {"llm": "smollm2-135m", "embedder": "minilm",
            "models": {"llm": "smollm2-135m-instruct-q4_1@c413acb553cb", "embedder": "all-MiniLM-L6-v2@09340cb32251"}}
    shipped = Experiment("x", {**base, "llm": "smollm2-135m", "embedder": "minilm"})
    assert shipped.not_read(smol) == shipped.not_read({"llm": "qwen@llamacpp", "models": {"llm": "q@1"}}) == ""
    assert shipped._res == {}                                                 # nothing loaded to decide
    mine = Experiment("y", {**base, "llm": "py:megrag_kit.testing:ScriptedPolicy",
                            "embedder": "py:megrag_kit.testing:HashEmbedder"})
    assert mine.not_read(smol) == ("not read: made with smollm2-135m / minilm, not with this reproduction's "
                                   "py:megrag_kit.testing:ScriptedPolicy / py:megrag_kit.testing:HashEmbedder")
    res = mine.resources("demo")
    same = {"llm": "py:megrag_kit.testing:ScriptedPolicy", "embedder": "elsewhere:spelled-otherwise",
            "models": {"llm": res.llm.model_id, "embedder": res.embedder.model_id}}
    assert mine.not_read(same) == ""                                           # the same identities: read
    assert mine.not_read({**same, "models": {"embedder": "all-MiniLM-L6-v2@09340cb32251"}}) == (
        "not read: made with py:megrag_kit.testing:ScriptedPolicy (no identity recorded) / elsewhere:spelled-otherwise, not with "
        "this reproduction's py:megrag_kit.testing:ScriptedPolicy / py:megrag_kit.testing:HashEmbedder")      # an LLM it did not load: not known
    assert mine.not_read({"embedder": "x", "models": {"embedder": res.embedder.model_id}}) == ""   # names no LLM
    assert mine.not_read({"method": "direct"}) == "not read: its models are not recorded"
    assert mine.not_read(smol, "always") == ""
    with pytest.raises(ValueError, match="read_committed must be same_models or always, got 'sometimes'"):
        mine.not_read(smol, "sometimes")


