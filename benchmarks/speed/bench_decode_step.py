"""Where one decoding step of the transformers backend goes, beside the floors of that step on this machine.

    python benchmarks/speed/bench_decode_step.py [--batches 1,8] [--contexts 200,2400] [--precisions fp32,bf16]
        [--threads 2] [--steps 10] [--out benchmarks/results/decode-step.md]

For each precision, batch B and context T: SmolLM2-135M decodes `--steps` timed steps (after 3 untimed) of B rows
whose key/value cache holds T positions, in the kit's lock-step buffers (`stacked_cache`), half the rows left-padded
over the first half of the context as in a batch of prompts of unequal length (the attention reads the padded
positions too); `torch.profiler` then splits 5 more steps into matrix products (`aten::mm`, `aten::addmm`),
attention (`scaled_dot_product_attention`'s kernel) and the rest (norms, rotary embedding, activation, Python).
In fp32 each (B, T) is measured twice: through the model's module tree and through the kit's `LlamaStep` (what the
kit's decoding loop runs: the same functions without the modules' calls, and at 4-16 rows MKL's packed products).
Printed beside each: the step's compute floor (B x 2N FLOP at the measured peak of that precision), the read of
the weights (N x bytes per weight, at the measured read rate) and of the key/value cache (B x T x layers x 2 x
kv heads x head size x bytes, at the same rate); the product rate is also given in GB/s of weights read. Then the
matrix product of one layer's largest weight (1536 x 576) at M = 1, 2, 4, 8, 16, 32 rows: its microseconds and
weight read rate, by `F.linear` and (`fp32 packed`, M = 4, 8, 16) by MKL's product packed for 8 or 16 rows.
Nothing here asserts a time; the UTC time and load average of every measurement are printed."""
import argparse, os, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
# the machine measured, and the lines printed, as the floor benchmark measures and prints them
from bench_floor import LINES, load, now, peak_flops, read_rate, say  # noqa: E402


