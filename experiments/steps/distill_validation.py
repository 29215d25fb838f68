"""The held-out loss of distilled students on each source of their training data (`distill.validation_by_source`):
the mixture's validation loss hides how a student does on a small source (MuSiQue's 117 kept training questions
beside 2Wiki's 316), which is the one its evaluation set comes from.

    python experiments/steps/distill_validation.py runs/distill/student-v4-240 runs/distill/student-v5-240 [...]

Prints a Markdown table: one row per adapter folder, its validation loss over all sources and on each. Students with
the same data files and `val_frac` share the validation questions, so their rows compare loss on the same held-out
sequences."""
import sys, time
from megrag_kit.core import set_threads
from megrag_kit.distill import validation_by_source


def main(folders):
    set_threads(None)
    rows = []
    for f in folders:
        t = time.perf_counter(); v = validation_by_source(f); rows.append((f, v))
        print(f"{f}: {v} ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
    names = list(dict.fromkeys(k for _, v in rows for k in v))
    print("| adapter | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for f, v in rows: print(f"| `{f}` | " + " | ".join("–" if v.get(k) is None else f"{v[k]:.4f}" for k in names) + " |")


if __name__ == "__main__": main(sys.argv[1:])
