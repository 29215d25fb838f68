"""Run keys of the committed run folders survive the reader's parameter `reader_shots`: it defaults to 0 (no worked
example) and is left out of `to_dict()` at 7 (all seven, what every folder made before it existed read), so a run
asked for with `reader_shots=7` has those folders' parameters (whether it resumes one also depends on the models'
identities); the experiment files whose committed runs read all seven ask for 7, so each still names what its
folders hold."""
import json, subprocess
from pathlib import Path
import pytest
from megrag_kit.core import stable_hash
from megrag_kit.experiment import load_experiment
from megrag_kit.method import ConfigError, ReaderOptions, get_method

ROOT = Path(__file__).parent.parent
NATIVE_V2 = ROOT / "runs/distill/2wikimultihopqa-native_rag-v2/run.json"


def _committed_manifests() -> list[tuple[str, dict]]:
    "`(path, run.json)` of every run folder git tracks (a clone has them; a tarball without .git has none)."
    out = subprocess.run(["git", "ls-files", "runs/*run.json", "runs/**/run.json"], cwd=ROOT, capture_output=True,
                         text=True).stdout.split()
    return [(f, json.loads((ROOT / f).read_text())) for f in sorted(set(out))]


def test_seven_worked_examples_keep_the_key_of_the_committed_native_rag_run():
    if not NATIVE_V2.exists(): pytest.skip("no committed run folders here")
    params = json.loads(NATIVE_V2.read_text())["params"]
    assert "reader_shots" not in params
    seven = get_method("native_rag").Config(reader_shots=7)
    assert json.dumps(seven.to_dict()) == json.dumps(params)                    # byte-identical, in order
    assert stable_hash(["native_rag", seven.to_dict()]) == stable_hash(["native_rag", params])
    default = get_method("native_rag").Config().to_dict()
    assert default["reader_shots"] == 0 and stable_hash(default) != stable_hash(params)


def test_experiment_files_ask_for_what_their_committed_folders_read():
    """Each run of each experiment file whose folder is committed asks for that folder's value of every parameter its
    method records only when it differs from a fixed value (`Config.RECORDED_IF_NOT`: the reader's `reader_shots`,
    IRCoT's `cot_shots`; a folder that records none read that value)."""
    committed = {str(Path(f).parent): m for f, m in _committed_manifests()}
    if not committed: pytest.skip("no committed run folders here")
    checked = set()
    for f in sorted((ROOT / "experiments").glob("*.toml")):
        for r in load_experiment(f).runs:
            m = committed.get(str(Path(r["out"]).relative_to(ROOT) if Path(r["out"]).is_absolute() else r["out"]))
            cls = get_method(r["method"]).Config
            if m is None or not cls.RECORDED_IF_NOT: continue
            asked, recorded = cls.from_dict(r["params"]), cls.recorded(m["params"])
            for k in cls.RECORDED_IF_NOT:
                assert getattr(asked, k) == recorded[k], (f.name, r["name"], k)
                checked.add((f.name, r["name"], k))
    assert len(checked) > 100 and any(k == "cot_shots" for *_, k in checked), len(checked)


def test_reader_shots_reaches_the_reader_and_is_bounded():
    assert ReaderOptions.from_dict({"reader_shots": "2"}).reader(None).shots == 2
    assert ReaderOptions().reader(None).shots == 0
    with pytest.raises(ConfigError, match="reader_shots must be <= 7, got 8"): ReaderOptions(reader_shots=8)
