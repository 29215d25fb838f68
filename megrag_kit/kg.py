# %% auto #0
__all__ = ['SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb', 'SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb', 'SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb', 'SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb', 'SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb', 'SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb', 'SKB_FILES', 'MAG_TYPES', 'SKB_TARGETS', 'TextKG', 'KGTools', 'corpus_kg', 'skb_text', 'read_skb', 'write_skb']

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 500) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 500) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 500) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 500) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 500) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 100) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d

# %% ../nbs/30_cara.ipynb #4597b5d7
# megrag_kit.kg: a text-rich knowledge graph (typed nodes with text, typed edges, CSR adjacency) and CARA's two
# retrieval tools over it, GlobalSearch and Neighbors; built from an evidence store's corpus and OpenIE triples,
# or read from STaRK's processed SKB files.
import json, math, pickle, re, time
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from .core import DataError
from .retrievers import BM25Index, text_fingerprint

# %% ../nbs/30_cara.ipynb #02716df0
@dataclass
class TextKG:
    """A text-rich knowledge graph ("CARA: Causally Guided Retrieval Agent for Question Answering", §3:
    `G = <V, E, phi_V, phi_E, d_V>`), node ids `0..N-1`.

    `names[v]`: a short label; `texts[v]`: the node text `d_V(v)`; `node_type`: int `[N]` indexing `node_types`;
    `heads`, `tails`, `edge_type`: int `[E]` (edge `i` joins `heads[i]` and `tails[i]`, its type indexes `edge_types`);
    `targets`: the node types retrieval is scored on (all types when empty); `name`: the graph's name (names its
    saved BM25 index). Edges are followed both ways. `ValueError` when the arrays disagree in length or an id or
    type index is out of range."""
    names: list
    texts: list
    node_type: np.ndarray
    node_types: list
    heads: np.ndarray
    tails: np.ndarray
    edge_type: np.ndarray
    edge_types: list
    targets: tuple = ()
    name: str = "kg"

    def __post_init__(self):
        n = len(self.texts)
        self.node_type = np.asarray(self.node_type, dtype=np.int64)
        self.heads, self.tails = np.asarray(self.heads, dtype=np.int64), np.asarray(self.tails, dtype=np.int64)
        self.edge_type = np.asarray(self.edge_type, dtype=np.int64)
        if len(self.names) != n or len(self.node_type) != n: raise ValueError(f"{len(self.names)} names, {len(self.node_type)} node types for {n} texts")
        if not (len(self.heads) == len(self.tails) == len(self.edge_type)): raise ValueError("heads, tails and edge_type differ in length")
        if n and len(self.node_type) and not (0 <= self.node_type.min() and self.node_type.max() < len(self.node_types)): raise ValueError("a node type index is out of range")
        if len(self.heads):
            if min(self.heads.min(), self.tails.min()) < 0 or max(self.heads.max(), self.tails.max()) >= n: raise ValueError(f"an edge end is outside [0, {n})")
            if self.edge_type.min() < 0 or self.edge_type.max() >= len(self.edge_types): raise ValueError("an edge type index is out of range")
        bad = [t for t in self.targets if t not in self.node_types]
        if bad: raise ValueError(f"target types {bad} are not node types {list(self.node_types)}")
        rows = np.concatenate([self.heads, self.tails]); cols = np.concatenate([self.tails, self.heads])
        typ = np.concatenate([self.edge_type, self.edge_type])
        order = np.argsort(rows, kind="stable")
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
        self.indices, self.indtype = cols[order], typ[order]

    def __len__(self): return len(self.texts)

    @property
    def n_edges(self) -> int: return len(self.heads)

    def type_of(self, v: int) -> str: return self.node_types[self.node_type[v]]

    def is_target(self, v: int) -> bool:
        "Whether node `v` is of a type retrieval is scored on."
        return not self.targets or self.type_of(v) in self.targets

    def neighbors(self, v: int, node_types=None, edge_types=None) -> dict[int, list[str]]:
        """One-hop neighbours of `v` as `{u: [edge type names joining v and u]}`, in CSR order (by edge insertion),
        keeping only nodes whose type is in `node_types` and edges whose type is in `edge_types` (`None` or empty:
        no filter). `IndexError` for a node outside the graph; `ValueError` naming an unknown type."""
        if not 0 <= int(v) < len(self): raise IndexError(f"node {v} outside [0, {len(self)})")
        for given, known, what in ((node_types, self.node_types, "node"), (edge_types, self.edge_types, "edge")):
            bad = [t for t in (given or []) if t not in known]
            if bad: raise ValueError(f"unknown {what} types {bad}; this graph has {list(known)[:20]}")
        a, b = self.indptr[v], self.indptr[v + 1]
        us, ts = self.indices[a:b], self.indtype[a:b]
        keep = np.ones(len(us), bool)
        if node_types: keep &= np.isin(self.node_type[us], [self.node_types.index(t) for t in node_types])
        if edge_types: keep &= np.isin(ts, [self.edge_types.index(t) for t in edge_types])
        out: dict[int, list[str]] = {}
        for u, t in zip(us[keep].tolist(), ts[keep].tolist()):
            rel = self.edge_types[t]
            if rel not in out.setdefault(u, []): out[u].append(rel)
        return out

