"""Seconds per student call, and what the student says, under each backend: the distilled MEGRAG student
(`smollm2-135m+lora:PATH`) under transformers in fp32 and bf16, and under llama.cpp with the adapter applied at run
time (`smollm2-135m@llamacpp+lora:PATH`, the optional extra `megrag_kit[llamacpp]`), and under CTranslate2 with the
adapter merged (`smollm2-135m@ct2+lora:PATH`, float32 and int8 weights).

    OMP_NUM_THREADS=2 python benchmarks/speed/bench_student.py [--student runs/distill/student-v2] [--examples 8] \
        [--out benchmarks/results/student-inference.md]

The prompts are real student steps: the first `--examples` held-out validation examples (trajectory steps) of the default training data (each a
student prompt built exactly as at inference, with the step the gold teacher took as its target). Each backend
answers every prompt greedily, one call at a time, without a cache, after one warm-up call. A student step is one
call, so seconds per question is mean steps x seconds per call plus retrieval (the MEGRAG runs' `latency_s`).
Printed per backend: seconds per call (mean and median), completion tokens per second, the share of outputs that
parse as a student step, the share whose `level`, `stop` and `intermediate_answer` match the teacher's target, and
the share of outputs identical to transformers fp32's. Nothing here asserts a time; the load average at the start is
printed beside the figures."""
import argparse, importlib.util, json, os, statistics, time
from pathlib import Path

import torch

from megrag_kit.distill import DEFAULT_DATA, TrainConfig, _split, read_examples
from megrag_kit.models import load_llm


def parsed(text: str):
    try: d = json.loads(text)
    except json.JSONDecodeError: return None
    return d if isinstance(d, dict) else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--student", default="runs/distill/student-v2"); ap.add_argument("--examples", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=320); ap.add_argument("--out", default=None)
    ap.add_argument("--backends", default="hf,hf-bf16,llamacpp,ct2,ct2-int8")
    a = ap.parse_args()
    lines = []
    def say(s=""): print(s, flush=True); lines.append(s)
    _, val = _split([e for e in read_examples(*DEFAULT_DATA) if e["kind"] == "trajectory"], TrainConfig().val_frac)
    ex = val[:a.examples]
    say("# The distilled student under each backend (CPU)\n")
    say(f"student={a.student} prompts={len(ex)} (validation examples of the default data) max_new_tokens="
        f"{a.max_new_tokens} torch_threads={torch.get_num_threads()} cores={os.cpu_count()} load average before: "
        f"{os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    specs = {"hf": (f"smollm2-135m+lora:{a.student}", {}), "hf-bf16": (f"smollm2-135m+lora:{a.student}",
                                                                     {"dtype": torch.bfloat16}),
             "llamacpp": (f"smollm2-135m@llamacpp+lora:{a.student}", {}),
             "ct2": (f"smollm2-135m@ct2+lora:{a.student}", {}),
             "ct2-int8": (f"smollm2-135m@ct2+lora:{a.student}", {"compute_type": "int8_float32"})}
    say("| backend | model id | s/call mean | s/call median | completion tok/s | parsed % | level, stop and "
        "intermediate answer as the teacher % | output = transformers fp32's % |")
    say("|---|---|---|---|---|---|---|---|")
    ref = None
    for name in a.backends.split(","):
        spec, kw = specs[name]
        if name == "llamacpp" and importlib.util.find_spec("llama_cpp") is None:
            say(f"| {name} | not installed (pip install 'megrag_kit[llamacpp]') | | | | | | |"); continue
        m = load_llm(spec, "cpu", cache=False, **kw)
        m.generate([ex[0]["messages"]], max_new_tokens=8)                            # warm-up
        secs, toks, outs = [], 0, []
        for e in ex:
            t = time.perf_counter()
            g, = m.generate([e["messages"]], max_new_tokens=a.max_new_tokens)
            secs.append(time.perf_counter() - t); toks += g.completion_tokens or 0; outs.append(g.text)
        ok = [parsed(o) for o in outs]
        want = [parsed(e["target"]) for e in ex]
        same = lambda d, w: d is not None and all(d.get(k) == w.get(k) for k in ("level", "stop", "intermediate_answer"))
        if ref is None: ref = outs
        say(f"| {name} | `{m.model_id}` | {statistics.mean(secs):.2f} | {statistics.median(secs):.2f} | "
            f"{toks / sum(secs):.1f} | {100 * sum(d is not None for d in ok) / len(ex):.0f} | "
            f"{100 * sum(same(d, w) for d, w in zip(ok, want)) / len(ex):.0f} | "
            f"{100 * sum(o == r for o, r in zip(outs, ref)) / len(ex):.0f} |")
        del m
    if a.out: Path(a.out).write_text("\n".join(lines) + "\n"); print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
