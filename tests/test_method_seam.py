"""The method seam from outside the package: a newcomer's method in a module of their own, run by
`megrag-kit run py:module:Name`, gets the run banner, the call estimate, the index stage and the explorer view from
what the class declares, with no line of the kit naming it."""
import json, sys

from typer.testing import CliRunner
from megrag_kit.cli import app
from megrag_kit.method import METHODS, Resources, get_method
from megrag_kit.runner import estimate_calls, run_banner
from megrag_kit.viz import RunView, explore_html, steps

OUTSIDE = '''
"A method of a newcomer's own, outside the package."
from dataclasses import dataclass
from megrag_kit.method import Answer, Config, Method, param, view_node


class Hops(Method):
    "Follows `hops` searches from the question, each querying with the title of the passage before; answers the last."
    name = "outside_hops"

    @dataclass(frozen=True)
    class Config(Config):
        hops: int = param(2, "searches per question", min=1)

    fast_settings = "--set hops=1"
    index_views = ("passage",)

    def estimate_calls(self): return 3 * self.config.hops, f"{self.config.hops} hops x 3 imagined calls"
    def indexing_note(self): return "no indexing call at all"

    def answer(self, questions):
        store, llm = self.res.store, self.res.llm
        out = []
        for q in questions:
            query, hops = q.question, []
            for _ in range(self.config.hops):
                pid = store.search([query], 1)[0][0][0]
                query = store.passages[pid].title
                hops.append([pid, query])
            out.append(Answer(query, [p for p, _ in hops], trace={"hops": hops, "llm": llm.model_id}))
        return out

    @classmethod
    def view_nodes(cls, row, k=5):
        hops, last = row["trace"]["hops"], len(row["trace"]["hops"]) - 1
        return [view_node(i + 1, row["question"] if i == 0 else hops[i - 1][1], "hop", [(f"p{p}", title)],
                          relation="" if i == last else "title of", stop=i == last,
                          final=row["prediction"] if i == last else "")
                for i, (p, title) in enumerate(hops)]
'''


def _forget(module: str, cwd: str):
    "Drop the outside module, its registration and the working directory `py_attr` put on sys.path."
    sys.modules.pop(module, None); METHODS.pop("outside_hops", None)
    if cwd in sys.path: sys.path.remove(cwd)


def test_a_method_from_outside_the_package_gets_the_banner_the_estimate_and_the_explorer(tmp_path, monkeypatch):
    (tmp_path / "outside_methods.py").write_text(OUTSIDE)
    monkeypatch.chdir(tmp_path)                          # found in the working directory, as a console script runs
    monkeypatch.setenv("MEGRAG_KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "run"
    try:
        r = CliRunner().invoke(app, ["run", "py:outside_methods:Hops", "--dataset", "demo", "--limit", "3",
                                     "--set", "hops=2", "--llm", "py:megrag_kit.testing:ScriptedPolicy",
                                     "--embedder", "py:megrag_kit.testing:HashEmbedder", "--device", "cpu",
                                     "--out", str(out)])
        assert r.exit_code == 0, r.output
        # the banner: the declared estimate (3 x 2 hops per question), indexing note and fast settings
        assert ("outside_hops: 3 questions x up to 6 LLM calls (2 hops x 3 imagined calls); plus no indexing call "
                "at all = up to 18 calls; for a fast first run: --set hops=1 --limit 5") in r.output
        mf = json.loads((out / "run.json").read_text())
        assert (mf["method"], mf["method_spec"], mf["params"]) == ("outside_hops", "py:outside_methods:Hops", {"hops": 2})
        assert (mf["llm"], mf["embedder"], mf["models"]) == (
            "py:megrag_kit.testing:ScriptedPolicy", "py:megrag_kit.testing:HashEmbedder",
            {"llm": "scripted-policy", "embedder": "hash-bow-256"})
        s = json.loads((out / "summary.json").read_text())
        assert s["n"] == 3 and s["failed"] == 0 and s["index_build"]["views"] == ["passage"]   # its declared index
        rows = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
        assert [len(x["trace"]["hops"]) for x in rows] == [2, 2, 2] and rows[0]["trace"]["llm"] == "scripted-policy"

        # the estimate, through the runner, is the class's own under any config
        cls = get_method("py:outside_methods:Hops")
        m = cls(cls.Config(hops=5), Resources(None, None, None))
        assert estimate_calls(m) == (15, "5 hops x 3 imagined calls")
        assert run_banner(m, 2).startswith("outside_hops: 2 questions x up to 15 LLM calls")

        # the explorer, in a process that never imported the module: the run names its class (method_spec)
        _forget("outside_methods", str(tmp_path))
        view = RunView(out, dataset=[])
        assert view.method.__name__ == "Hops" and view.method.__module__ == "outside_methods"
        nodes = view.steps(0)
        assert [(n["step"], n["composition"], n["stop"]) for n in nodes] == [(1, "hop", False), (2, "hop", True)]
        assert nodes[1]["query"] == rows[0]["trace"]["hops"][0][1] and nodes[1]["final"] == rows[0]["prediction"]
        assert [n["composition"] for n in steps(rows[0])] == ["passages"]          # without its class: the base view
        page = explore_html(view)
        assert page.count('class="mkg-node"') == 6 and "r: title of" in page         # 3 questions x 2 hops
        assert page.count("[hop]") == 12                                  # each node in the graph and node by node
        r = CliRunner().invoke(app, ["explore", str(out)])
        assert r.exit_code == 0 and "3 questions of outside_hops" in r.output, r.output
        assert (out / "explorer.html").read_text().count('class="mkg-node"') == 6
    finally:
        _forget("outside_methods", str(tmp_path))


def test_an_outside_method_that_cannot_be_found_is_refused_before_anything_loads(tmp_path, monkeypatch):
    (tmp_path / "outside_methods.py").write_text(OUTSIDE)
    monkeypatch.chdir(tmp_path)
    try:
        for spec, want in (("py:outside_methods:Nope", "method 'py:outside_methods:Nope': cannot find 'Nope'"),
                           ("py:no_such_module_here:Hops", "cannot find 'Hops' in module 'no_such_module_here'"),
                           ("py:json:JSONDecoder", "is not a subclass of megrag_kit.method.Method")):
            r = CliRunner().invoke(app, ["run", spec, "--out", str(tmp_path / "run")])
            assert r.exit_code == 2 and want in " ".join(r.output.replace("│", " ").split()), (spec, r.output)
        assert not (tmp_path / "run").exists()
    finally:
        _forget("outside_methods", str(tmp_path))