# %% ../nbs/30_cara.ipynb #bad58aef
class KGTools:
    """CARA's retrieval tools over a `TextKG` ("CARA: Causally Guided Retrieval Agent for Question Answering", §3.1).

    `folder`: where the BM25 index over `kg.texts` is saved (`folder/bm25/<kg.name>-<fingerprint>/`, built once);
    `k1`, `b`: BM25 parameters. `global_search(q, k=30)` -> `[(node, score)]`; `neighbors(v, q, node_types, edge_types,
    k=20)` -> `[(node, score, [relations])]`. Both best first."""
    def __init__(self, kg: TextKG, folder, k1: float = 1.5, b: float = 0.75):
        self.kg = kg
        self.bm25 = BM25Index(kg.texts, folder, f"{kg.name}-{text_fingerprint(kg.texts)}", k1=k1, b=b)

    def global_search(self, q: str, k: int = 30, targets_only: bool = False) -> list[tuple[int, float]]:
        """The `k` nodes with the highest positive BM25 score for `q` (ties: lower id first); `[]` when no word of `q`
        is in the graph. `targets_only`: rank only target-type nodes (the BM25 baseline of the evaluation)."""
        if not targets_only: return self.bm25.search([q], k)[0]
        s = self.bm25.scores(q)
        ids = np.flatnonzero(np.isin(self.kg.node_type, [self.kg.node_types.index(t) for t in self.kg.targets])) if self.kg.targets else np.arange(len(s))
        top = ids[np.argsort(-s[ids], kind="stable")][:k]
        return [(int(i), float(s[i])) for i in top if s[i] > 0]

    def neighbors(self, v: int, q: str, node_types=None, edge_types=None, k: int = 20) -> list[tuple[int, float, list[str]]]:
        "The filtered neighbours of `v` (`TextKG.neighbors`), the `k` best for `q` by BM25 (ties and zero scores: adjacency order)."
        nb = self.kg.neighbors(v, node_types, edge_types)
        if not nb: return []
        return [(u, s, nb[u]) for u, s in self.bm25.search_within(q, list(nb), k, positive_only=False)]

# %% ../nbs/30_cara.ipynb #4e0d7b4b
_WORD = re.compile(r"\w+")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")

def _words(s: str) -> list[str]: return _WORD.findall(s.lower())

