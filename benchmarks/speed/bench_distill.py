"""Seconds per LoRA training step and peak memory of the distillation student on real collected examples, for the
choices that matter on a CPU: sequence length, batch, bf16 autocast vs fp32, LoRA on every layer vs the top layers,
and the rank. Each configuration runs in its own process (so its peak resident memory is its own): one warm-up step,
then `--steps` timed steps on batches of real examples of the chosen length class.

    python benchmarks/speed/bench_distill.py --data runs/distill/gold-musique-train-parser.jsonl \
        --out benchmarks/results/bench_distill.md

Columns: `len` (which examples: `median` = the batch nearest the median length, `p90` = the 90th percentile),
`tokens` (padded tokens per batch), `s/step` (mean of the timed steps), `tok/s`, `peak_mb` (peak resident memory of
the process), and the load (`uptime`) when the run started, since the machine may be shared."""
import argparse, json, os, resource, statistics, subprocess, sys, time
from pathlib import Path

GRID = [  # (length class, batch, bf16, layers, rank): the likely choice first, so a cut-short run still has it
    ("median", 4, True, 8, 8), ("median", 4, True, 0, 8), ("median", 4, False, 8, 8), ("median", 4, True, 8, 16),
    ("median", 2, True, 8, 8), ("p90", 4, True, 8, 8), ("median", 4, True, 4, 8), ("median", 4, False, 0, 8),
]


def one(data: list[str], lclass: str, batch: int, bf16: bool, layers: int, rank: int, steps: int) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from megrag_kit.distill import read_examples, serialize_examples, lora_targets, _batch_loss
    from megrag_kit.models import smollm2_path
    tok = AutoTokenizer.from_pretrained(smollm2_path())
    seqs, _ = serialize_examples(tok, read_examples(*data), 100_000)
    seqs.sort(key=lambda s: len(s["input_ids"]))
    at = {"median": 0.5, "p90": 0.9}[lclass]
    i = min(int(at * len(seqs)), len(seqs) - batch)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules=lora_targets(model, layers),
                                             task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    model.train()
    times = []
    for k in range(steps + 1):
        b = seqs[i:i + batch]
        t0 = time.perf_counter()
        loss = _batch_loss(model, tok, b, bf16)
        opt.zero_grad(); loss.backward(); opt.step()
        if k: times.append(time.perf_counter() - t0)
    n = batch * max(len(s["input_ids"]) for s in seqs[i:i + batch])
    s = statistics.mean(times)
    return dict(len=lclass, seq_len=max(len(s_["input_ids"]) for s_ in seqs[i:i + batch]), batch=batch, bf16=bf16, layers=layers or "all",
                rank=rank, tokens=n, s_per_step=round(s, 2), tok_per_s=round(n / s), threads=torch.get_num_threads(),
                peak_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", required=True); ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path); ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--configs", type=int, default=len(GRID), help="the first N configurations of GRID only")
    a = ap.parse_args()
    if a.one:
        print("RESULT " + json.dumps(one(a.data, *json.loads(a.one), a.steps))); return
    from transformers import AutoTokenizer
    from megrag_kit.distill import read_examples, serialize_examples
    from megrag_kit.models import smollm2_path
    seqs, _ = serialize_examples(AutoTokenizer.from_pretrained(smollm2_path()), read_examples(*a.data), 100_000)
    L = sorted(len(s["input_ids"]) for s in seqs)
    T = sorted(len(s["input_ids"]) - s["n_prompt"] for s in seqs)
    q = lambda xs, f: xs[min(int(f * len(xs)), len(xs) - 1)]
    lines = [f"# Distillation training step cost ({len(seqs)} real examples from {', '.join(a.data)})", "",
             f"Sequence tokens: median {q(L, .5)}, p90 {q(L, .9)}, max {L[-1]}; target tokens: median {q(T, .5)}, max {T[-1]}.",
             f"Load at start: `{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}`; "
             f"{os.cpu_count()} CPUs. Command: `python benchmarks/speed/bench_distill.py --data {' '.join(a.data)} --steps {a.steps} "
             f"--configs {a.configs}`.", "",
             "| len | seq_len | batch | bf16 | LoRA layers | rank | tokens | s/step | tok/s | peak_mb |", "|---" * 10 + "|"]
    print("\n".join(lines), flush=True)
    for g in GRID[:a.configs]:
        r = subprocess.run([sys.executable, __file__, "--data", *a.data, "--steps", str(a.steps), "--one", json.dumps(g)],
                           capture_output=True, text=True)
        res = next((json.loads(x[7:]) for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
        if res is None: line = f"| {g} | failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode} |"
        else: line = "| " + " | ".join(str(res[k]) for k in ("len", "seq_len", "batch", "bf16", "layers", "rank", "tokens", "s_per_step",
                                                               "tok_per_s", "peak_mb")) + " |"
        lines.append(line); print(line, flush=True)
        if a.out: a.out.write_text("\n".join(lines) + "\n")            # row by row: a run cut short keeps its rows
    lines.append(f"\nLoad at end: `{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}`.")
    if a.out: a.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