def step_split(llm, B: int, T: int, steps: int, kit: bool = False) -> dict:
    """Seconds of one decoding step (mean of `steps`) and the profiler's split of 5 more into products/attention/rest:
    through the model's module tree, or with `kit` through the kit's `LlamaStep` (what `_decode` runs)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from megrag_kit.models_hf import LlamaStep, stacked_cache
    m, cfg, dt = llm.model, llm.model.config, llm.model.dtype
    kvh, hd = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    g = torch.Generator().manual_seed(0)
    kvs = [[(torch.randn(1, kvh, T, hd, generator=g, dtype=dt), torch.randn(1, kvh, T, hd, generator=g, dtype=dt))
            for _ in range(cfg.num_hidden_layers)] for _ in range(B)]
    cache = stacked_cache(kvs, T, steps + 16)
    mask = torch.ones(B, T + 1, dtype=torch.long); mask[: B // 2, : T // 2] = 0       # half the rows padded
    tok = torch.randint(0, 1000, (B, 1), generator=g)
    state = {"mask": mask}
    kit_step = LlamaStep(m) if kit else None

    def step():
        mk = state["mask"]
        with torch.inference_mode():
            if kit: kit_step(tok, mk, mk.sum(1, keepdim=True) - 1, cache)
            else: m(input_ids=tok, attention_mask=mk, position_ids=mk.sum(1, keepdim=True) - 1, cache=cache,
                    logits_to_keep=1)
        state["mask"] = torch.cat([mk, mk.new_ones((B, 1))], 1)
    for _ in range(3): step()
    t = time.perf_counter()
    for _ in range(steps): step()
    s = (time.perf_counter() - t) / steps
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        for _ in range(5): step()
        wall = (time.perf_counter() - t) / 5
    mm = attn = 0.0
    for e in prof.key_averages():
        if e.key in ("aten::mm", "aten::addmm", "aten::bmm", "mkl::_mkl_linear"): mm += e.self_cpu_time_total / 1e6 / 5
        if "scaled_dot_product" in e.key and "attention" in e.key and "for_cpu" in e.key:
            attn += e.self_cpu_time_total / 1e6 / 5
    return dict(s=s, mm=mm * s / wall, attn=attn * s / wall)           # the split scaled to the unprofiled step


def product_rates(dtype, reps: int = 200, packed: bool = False) -> list[tuple]:
    """`(M, microseconds, GB/s of weight read)` of `x @ W.T` for a 1536 x 576 weight, cycling 60 weights (no cache):
    `F.linear`, or with `packed` MKL's product packed for 8 or 16 rows, x zero-padded to that count (`LlamaStep`'s)."""
    import torch
    import torch.nn.functional as F
    from megrag_kit.models_hf import LlamaStep
    ws = [torch.randn(1536, 576, dtype=dtype) for _ in range(60)]
    out = []
    for M in (1, 2, 4, 8, 16, 32):
        x, k, n = torch.randn(M, 576, dtype=dtype), [0], LlamaStep.rows(M)
        if packed and n is None: continue
        pk = [torch.ops.mkl._mkl_reorder_linear_weight(w, n) for w in ws] if packed else None

        def f():
            k[0] = (k[0] + 1) % 60
            if not packed: return F.linear(x, ws[k[0]])
            return torch.ops.mkl._mkl_linear(F.pad(x, (0, 0, 0, n - M)), pk[k[0]], ws[k[0]], None, n)[:M]
        for _ in range(10): f()
        t = time.perf_counter()
        for _ in range(reps): f()
        us = (time.perf_counter() - t) / reps * 1e6
        out.append((M, us, ws[0].numel() * ws[0].element_size() / us / 1e3))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,8"); ap.add_argument("--contexts", default="200,2400")
    ap.add_argument("--precisions", default="fp32,bf16"); ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10); ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from megrag_kit.core import set_threads
    set_threads(a.threads)
    import torch
    from megrag_kit.models import load_llm
    say(f"started {now()}; load average {load()}; threads {a.threads}, cores {os.cpu_count()}; torch "
        f"{torch.__version__}; SmolLM2-135M (smollm2-135m), half the rows of a batch left-padded over half the "
        f"context")
    say()
    peaks = {"fp32": peak_flops(torch.float32), "bf16": peak_flops(torch.bfloat16)}
    rate = read_rate()
    say(f"machine: fp32 peak {peaks['fp32'] / 1e9:.1f} GFLOP/s, bf16 peak {peaks['bf16'] / 1e9:.1f} GFLOP/s, memory "
        f"read {rate / 1e9:.1f} GB/s (load {load()})")
    say()
    rows = []
    for prec in a.precisions.split(","):
        llm = load_llm("smollm2-135m" if prec == "fp32" else f"smollm2-135m@{prec}", "cpu", cache=False)
        cfg = llm.model.config
        N = sum(p.numel() for p in llm.model.parameters())
        wb = llm.model.dtype.itemsize
        head = cfg.hidden_size // cfg.num_attention_heads
        kv_token = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head * wb      # bytes of one cached position
        for B, T, kit in [(B, T, kit) for kit in ((False, True) if prec == "fp32" else (False,))
                          for B in map(int, a.batches.split(",")) for T in map(int, a.contexts.split(","))]:
            r = step_split(llm, B, T, a.steps, kit)
            kv_read = B * (T + a.steps) * kv_token / rate
            r.update(prec=prec + (" LlamaStep" if kit else ""), B=B, T=T, compute=B * 2 * N / peaks[prec],
                     weights=N * wb / rate, kv=kv_read, load=load(), at=now())
            rows.append(r)
            say(f"{r['prec']} B={B:>2} T={T:>5}: {r['s'] * 1e3:7.1f} ms/step (products {r['mm'] * 1e3:6.1f}, attention "
                f"{r['attn'] * 1e3:6.1f}, rest {(r['s'] - r['mm'] - r['attn']) * 1e3:6.1f}); floors: compute "
                f"{r['compute'] * 1e3:5.1f} ms, weights read {r['weights'] * 1e3:5.1f} ms, cache read "
                f"{kv_read * 1e3:5.1f} ms; products read the weights at {N * wb / r['mm'] / 1e9:.1f} GB/s "
                f"(load {r['load']})")
        del llm
    say()
    say("| precision | batch | context | ms/step | products | attention | rest | compute floor | weights read "
        "| cache read | products' weight GB/s | load avg | measured |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        say(f"| {r['prec']} | {r['B']} | {r['T']} | {r['s'] * 1e3:.1f} | {r['mm'] * 1e3:.1f} | {r['attn'] * 1e3:.1f} | "
            f"{(r['s'] - r['mm'] - r['attn']) * 1e3:.1f} | {r['compute'] * 1e3:.1f} | {r['weights'] * 1e3:.1f} | "
            f"{r['kv'] * 1e3:.1f} | {(r['weights'] * rate) / r['mm'] / 1e9:.1f} | {r['load']} | {r['at']} |")
    say()
    say("One layer's largest product, x [M x 576] @ W.T [576 x 1536], 60 weights in turn (none stays in cache):")
    say()
    say("| precision | M | microseconds | weight read GB/s |")
    say("|---|---|---|---|")
    for prec in a.precisions.split(",") + (["fp32 packed"] if "fp32" in a.precisions else []):
        rates = product_rates(torch.float32 if prec.startswith("fp32") else torch.bfloat16, packed="packed" in prec)
        for M, us, gbs in rates: say(f"| {prec} | {M} | {us:.0f} | {gbs:.1f} |")
    say()
    say(f"last written {now()}; load average {load()}")
    if a.out:
        cmd = "python benchmarks/speed/run.py decode_step"
        Path(a.out).write_text(f"`{cmd}`\n\n# One decoding step beside its floors\n\n" + "\n".join(LINES) + "\n")


if __name__ == "__main__": main()
