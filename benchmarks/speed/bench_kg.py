"""How fast the text-rich graph answers one-hop lookups at STaRK scale: a random graph of N nodes and E edges
(typed), the CSR build time, `TextKG.neighbors` with and without type filters, and `KGTools.neighbors` /
`global_search` (BM25 over synthetic node texts). Prints numbers; nothing is asserted.

    python benchmarks/speed/bench_kg.py --nodes 200000 --edges 2000000
"""
import argparse, tempfile, time
import numpy as np
from megrag_kit.kg import KGTools, TextKG

ap = argparse.ArgumentParser()
ap.add_argument("--nodes", type=int, default=200_000); ap.add_argument("--edges", type=int, default=2_000_000)
ap.add_argument("--lookups", type=int, default=2000); ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()
rng = np.random.default_rng(a.seed)
vocab = [f"w{i}" for i in range(20_000)]
texts = [" ".join(rng.choice(vocab, 12)) for _ in range(a.nodes)]
t = time.perf_counter()
kg = TextKG([f"n{i}" for i in range(a.nodes)], texts, rng.integers(0, 4, a.nodes), ["product", "brand", "category", "color"],
            rng.integers(0, a.nodes, a.edges), rng.integers(0, a.nodes, a.edges), rng.integers(0, 5, a.edges),
            ["also_buy", "also_view", "has_brand", "has_category", "has_color"], targets=("product",), name="bench")
print(f"graph: {a.nodes:,} nodes, {a.edges:,} edges (followed both ways); CSR build {time.perf_counter() - t:.2f} s")
vs = rng.integers(0, a.nodes, a.lookups)
for label, kw in (("no filter", {}), ("node_types=[product]", dict(node_types=["product"])),
                  ("edge_types=[also_buy, has_brand]", dict(edge_types=["also_buy", "has_brand"]))):
    t = time.perf_counter(); n = sum(len(kg.neighbors(int(v), **kw)) for v in vs); dt = time.perf_counter() - t
    print(f"TextKG.neighbors, {label:34s} {1e6 * dt / len(vs):8.1f} us per lookup ({n / len(vs):.1f} neighbours on average)")
tools = KGTools(kg, tempfile.mkdtemp())
t = time.perf_counter(); tools.global_search("w1 w2", 30); print(f"BM25 index build (bm25s, {a.nodes:,} texts): {time.perf_counter() - t:.1f} s")
qs = [" ".join(rng.choice(vocab, 3)) for _ in range(50)]
t = time.perf_counter(); [tools.global_search(q, 30) for q in qs]; print(f"GlobalSearch k=30: {1e3 * (time.perf_counter() - t) / len(qs):.1f} ms per query")
t = time.perf_counter(); [tools.neighbors(int(v), q, k=20) for v, q in zip(vs[:50], qs)]; print(f"Neighbors k=20 (filter + BM25 within): {1e3 * (time.perf_counter() - t) / len(qs):.1f} ms per call")
