"""The dense embedding of a corpus and its whole index build, timed beside the compute floor computed from its tokens.

    python benchmarks/speed/bench_index_floor.py [--dataset 2wikimultihopqa] [--embedders minilm,minilm@bf16]
        [--threads 2] [--corpus-order] [--out benchmarks/results/index_floor.md]

The machine is measured first, in this process and at these threads (the peak matrix-multiply rate in fp32 and bf16,
as `bench_floor.py` measures it). For each embedder the corpus's passages are tokenized as the embedder reads them (its
tokenizer, cut at its input limit, special tokens included) and the floor of their encoder work is computed from
those tokens: for a passage of T word pieces, 2 x N x T for the encoder's weight matrices (N: the parameters of its
layers, the embedding tables apart, which are looked up, not multiplied; BERT's pooler, 1.4% of N for MiniLM, is
counted though mean pooling does not use it, so the floor is that much too high) plus 4 x layers x width x T^2 for
the attention scores and their weighted sums; summed over the passages and divided by the peak of the embedder's
precision (fp32 or bf16). The tokens the embedder computes are also counted (each batch padded to its longest
text), for the kit's order (longest first, 256 texts a call, batches of 64) and, for comparison, for the corpus
order: a simulation that sorts each call by word pieces, where sentence-transformers sorts by characters, so its
padding is a lower bound.

Then the kit's own path is timed, each embedder in an empty store folder: `EvidenceStore.prepare(("passage",))`
(tokenize, embed, write the vectors and the flat faiss index); and with the first embedder, the other views of a
whole build one at a time: BM25 (`bm25`), sentences (`sentence`, pysbd) and triples (`triple`, spaCy's dependency
parse: `openie_backend="parser"`). With `--corpus-order` the first embedder's vectors are also made in corpus order,
256 texts a call (the order the kit used before), to show what the order saves: that row times the embedding alone
(no tokenizing for the manifest, no faiss index), so it understates the saving; its vectors are compared with the
kit's (the largest coordinate difference, the least cosine, and how many of the first 100 questions' top-10 lists
are the same), since a text's padded batch changes with the order. Nothing here asserts a time; the
UTC time and load average of each measurement are printed and written, with `--out F.md`, to `F.md`."""
import argparse, os, sys, tempfile, time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_floor import load, now, peak_flops, publish, say  # noqa: E402  the same peak measurement and output


def encoder_shape(emb) -> dict:
    "Tokenizer, input limit, layer parameters, layers and width of a sentence-transformers embedder at `emb.model`."
    st = emb.model
    bert = st[0].auto_model
    layer = sum(p.numel() for n, p in bert.named_parameters() if not n.startswith("embeddings"))
    return dict(tok=st.tokenizer, limit=int(st.max_seq_length), N=layer, L=bert.config.num_hidden_layers,
                d=bert.config.hidden_size)


def computed_tokens(lengths: np.ndarray, order: np.ndarray, chunk: int = 256, batch: int = 64) -> int:
    """Tokens the embedder computes when given the texts in `order`, `chunk` a call, each call sorted by length and
    cut into batches of `batch` padded to their longest text (sentence-transformers' `encode` sorts by characters,
    this by the word pieces `lengths`: a lower bound)."""
    total = 0
    for c in range(0, len(order), chunk):
        ls = np.sort(lengths[order[c:c + chunk]])[::-1]
        total += sum(int(ls[b]) * len(ls[b:b + batch]) for b in range(0, len(ls), batch))
    return total


