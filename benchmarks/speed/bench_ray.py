"""Wall time of a grid of runs single-process vs on a local Ray instance, and of parser OpenIE over the demo corpus.

    python benchmarks/speed/bench_ray.py [--questions 20] [--methods native_rag,direct] [--workers 2] [--md benchmarks/results/ray.md]

The grid: each method on the first N demo questions, seed 0, offline SmolLM2-135M and MiniLM on CPU, LLM call cache
off (every answer generated anew). Single-process: one process runs the cells one after another, each with its own
`Resources` (what `megrag-kit run` does for each, without the process start). Ray: `run_grid_on_ray` with `--workers`
workers (one CPU and one torch thread each), timed with the instance already started; its start-up is printed
apart. The demo store's dense index is built before timing, in a fresh temporary cache. Both paths must give the
same predictions (checked and printed). The 1-minute load average is printed before and after each phase, since
other jobs on the machine change every figure. No test asserts these times."""
import argparse, json, os, sys, tempfile, time
from pathlib import Path


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--methods", default="native_rag,direct")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--md", default=None, help="also write the table to this Markdown file")
    a = ap.parse_args()
    os.environ["MEGRAG_KIT_CACHE"] = tempfile.mkdtemp(prefix="bench_ray_cache")      # before Ray starts: the workers inherit it
    import ray
    from megrag_kit.core import set_seed
    from megrag_kit.data import load_dataset
    from megrag_kit.index import EvidenceStore
    from megrag_kit.method import Resources, build_method
    from megrag_kit.runner import read_predictions, run
    from megrag_kit.index import StoreOptions
    from megrag_kit.models import ModelOptions
    from megrag_kit.scale import extract_on_ray, run_grid_on_ray
    from megrag_kit.models import load_embedder

    ds, methods, out = load_dataset("demo"), a.methods.split(","), Path(tempfile.mkdtemp(prefix="bench_ray_runs"))
    EvidenceStore(ds, load_embedder("minilm", "cpu"), show_progress=False).dense.build()   # untimed: both paths reuse it
    rows = []

    la0 = loadavg(); t = time.perf_counter()
    for m in methods:                                   # each cell as `megrag-kit run` builds it (models loaded per cell)
        res = Resources(ds, "smollm2-135m", "minilm", device="cpu", cache=False)
        set_seed(0)
        run(build_method(m, {}, res), ds, out / "single" / m, limit=a.questions, batch_size=8, seed=0, show_progress=False,
            manifest=dict(device="cpu", chunking="truncate", openie_backend="llm", llm_options={}))
    single_s = time.perf_counter() - t
    rows.append((f"grid {len(methods)} methods x {a.questions} q, single process", single_s, la0, loadavg()))

    la0 = loadavg(); t = time.perf_counter()
    ray.init(num_cpus=a.workers, include_dashboard=False, object_store_memory=256 << 20, log_to_driver=False)
    start_s = time.perf_counter() - t
    rows.append((f"Ray start-up, local instance, {a.workers} CPUs", start_s, la0, loadavg()))
    la0 = loadavg(); t = time.perf_counter()
    cells = run_grid_on_ray(methods, ["demo"], [0], out / "grid", limit=a.questions,
                            models=ModelOptions(device="cpu", cache=False),
                            workers=a.workers, show_progress=False)
    ray_s = time.perf_counter() - t
    rows.append((f"grid {len(methods)} methods x {a.questions} q, Ray {a.workers} workers", ray_s, la0, loadavg()))
    bad = [c for c in cells if c["state"] != "done"]
    if bad: sys.exit(f"cells failed: {bad}")
    same = []
    for c in cells:
        pa = read_predictions(out / "single" / c["method"] / "predictions.jsonl")
        pb = read_predictions(c["out"] / "predictions.jsonl")
        same.append(sum(x["prediction"] == y["prediction"] and x["retrieved"] == y["retrieved"] for x, y in zip(pa, pb)))

    la0 = loadavg(); t = time.perf_counter()
    EvidenceStore(ds, root=out / "single_store", openie="eager", openie_backend="parser", show_progress=False).build(["triple"])
    rows.append((f"parser OpenIE, {len(ds.corpus)} demo passages, single process (spaCy load included)", time.perf_counter() - t, la0, loadavg()))
    la0 = loadavg(); t = time.perf_counter()
    extract_on_ray(ds, "triple", ModelOptions(llm=None, embedder=None, device="cpu"),
                   StoreOptions(openie_backend="parser", root=out / "ray_store"), workers=a.workers, chunk=64,
                   show_progress=False)
    rows.append((f"parser OpenIE, {len(ds.corpus)} demo passages, Ray {a.workers} workers (spaCy load included)", time.perf_counter() - t, la0, loadavg()))
    same_units = sorted((out / "single_store" / "triples").glob("*.jsonl"))[0].read_text().splitlines()
    ray_units = sorted((out / "ray_store" / "triples").glob("*.jsonl"))[0].read_text().splitlines()
    ray.shutdown()

    lines = ["| what | wall s | load avg before (1/5/15 min) | after |", "|---|---|---|---|"]
    lines += [f"| {w} | {s:.1f} | {b} | {e} |" for w, s, b, e in rows]
    lines += ["", f"speed-up of the grid on Ray: {single_s / ray_s:.2f}x (start-up apart), {single_s / (ray_s + start_s):.2f}x (start-up included)",
              "same predictions and retrieved passages: " + ", ".join(f"{c['method']} {n}/{a.questions}" for c, n in zip(cells, same)),
              f"same parser triple records: {sorted(same_units) == sorted(ray_units)} ({len(ray_units)} passages)",
              f"cpus: {os.cpu_count()}; python {sys.version.split()[0]}; ray {ray.__version__}"]
    print("\n".join(lines))
    if a.md: Path(a.md).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
