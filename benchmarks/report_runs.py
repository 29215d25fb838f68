"""Markdown report of finished runs, with paired bootstrap differences against reference runs.

    python benchmarks/report_runs.py RUN_DIR... [--against runs/2wiki100-native_rag runs/2wiki100-direct]

The same report as `megrag-kit report RUN_DIR... --against REF` (`megrag_kit.report`): a row per run (F1 and EM
with 95% intervals, n, LLM calls and tokens per question, and the columns each method declares, e.g. MEGRAG's mean
steps, budget-exhausted share, composition, outputs parsed without repair and evidence recall), F1 by question type
or answer form, and paired differences on the questions both runs answered."""
import argparse
from pathlib import Path
from megrag_kit.report import report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path); ap.add_argument("--against", nargs="*", type=Path, default=[])
    a = ap.parse_args()
    print(report(a.runs, a.against))


if __name__ == "__main__": main()
