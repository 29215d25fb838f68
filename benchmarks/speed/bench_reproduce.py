"""Time `megrag-kit reproduce --profile demo` from a fresh clone with a fresh cache (the README's first command).

    python benchmarks/speed/bench_reproduce.py [--profile demo] [--nice 10] [--keep DIR] [--no-committed]
        [--out benchmarks/results/reproduce.md]

Clones this checkout's HEAD into a temporary folder, points `MEGRAG_KIT_CACHE` at an empty folder (so the LLM call
cache, passage vectors and OpenIE triples are all built), runs the command there (niced when `--nice` > 0), and
prints the wall time, the CPU time of the command and its children (load-independent), and the load average before
and after, since on a shared machine the wall time says more about the neighbours than about the demo. A second run
in the same clone and cache is timed too (everything reused: only kernels start and figures are redrawn).
`--no-committed` deletes the clone's committed `runs/reproduce-<profile>/` first, so that every run is answered again
(a fresh clone would otherwise reuse the committed run folders). With `--out F.md` the lines printed and a table of
both runs (UTC time, wall and CPU seconds, load average before and after, the commit timed) are written to `F.md`."""
import shutil
import argparse, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_floor import now, publish, say  # noqa: E402  the same output as the other speed benchmarks


def timed(cmd, env, cwd) -> dict:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); la0 = os.getloadavg()[0]; t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dict(rc=p.returncode, wall_s=round(time.perf_counter() - t0, 1), cpu_s=round(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, 1),
                load_before=round(la0, 2), load_after=round(os.getloadavg()[0], 2))


def by_method(folder: Path) -> list[str]:
    """Table lines: per method, the runs in `folder` (a reproduction's `runs/`), their questions and the seconds they
    spent answering (each run's `summary.json`: `index_build.answering_s`, model calls and retrieval without the
    index build or the kernel's start; a run that records none, its questions times their mean latency, which a batch
    counts once per question, so an upper bound), with the share of the total."""
    import json
    acc = {}
    for f in sorted(folder.glob("*/summary.json")):
        s, m = json.loads(f.read_text()), json.loads((f.parent / "run.json").read_text())["method"]
        r = acc.setdefault(m, [0, 0, 0.0]); r[0] += 1; r[1] += s.get("n", 0)
        r[2] += (s.get("index_build") or {}).get("answering_s", s.get("n", 0) * (s.get("latency_s") or 0.0))
    total = sum(r[2] for r in acc.values()) or 1.0
    return (["", "Answering seconds of the first run's runs, by method (each run's `summary.json`; CARA, direct and "
             "oracle: questions x mean latency, an upper bound):", "",
             "| method | runs | questions | answering s | share |", "|---|---|---|---|---|"]
            + [f"| {m} | {r[0]} | {r[1]} | {r[2]:.1f} | {100 * r[2] / total:.0f}% |"
               for m, r in sorted(acc.items(), key=lambda kv: -kv[1][2])]
            + [f"| all | {sum(r[0] for r in acc.values())} | {sum(r[1] for r in acc.values())} | {total:.1f} | |"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="demo"); ap.add_argument("--nice", type=int, default=10); ap.add_argument("--keep", type=Path)
    ap.add_argument("--no-committed", action="store_true", help="delete the clone's committed runs/reproduce-PROFILE first")
    ap.add_argument("--out", default=None, help="write the lines and a table of both runs to this Markdown file")
    a = ap.parse_args()
    repo = Path(__file__).resolve().parents[2]
    work = a.keep or Path(tempfile.mkdtemp(prefix="reproduce-bench-"))
    clone, cache = work / "clone", work / "cache"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    if a.no_committed: shutil.rmtree(clone / "runs" / f"reproduce-{a.profile}", ignore_errors=True)
    env = {**os.environ, "MEGRAG_KIT_CACHE": str(cache), "PYTHONPATH": str(clone)}
    cmd = (["nice", "-n", str(a.nice)] if a.nice > 0 else []) + [sys.executable, "-c",
           "import sys; sys.argv = ['megrag-kit', 'reproduce', '--profile', %r]; from megrag_kit.cli import main; main()" % a.profile]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    say(f"# megrag-kit reproduce --profile {a.profile} from a fresh clone\n")
    say(f"started {now()}; commit {commit}; " + ("committed run folders deleted first (--no-committed), so every run is "
        "answered again" if a.no_committed else "the committed run folders reused") + f"; nice {a.nice}; cores {os.cpu_count()}")
    first = timed(cmd, env, clone); first["measured"] = now()
    say(f"first run (fresh clone, empty cache): {first}")
    table = by_method(clone / "runs" / f"reproduce-{a.profile}" / "runs")
    second = timed(cmd, env, clone); second["measured"] = now()
    say(f"second run (same clone and cache):    {second}")
    say(f"outputs: {clone / 'runs' / f'reproduce-{a.profile}'}")
    rows = [("fresh clone, empty cache", first), ("again, same clone and cache", second)]
    publish(a.out, ["| run | exit | wall s | CPU s | load before | load after | measured |", "|---|---|---|---|---|---|---|"]
            + [f"| {n} | {r['rc']} | {r['wall_s']} | {r['cpu_s']} | {r['load_before']} | {r['load_after']} | {r['measured']} |"
               for n, r in rows] + table)


if __name__ == "__main__": main()
