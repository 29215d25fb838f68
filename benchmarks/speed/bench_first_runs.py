"""A newcomer's first run of each method: `megrag-kit run METHOD --dataset demo --limit 5` with the settings that make
it short (each method's `fast_settings`), the offline models (SmolLM2-135M, MiniLM) on this machine, timed from the
command's start to its exit, with an empty call cache and evidence-store folder (the one-time conversion of
SmolLM2 to safetensors is shared with the usual cache, so it is not counted). Writes benchmarks/results/first_runs.md.

    python benchmarks/speed/bench_first_runs.py                 # every method, one after the other
    python benchmarks/speed/bench_first_runs.py --methods megrag,cara"""
from __future__ import annotations
import argparse, json, os, shlex, subprocess, sys, time
from pathlib import Path

from megrag_kit.core import busy_cores, cache_dir
from megrag_kit.method import get_method

METHODS = ("megrag", "cara", "evireform", "ircot", "iter_retgen", "native_rag", "direct", "oracle")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--root", default="/tmp/megrag-first-runs")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "first_runs.md"))
    a = ap.parse_args(argv)
    root = Path(a.root); root.mkdir(parents=True, exist_ok=True)
    rows = []
    for m in a.methods.split(","):
        cache = root / f"cache-{m}"
        (cache).mkdir(parents=True, exist_ok=True)
        for shared in ("models", "fingerprints"):          # the SmolLM2 conversion is a one-time step of the install
            if not (cache / shared).exists(): (cache / shared).symlink_to(cache_dir(shared))
        args = f"megrag-kit run {m} --dataset demo --limit {a.limit} {get_method(m).fast_settings}".split()
        out = root / f"run-{m}"
        if out.exists():
            import shutil; shutil.rmtree(out)
        busy = busy_cores(1.0)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", "from megrag_kit.cli import main; main()", *args[1:], "--out", str(out)],
                           env={**os.environ, "MEGRAG_KIT_CACHE": str(cache), "TQDM_DISABLE": "1"}, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        s = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        rows.append(dict(method=m, command=" ".join(args), exit=r.returncode, wall_s=round(wall, 1), busy=busy, n=s.get("n"),
                         f1=s.get("f1"), calls=s.get("llm_calls"), err=r.stderr.strip().splitlines()[-1] if r.returncode else ""))
        print(json.dumps(rows[-1]), flush=True)
        write(rows, a)                                     # after each method: a partial table survives a stop


def write(rows, a):
    lines = [f"First runs on the demo (`python benchmarks/speed/bench_first_runs.py`, {a.limit} questions, offline models on the CPU of "
             f"this machine, empty call cache). `busy` = cores other work kept busy when the run started (of "
             f"{os.cpu_count()}): on a shared machine the times are longer than on an idle one.", "",
             "| method | command | exit | wall s | busy cores | n | F1 | LLM calls / q |", "|---|---|--:|--:|--:|--:|--:|--:|"]
    for x in rows:
        lines.append(f"| {x['method']} | `{x['command']}` | {x['exit']} | {x['wall_s']} | {x['busy']} | {x['n']} | {x['f1']} | "
                     f"{x['calls']} |" + (f" {x['err']}" if x["err"] else ""))
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__": main()