def same_vectors(store, old: np.ndarray, questions) -> str:
    """How far the kit's vectors (`store.dense`, longest first) are from `old` (the same texts embedded in corpus
    order): the largest absolute difference of a coordinate, the smallest cosine of a row to its twin, and for the
    `questions` the share of top-10 lists that are identical, in order."""
    new = np.asarray(store.dense.vectors())
    q = store.dense.encode([x.question for x in questions])
    top = lambda v: np.argsort(-(q @ v.T), axis=1, kind="stable")[:, :10]
    same = float((top(new) == top(old)).all(axis=1).mean())
    return (f"  kit order against corpus order: max |difference| {np.abs(new - old).max():.2e}, least cosine "
            f"{(new * old).sum(axis=1).min():.7f}; top-10 lists identical for {100 * same:.0f}% of the first "
            f"{len(questions)} questions")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="2wikimultihopqa"); ap.add_argument("--embedders", default="minilm,minilm@bf16")
    ap.add_argument("--threads", type=int, default=None); ap.add_argument("--out", default=None)
    ap.add_argument("--corpus-order", action="store_true")
    a = ap.parse_args()
    from megrag_kit.core import set_threads
    th = set_threads(a.threads)
    import torch
    from megrag_kit.data import load_dataset
    from megrag_kit.index import EvidenceStore
    from megrag_kit.models import load_embedder
    from megrag_kit.retrievers import DenseIndex, token_lengths
    ds = load_dataset(a.dataset); texts = [p.content for p in ds.corpus]
    say("# Embedding and index build beside the compute floor of their tokens\n")
    say(f"started {now()}; load average {load()}; threads {th['threads']} ({th['source']}), cores {th['cores']}; "
        f"torch {torch.__version__}; {ds.name}: {len(texts):,} passages\n")
    peaks = {"float32": peak_flops(torch.float32), "bfloat16": peak_flops(torch.bfloat16)}
    say(f"machine: fp32 peak {peaks['float32'] / 1e9:.1f} GFLOP/s, bf16 peak {peaks['bfloat16'] / 1e9:.1f} GFLOP/s "
        f"(load {load()})\n")
    rows, stages = [], []
    for i, spec in enumerate(a.embedders.split(",")):
        emb = load_embedder(spec, "cpu")
        sh = encoder_shape(emb)
        T = np.minimum(token_lengths(texts, sh["tok"]), sh["limit"])
        flops = float((2 * sh["N"] * T + 4 * sh["L"] * sh["d"] * T.astype(np.float64) ** 2).sum())
        dtype = str(next(emb.model.parameters()).dtype).removeprefix("torch.")
        floor = flops / peaks[dtype]
        kit_t = computed_tokens(T, np.argsort(-T, kind="stable")); corpus_t = computed_tokens(T, np.arange(len(T)))
        emb.encode(texts[:64])                                                     # warm-up (kernel selection)
        with tempfile.TemporaryDirectory() as root:
            store = EvidenceStore(ds, emb, root=root, openie_backend="parser", show_progress=False)
            la = os.getloadavg()[0]
            rep = store.prepare(("passage",))
            row = dict(spec=spec, model_id=emb.model_id, dtype=dtype, tokens=int(T.sum()), kit_t=kit_t,
                       corpus_t=corpus_t, flops=flops, floor=floor, s=rep["seconds"], la=la, at=now())
            say(f"{spec}: {row['tokens']:,} tokens ({kit_t / T.sum():.3f}x computed in the kit's order, "
                f"{corpus_t / T.sum():.3f}x in corpus order), {flops / 1e12:.2f} TFLOP, floor {floor:.1f} s at the "
                f"{dtype} peak; embedding stage {rep['seconds']:.1f} s ({rep['seconds'] / floor:.2f}x) (load {la:.2f})")
            rows.append(row)
            if i == 0 and a.corpus_order:
                d = DenseIndex(texts, emb, Path(root) / "corpus-order", show_progress=False)
                t = time.perf_counter(); d._stream_vectors(texts, Path(root) / "corpus-order.npy", emb.dim)
                dt = time.perf_counter() - t
                rows.append(dict(row, spec=f"{spec} (corpus order, vectors only)", s=dt, la=os.getloadavg()[0],
                                 at=now(), kit_t=corpus_t))
                say(f"{spec}, corpus order, 256 a call (vectors only): {dt:.1f} s ({dt / floor:.2f}x)")
                say(same_vectors(store, np.load(Path(root) / "corpus-order.npy"), ds.questions[:100]))
            if i == 0:
                stages.append(("passage (embed, vectors, flat faiss)", rep["seconds"]))
                for view in ("bm25", "sentence", "triple"):
                    r = store.prepare((view,)); stages.append((view, r["seconds"]))
                    say(f"  {view}: {r['seconds']:.1f} s (load {load()})")
    write_md(a.out, rows, stages)


def write_md(out, rows, stages):
    "The tables, printed and, with `out`, written to it."
    t = ["| embedder | precision | tokens | computed tokens (padding) | TFLOP | compute floor s | embedding s (x floor) "
         "| load avg before | measured |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t.append(f"| {r['spec']} | {r['dtype']} | {r['tokens']:,} | {r['kit_t']:,} ({r['kit_t'] / r['tokens']:.3f}x) "
                 f"| {r['flops'] / 1e12:.2f} | {r['floor']:.1f} | {r['s']:.1f} ({r['s'] / r['floor']:.2f}x) "
                 f"| {r['la']:.2f} | {r['at']} |")
    if stages:
        first, whole = rows[0], sum(s for _, s in stages)
        t += ["", f"The whole build with {first['spec']} (parser OpenIE), stage by stage:", "",
              "| stage | seconds | share |", "|---|---|---|"]
        t += [f"| {name} | {s:.1f} | {100 * s / whole:.0f}% |" for name, s in stages]
        t.append(f"| whole build | {whole:.1f} | {whole / first['floor']:.2f}x the embedding's compute floor "
                 f"({first['floor']:.1f} s) |")
    publish(out, t)


if __name__ == "__main__": main()