def corpus_kg(store, triples: bool = True, title_entities: bool = True, max_sentences: int = 3, min_chars: int = 3,
              max_mentions: int = 100) -> TextKG:
    """The corpus graph of an `EvidenceStore` (see above): passage nodes `0..P-1` (the targets), then entity nodes.

    `triples`: add the OpenIE entities and relation edges held by the store's triple view on disk (never extracts;
    skipped when the store has no LLM); `title_entities`: one entity per passage title; `max_sentences`: corpus
    sentences appended to an entity's text; `min_chars`: shorter names (after normalization) make no entity;
    `max_mentions`: an entity whose name occurs in more passages gets `mentions` edges only from its triples'
    passages (a very common string is not a useful hop). Edge types: `mentions`, then the relation labels."""
    P = store.passages
    toks = [_words(p.content) for p in P]
    joined = [" " + " ".join(t) + " " for t in toks]
    post: dict[str, set] = {}
    for i, t in enumerate(toks):
        for w in set(t): post.setdefault(w, set()).add(i)
    ents: dict[str, int] = {}; enames: list[str] = []; ekeys: list[str] = []; src: list[set] = []
    def ent(name: str, pid=None):
        key = " ".join(_words(_PAREN.sub("", name))) or " ".join(_words(name))
        if len(key) < min_chars: return None
        if key not in ents: ents[key] = len(enames); enames.append(name.strip()); ekeys.append(key); src.append(set())
        e = ents[key]
        if pid is not None: src[e].add(pid)
        return e
    if title_entities:
        for p in P: ent(p.title, p.pid)
    rel_edges = []
    if triples and getattr(store, "llm", None) is not None:
        view = store.triple_view
        for pid, items in sorted(view.extracted.items()):
            for s, r, o in items:
                a, b = ent(s, pid), ent(o, pid)
                if a is not None and b is not None and a != b: rel_edges.append((a, b, " ".join(r.lower().split())[:60] or "related_to"))
    mentions = []
    for key, e in ents.items():
        ws = key.split()
        cand = set.intersection(*(post.get(w, set()) for w in ws)) if ws else set()
        hits = {p for p in cand if f" {key} " in joined[p]}
        if len(hits) > max_mentions: hits = set()
        for p in sorted(hits | src[e]): mentions.append((p, e))
    sents = store.view("sentence")
    n_p = len(P); texts = [p.content for p in P]
    by_ent: dict[int, list[int]] = {}
    for p, e in mentions: by_ent.setdefault(e, []).append(p)
    for e, name in enumerate(enames):
        key, found = ekeys[e], []
        for p in by_ent.get(e, []):
            for _, s in sents.units(p):
                if f" {key} " in " " + " ".join(_words(s)) + " ": found.append(s)
                if len(found) >= max_sentences: break
            if len(found) >= max_sentences: break
        texts.append("\n".join([name, *found]))
    rels = sorted({r for _, _, r in rel_edges})
    etypes = ["mentions", *rels]; ri = {r: i for i, r in enumerate(etypes)}
    heads = [p for p, _ in mentions] + [n_p + a for a, _, _ in rel_edges]
    tails = [n_p + e for _, e in mentions] + [n_p + b for _, b, _ in rel_edges]
    etype = [0] * len(mentions) + [ri[r] for _, _, r in rel_edges]
    return TextKG([p.title for p in P] + enames, texts, [0] * n_p + [1] * len(enames), ["passage", "entity"],
                  heads, tails, etype, etypes, targets=("passage",), name=f"corpus-{store.ds.name}")

