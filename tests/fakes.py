"""Light stand-ins for the fast test tier: an embedder that needs no model (control-flow tests only)."""
import re, zlib
import numpy as np
from megrag_kit.models import Embedder


class HashEmbedder(Embedder):
    """Bag-of-words vectors hashed into `dim` buckets (crc32 of each lower-cased word), L2-normalized.

    Not a language model: passages that share words with a query score higher, which is all the control-flow
    tests of the methods need from a retriever. Loads in microseconds."""
    model_id, dim = "hash-bow-256", 256

    def encode(self, texts, batch_size=64):
        x = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()): x[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
