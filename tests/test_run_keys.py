"""Run keys of the committed run folders survive a new reader parameter: `reader_shots` at its default (all seven
worked examples, what every folder made before it read) is left out of `to_dict()`, so those folders resume."""
import json, subprocess
from pathlib import Path
import pytest
from megrag_kit.core import stable_hash
from megrag_kit.method import ConfigError, ReaderOptions, get_method

ROOT = Path(__file__).parent.parent
NATIVE_V2 = ROOT / "runs/distill/2wikimultihopqa-native_rag-v2/run.json"


def _committed_manifests() -> list[tuple[str, dict]]:
    "`(path, run.json)` of every run folder git tracks (a clone has them; a tarball without .git has none)."
    out = subprocess.run(["git", "ls-files", "runs/*run.json", "runs/**/run.json"], cwd=ROOT, capture_output=True,
                         text=True).stdout.split()
    return [(f, json.loads((ROOT / f).read_text())) for f in sorted(set(out))]


def test_default_reader_shots_keeps_the_key_of_the_committed_native_rag_run():
    if not NATIVE_V2.exists(): pytest.skip("no committed run folders here")
    params = json.loads(NATIVE_V2.read_text())["params"]
    cfg = get_method("native_rag").Config()
    assert cfg.reader_shots == 7 and "reader_shots" not in params
    assert json.dumps(cfg.to_dict()) == json.dumps(params)                      # byte-identical, in order
    assert stable_hash(["native_rag", cfg.to_dict()]) == stable_hash(["native_rag", params])
    two = get_method("native_rag").Config(reader_shots=2).to_dict()
    assert two["reader_shots"] == 2 and stable_hash(two) != stable_hash(params)


def test_no_committed_run_folder_gains_reader_shots_in_its_key():
    seen = 0
    for f, m in _committed_manifests():
        try: cls = get_method(m["method"])
        except KeyError: continue
        if not issubclass(cls.Config, ReaderOptions) or "reader_shots" in m["params"]: continue
        try: d = cls.Config.from_dict(m["params"]).to_dict()
        except ConfigError: continue                                   # a parameter the method no longer has
        assert "reader_shots" not in d, f
        seen += 1
    if seen == 0: pytest.skip("no committed run folders here")
    assert seen > 100                                                 # 227 folders of reader methods when written


def test_reader_shots_reaches_the_reader_and_is_bounded():
    assert ReaderOptions.from_dict({"reader_shots": "0"}).reader(None).shots == 0
    assert ReaderOptions().reader(None).shots == 7
    with pytest.raises(ConfigError, match="reader_shots must be <= 7, got 8"): ReaderOptions(reader_shots=8)
