"""The speed and scale benchmarks in one runner: each a script of this folder measuring its configurations side by
side, writing its file under benchmarks/results/ (and printing it). Run it on an otherwise idle machine; each file
records the load average of its measurements. Tests never assert a time.

    python benchmarks/speed/run.py                      # the suite of benchmarks/README.md "Speed and scale"
    python benchmarks/speed/run.py generation embedding # some of them, by name
    python benchmarks/speed/run.py --list               # every benchmark with its command
    python benchmarks/speed/run.py --dry-run faults     # print the commands, run nothing

The experiments (method runs, their tables) are not here: they are declared in experiments/*.toml and run by
`megrag-kit experiment run FILE`.
"""
import argparse, os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
R = "benchmarks/results"
S = "benchmarks/speed"

# name: (environment, arguments after `python`, in the suite), the commands of each results file's first line
BENCHMARKS = {
    "generation": ({"OMP_NUM_THREADS": "2"}, [f"{S}/bench_generation.py", "--out", f"{R}/generation.md"], True),
    "embedding": ({"OMP_NUM_THREADS": "2"}, [f"{S}/bench_embedding.py", "--passages", "1000", "--out", f"{R}/embedding.md"], True),
    "threads": ({}, [f"{S}/bench_threads.py", "--threads", "1,2", "--burners", "2", "--questions", "10", "--passages", "200",
                     "--out", f"{R}/threads.md"], True),
    "methods": ({}, [f"{S}/bench_methods.py", "--questions", "4", "--batch", "4", "--threads", "2", "--out", f"{R}/methods.md"], True),
    "scale": ({}, [f"{S}/bench_scale.py", "--sizes", "1000,10000,100000", "--embedder", "hash", "--threads", "1"], True),
    "parser": ({"OMP_NUM_THREADS": "1"}, [f"{S}/bench_openie_parser.py", "--out", f"{R}/openie_parser.md"], True),
    "ray": ({}, [f"{S}/bench_ray.py", "--questions", "20", "--methods", "native_rag,direct", "--workers", "2",
                 "--md", f"{R}/ray.md"], True),
    "llamacpp": ({}, [f"{S}/bench_llamacpp_schema.py", "--out", f"{R}/llamacpp_schema.md"], True),
    # outside the suite: each run by name
    "foundation": ({}, [f"{S}/bench_foundation.py"], False),
    "megrag": ({}, [f"{S}/bench_megrag.py"], False),
    "bf16": ({"OMP_NUM_THREADS": "1"}, [f"{S}/bench_bf16.py", "--timed", "2", "--agree", "8", "--passages", "256",
                                         "--out", f"{R}/bf16.md"], False),
    "chunking": ({"OMP_NUM_THREADS": "1"}, [f"{S}/bench_chunking.py", "--out", f"{R}/chunking.md"], False),
    "kg": ({}, [f"{S}/bench_kg.py", "--nodes", "200000", "--edges", "2000000"], False),
    "first_runs": ({}, [f"{S}/bench_first_runs.py", "--out", f"{R}/first_runs.md"], False),
    "faults": ({}, [f"{S}/bench_faults.py", "--limit", "30", "--out", f"{R}/faults.md"], False),
    "reproduce": ({}, [f"{S}/bench_reproduce.py", "--profile", "demo", "--no-committed", "--nice", "0",
                   "--out", f"{R}/reproduce.md"], False),
    "retriever_cost": ({"OMP_NUM_THREADS": "1"}, [f"{S}/bench_retriever_cost.py", "--dataset", "demo",
                                                   "--out", f"{R}/retriever_cost.json"], False),
    "floor": ({}, [f"{S}/bench_floor.py", "--questions", "4", "--out", f"{R}/floor.md"], False),
    "floor_batch": ({}, [f"{S}/bench_floor.py", "--questions", "8", "--batch", "1,8",
                         "--out", f"{R}/floor-batch.md"], False),
    "floor_batch16": ({}, [f"{S}/bench_floor.py", "--questions", "16", "--batch", "16",
                           "--out", f"{R}/floor-batch16.md"], False),
    "floor_batch8": ({}, [f"{S}/bench_floor.py", "--questions", "8", "--batch", "8", "--out", f"{R}/floor-batch8.md"],
                     False),
    "floor_batch_modules": ({}, [f"{S}/bench_floor.py", "--questions", "8", "--batch", "8", "--module-tree",
                                 "--out", f"{R}/floor-batch-modules.md"], False),
    "floor_batch16_modules": ({}, [f"{S}/bench_floor.py", "--questions", "16", "--batch", "16", "--module-tree",
                                   "--out", f"{R}/floor-batch16-modules.md"], False),
    "floor_ct2": ({}, [f"{S}/bench_floor.py", "--questions", "4", "--llm", "smollm2-135m@ct2",
                       "--out", f"{R}/floor-ct2.md"], False),
    "decode_step": ({}, [f"{S}/bench_decode_step.py", "--out", f"{R}/decode-step.md"], False),
    "index_floor": ({}, [f"{S}/bench_index_floor.py", "--corpus-order", "--out", f"{R}/index_floor.md"], False),
    "schema": ({}, [f"{S}/bench_schema.py", "--steps", "200", "--batch", "4", "--out", f"{R}/schema.md"], False),
    "engine": ({}, [f"{S}/bench_engine.py", "--questions", "4", "--batch", "4", "--threads", "2", "--repeats", "1",
                    "--out", f"{R}/engine.md"], False),
    "student": ({}, [f"{S}/bench_student.py", "--student", "runs/distill/student-v2", "--examples", "4",
                     "--out", f"{R}/student-inference.md"], False),
    "student_ct2": ({}, [f"{S}/bench_student.py", "--student", "runs/distill/student-v6-240",
                         "--backends", "hf,ct2,ct2-int8", "--out", f"{R}/student-inference-ct2.md"], False),
    "distill": ({}, [f"{S}/bench_distill.py", "--data", "runs/distill/gold-musique-train-parser.jsonl",
                     "--out", f"{R}/bench_distill.md"], False),
}


def command(name: str) -> tuple[dict, list[str]]:
    "The environment and argv of a benchmark (`KeyError` naming the known ones)."
    if name not in BENCHMARKS: raise KeyError(f"unknown benchmark {name!r}; one of {', '.join(BENCHMARKS)}")
    env, args, _ = BENCHMARKS[name]
    return env, [sys.executable, *args]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: the suite)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and their commands")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args(argv)
    if a.list:
        for n, (env, args, suite) in BENCHMARKS.items():
            print(f"{n:12s} {'suite' if suite else '     '}  " + " ".join([*(f"{k}={v}" for k, v in env.items()), "python", *args]))
        return 0
    names = a.names or [n for n, (_, _, suite) in BENCHMARKS.items() if suite]
    try: todo = [(n, *command(n)) for n in names]
    except KeyError as e: ap.error(str(e).strip('"'))
    for n, env, argv_ in todo:
        print(f"[{n}] " + " ".join([*(f"{k}={v}" for k, v in env.items()), *argv_[1:]]), flush=True)
        if a.dry_run: continue
        r = subprocess.run(argv_, cwd=ROOT, env={**os.environ, **env})
        if r.returncode: print(f"[{n}] failed with exit status {r.returncode}", file=sys.stderr); return r.returncode
    if not a.dry_run: print(f"speed benchmarks done: {R}")
    return 0


if __name__ == "__main__": sys.exit(main())
