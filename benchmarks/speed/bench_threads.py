"""CPU threads of the kit (torch, faiss, tokenizers; `megrag-kit --threads N`), idle and with another CPU-bound job.

    python benchmarks/speed/bench_threads.py [--threads 1,2] [--burners 2] [--questions 20] [--passages 500] [--out benchmarks/results/threads.md]

Two short fixed jobs, each in a fresh process so its thread setting is the only one it ever had:

- `megrag-kit --threads N run native_rag --dataset demo --limit 20 --no-cache --device cpu` (wall time of the whole
  command, process start included; a throw-away run first builds the demo index so every timed run reads it);
- embedding the first `--passages` passages of 2WikiMultiHopQA with all-MiniLM-L6-v2 (`set_threads(N)`, then
  `encode`, batch 64, after a warm-up batch; time of the encode only).

Each at every thread count, first "idle" (nothing started by this script; the machine's other jobs are whatever
they are, the load average before each measurement is printed), then "contended": the script starts `--burners`
python busy loops (one core each, the stand-in for another job on the machine), measures again, and kills them.
Nothing here asserts a time."""
import argparse, os, subprocess, sys, tempfile, time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINES: list[str] = []


def say(s=""):
    print(s, flush=True); LINES.append(s)


def env_for(n):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for v in ("MEGRAG_KIT_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM"): env.pop(v, None)
    return env


def run_native(n, q, tmp):
    out = Path(tmp) / f"native-{n}-{time.time_ns()}"
    cmd = [sys.executable, "-c", "from megrag_kit.cli import main; main()", "--threads", str(n), "run", "native_rag", "--dataset", "demo", "--limit", str(q),
           "--no-cache", "--device", "cpu", "--out", str(out)]
    t = time.perf_counter(); p = subprocess.run(cmd, env=env_for(n), capture_output=True, text=True); dt = time.perf_counter() - t
    if p.returncode: raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    import json
    th = json.loads((out / "run.json").read_text())["invocations"][-1]["threads"]
    assert th["torch"] == n, th
    return dt


EMBED = """
import sys, time
from megrag_kit.core import set_threads
set_threads(int(sys.argv[1]))
from megrag_kit.data import load_dataset
from megrag_kit.models import load_embedder
texts = [p.content for p in load_dataset("2wikimultihopqa").corpus[:int(sys.argv[2])]]
emb = load_embedder("minilm", "cpu"); emb.encode(texts[:64], batch_size=64)
import torch; assert torch.get_num_threads() == int(sys.argv[1])
t = time.perf_counter(); emb.encode(texts, batch_size=64); print(time.perf_counter() - t)
"""


def run_embed(n, k):
    p = subprocess.run([sys.executable, "-c", EMBED, str(n), str(k)], env=env_for(n), capture_output=True, text=True)
    if p.returncode: raise SystemExit(f"embedding job failed:\n{p.stderr[-2000:]}")
    return float(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2"); ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--questions", type=int, default=20); ap.add_argument("--passages", type=int, default=500)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    counts = [int(x) for x in a.threads.split(",")]
    say("# Threads: idle vs contended\n")
    say(f"started {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, cores={os.cpu_count()}, load average (1/5/15 min) "
        f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}; contended = {a.burners} python busy loop(s) started by this script\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        say("warm-up: a native_rag run that builds the demo index (not timed)")
        run_native(counts[-1], 2, tmp)
        for mode in ("idle", "contended"):
            burners = []
            if mode == "contended":
                burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.burners)]
                time.sleep(3)
            try:
                for n in counts:
                    la = os.getloadavg()[0]; t_native = run_native(n, a.questions, tmp)
                    la2 = os.getloadavg()[0]; t_emb = run_embed(n, a.passages)
                    rows.append(dict(mode=mode, n=n, native=t_native, emb=t_emb, la=la, la2=la2))
                    say(f"{mode:9s} threads={n}: native_rag {a.questions} q {t_native:6.1f} s (load {la:.2f}); "
                        f"embed {a.passages} passages {t_emb:6.1f} s = {a.passages / t_emb:6.1f} passages/s (load {la2:.2f})")
                    if a.out: Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text("\n".join(LINES) + "\n")   # a cut run keeps its lines
            finally:
                for b in burners: b.kill(); b.wait()
            if burners: time.sleep(3)
    base = {r["n"]: r for r in rows if r["mode"] == "idle"}
    say(f"\n| machine | threads | native_rag, {a.questions} demo q, s (process start incl.) | q/min | slow-down vs idle | "
        f"embed {a.passages} passages, s | passages/s | slow-down vs idle | load avg before (native / embed) |")
    say("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        b = base[r["n"]]
        say(f"| {r['mode']} | {r['n']} | {r['native']:.1f} | {60 * a.questions / r['native']:.1f} | {r['native'] / b['native']:.2f}x | "
            f"{r['emb']:.1f} | {a.passages / r['emb']:.1f} | {r['emb'] / b['emb']:.2f}x | {r['la']:.2f} / {r['la2']:.2f} |")
    say(f"\nfinished {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.out: Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text("\n".join(LINES) + "\n")


if __name__ == "__main__": main()