# %% ../nbs/30_cara.ipynb #752e7943
SKB_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
MAG_TYPES = ({0: "author", 1: "institution", 2: "field_of_study", 3: "paper"},
             {0: "author___affiliated_with___institution", 1: "paper___cites___paper", 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"})
SKB_TARGETS = {"amazon": ("product",), "mag": ("paper",), "prime": ()}

def _missing(v) -> bool:
    if v is None: return True
    if isinstance(v, float) and math.isnan(v): return True
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == -1: return True
    return isinstance(v, str) and v.strip().lower() in ("", "nan", "-1", "none")

def _flat(v, n: int = 400) -> str:
    if isinstance(v, dict): v = "; ".join(f"{k}: {_flat(x, 120)}" for k, x in v.items() if not _missing(x))
    elif isinstance(v, (list, tuple)): v = "; ".join(_flat(x, 200) for x in v if not _missing(x))
    return " ".join(str(v).split())[:n]

_SKB_FIELDS = [("title", "product"), ("brand", "brand"), ("description", "description"), ("feature", "features"),
               ("review", "reviews"), ("qa", "Q&A"), ("brand_name", "brand"), ("category_name", "category"), ("color_name", "color"),
               ("name", "name"), ("type", "type"), ("source", "source"), ("details", "details"),
               ("DisplayName", "name"), ("OriginalTitle", "paper title"), ("abstract", "abstract"), ("Date", "publication date"),
               ("OriginalVenue", "venue")]

def skb_text(info: dict, max_chars: int = 2000) -> str:
    "STaRK-style text of one node's attribute dict: `- label: value` lines for the known fields present, else for every scalar field; cut at `max_chars`."
    lines = [f"- {lab}: {_flat(info[k])}" for k, lab in _SKB_FIELDS if k in info and not _missing(info[k]) and _flat(info[k])]
    if not lines: lines = [f"- {k}: {_flat(v)}" for k, v in info.items() if not _missing(v) and not isinstance(v, (dict, list))]
    return "\n".join(lines)[:max_chars]

def _skb_name(info: dict) -> str:
    for k in ("title", "OriginalTitle", "name", "DisplayName", "brand_name", "category_name", "color_name"):
        if k in info and not _missing(info[k]): return _flat(info[k], 120)
    return ""

def read_skb(folder, name: str | None = None, max_chars: int = 2000) -> TextKG:
    """A STaRK SKB (`amazon`, `mag`, `prime`, or another with the same layout) from its processed files (see above).

    `folder`: the `processed/` folder, its parent, or Amazon's `processed/cache/brand-category-color/`; `name`:
    the SKB (default: guessed from the path), which fixes the targets and MAG's type dictionaries. `FileNotFoundError`
    naming the missing files and where to get them; `DataError` naming the file and field of inconsistent contents."""
    import torch
    folder = Path(folder)
    cands = [folder, folder / "processed", folder / "cache" / "brand-category-color", folder / "processed" / "cache" / "brand-category-color"]
    d = next((c for c in cands if all((c / f).exists() for f in SKB_FILES)), None)
    name = name or next((s for s in ("amazon", "mag", "prime") if s in str(folder).lower()), "skb")
    if d is None:
        have = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        missing = [f for f in SKB_FILES if not (folder / f).exists()]
        raise FileNotFoundError(
            f"{folder} is not a STaRK processed SKB folder: missing {', '.join(missing)} (it holds {have[:8] or 'nothing'}). "
            f"Download skb/{name if name != 'skb' else '<amazon|mag|prime>'}/processed.zip from the Hugging Face dataset "
            f"snap-stanford/stark and unzip it so that this folder (or its processed/ sub-folder) holds {', '.join(SKB_FILES)} "
            f"and the type dictionaries node_type_dict.pkl, edge_type_dict.pkl")
    load = lambda f: pickle.loads((d / f).read_bytes())
    tensor = lambda f: torch.load(d / f, weights_only=True).cpu().numpy().astype(np.int64)
    info = load("node_info.pkl")
    ei, et, nt = tensor("edge_index.pt"), tensor("edge_types.pt"), tensor("node_types.pt")
    dicts = []
    for f, fixed in zip(("node_type_dict.pkl", "edge_type_dict.pkl"), MAG_TYPES):
        if (d / f).exists(): dicts.append(load(f))
        elif name == "mag": dicts.append(fixed)
        else: raise FileNotFoundError(f"{d / f} is missing: it comes in the same processed.zip (Hugging Face dataset snap-stanford/stark, skb/{name}/)")
    ntd, etd = dicts
    n = len(nt)
    if ei.ndim != 2 or ei.shape[0] != 2: raise DataError(f"expected a [2, E] tensor, got shape {list(ei.shape)}", file=d / "edge_index.pt", field="edge_index")
    if len(et) != ei.shape[1]: raise DataError(f"{len(et)} edge types for {ei.shape[1]} edges", file=d / "edge_types.pt", field="edge_types")
    if not isinstance(info, dict): raise DataError("expected a dict of node id -> attribute dict", file=d / "node_info.pkl")
    bad = [v for v in info if not (isinstance(v, (int, np.integer)) and 0 <= v < n)]
    if bad: raise DataError(f"node ids {bad[:3]} outside [0, {n}) of node_types.pt", file=d / "node_info.pkl", record=bad[0])
    ntypes = [ntd[i] for i in sorted(ntd)]; etypes = [etd[i] for i in sorted(etd)]
    if sorted(ntd) != list(range(len(ntd))) or sorted(etd) != list(range(len(etd))): raise DataError("type dictionaries must map 0..T-1 to names", file=d)
    texts = [skb_text(info.get(v, {}), max_chars) for v in range(n)]
    names = [_skb_name(info.get(v, {})) or f"{ntypes[nt[v]]} {v}" for v in range(n)]
    targets = tuple(t for t in SKB_TARGETS.get(name, ()) if t in ntypes)
    return TextKG(names, texts, nt, ntypes, ei[0], ei[1], et, etypes, targets=targets, name=f"stark-{name}")

# %% ../nbs/30_cara.ipynb #3fa86ed5
def write_skb(folder, node_info: dict, edges: list[tuple[int, int, int]], node_types: list[int], node_type_dict: dict, edge_type_dict: dict):
    """Write a (small) SKB in STaRK's processed layout: `node_info.pkl`, `edge_index.pt`, `edge_types.pt`, `node_types.pt`,
    `node_type_dict.pkl`, `edge_type_dict.pkl`. `edges`: `(head, tail, type index)`. For tests and examples."""
    import torch
    d = Path(folder); d.mkdir(parents=True, exist_ok=True)
    (d / "node_info.pkl").write_bytes(pickle.dumps(node_info))
    torch.save(torch.tensor([[h for h, _, _ in edges], [t for _, t, _ in edges]], dtype=torch.long).reshape(2, -1), d / "edge_index.pt")
    torch.save(torch.tensor([e for _, _, e in edges], dtype=torch.long), d / "edge_types.pt")
    torch.save(torch.tensor(node_types, dtype=torch.long), d / "node_types.pt")
    (d / "node_type_dict.pkl").write_bytes(pickle.dumps(node_type_dict)); (d / "edge_type_dict.pkl").write_bytes(pickle.dumps(edge_type_dict))
    return d