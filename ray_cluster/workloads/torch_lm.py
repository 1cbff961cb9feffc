"""PyTorch workload: a small transformer language model on the standard library's source
(``torch-lm``).

Optional extra (``pip install 'psched[torch]'``); imported only when a ``torch-lm`` workload
is built. The text is :mod:`ray_cluster.workloads.corpus` (every ``*.py`` of the standard
library in a fixed order, at most ``corpus_mb`` MB, every tenth file held out; its sha256 in
the job's log through :meth:`TorchLM.describe`); the tokens are bytes (vocabulary 256).

Model: a decoder-only transformer (pre-norm, GPT-2 style) with ``layers`` blocks of causal
multi-head self-attention (``heads`` heads) and a GELU MLP of width ``4 d``, learned
position embeddings for ``context`` positions, a final layer norm and the output layer tied to
the token embedding. Parameters ``256 d + context d + layers (12 d^2 + 13 d) + 2 d``:

==========================================  =============  ========
hparams                                     parameters     float32
==========================================  =============  ========
defaults (``d_model=128, layers=2``)          437,760        1.8 MB
``d_model=256, layers=4``                    3,241,472       13 MB
``d_model=512, layers=8, context=128``      25,416,704      102 MB
==========================================  =============  ========

Layout of the flat vector: token embedding ``(256, d)``, position embedding ``(context, d)``,
then per block ``ln1`` weight and bias, ``qkv`` weight ``(3d, d)`` and bias, ``proj`` weight
``(d, d)`` and bias, ``ln2`` weight and bias, ``fc`` weight ``(4d, d)`` and bias, ``out``
weight ``(d, 4d)`` and bias, then the final norm's weight and bias. Initialisation from a
numpy generator (the same vector on CPU and CUDA): normal(0, 0.02) weights and embeddings,
the two residual projections scaled by ``1 / sqrt(2 layers)``, layer-norm weights 1, biases 0.

A training example is a window of ``context + 1`` bytes starting at a multiple of
``context`` in the training text (the windows are the training set's rows; partitions slice
them): the inputs are its first ``context`` bytes, the labels its last ``context``. The loss
is the mean cross-entropy per predicted byte (nats); the held-out evaluation runs on up to 64
windows spread evenly over the held-out text (accuracy: next byte predicted exactly).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import prod, sqrt
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from psched.core.errors import InputError
from ray_cluster.workloads.corpus import Corpus, load_corpus
from ray_cluster.workloads.data import Batch, Partition
from ray_cluster.workloads.torch_flat import FlatModel, FlatParams, flat_params, torch_device

__all__ = ["EVAL_WINDOWS", "VOCAB", "TorchLM"]

#: Tokens are bytes.
VOCAB = 256
#: Held-out windows of an evaluation.
EVAL_WINDOWS = 64
_EVAL_CHUNK = 16  # windows per forward pass of an evaluation


@dataclass(frozen=True, kw_only=True)
class TorchLM(FlatModel):
    """A byte-level transformer language model on the standard library (module docstring)."""

    name: ClassVar[str] = "torch-lm"
    d_model: int = 128          #: d: width of the residual stream
    layers: int = 2             #: transformer blocks
    heads: int = 4              #: attention heads (divides d_model)
    context: int = 64           #: tokens (bytes) per training window
    corpus_mb: float = 4.0      #: most MB of standard-library source read (10^6 bytes)
    device: str = "auto"        #: "auto" (CUDA when available), "cpu", "cuda", "cuda:1", ...

    def __post_init__(self) -> None:
        if min(self.d_model, self.layers, self.heads, self.context) < 1:
            raise InputError("d_model, layers, heads and context must be >= 1", field="hparams")
        if self.d_model % self.heads:
            raise InputError(f"heads ({self.heads}) must divide d_model ({self.d_model})",
                             field="hparams.heads")
        if self.corpus_mb <= 0:
            raise InputError("corpus_mb must be > 0", field="hparams.corpus_mb")

    # -- data ----------------------------------------------------------------------------
    @property
    def corpus(self) -> Corpus:
        """The text (built once per process)."""
        corpus = load_corpus(self.corpus_mb)
        if corpus.held_out.size <= self.context or corpus.train.size <= self.context:
            raise InputError(f"corpus_mb={self.corpus_mb:g} gives {corpus.held_out.size} "
                             f"held-out bytes, fewer than one window of {self.context + 1}",
                             field="hparams.corpus_mb")
        return corpus

    def describe(self) -> str:
        """One line for the job's log: the corpus read, with its hash."""
        return self.corpus.describe()

    def partition(self, n_partitions: int, index: int) -> Partition:
        """Strided slice ``index::n_partitions`` of the training windows."""
        n = (self.corpus.train.size - 1) // self.context
        if not 1 <= n_partitions <= n or not 0 <= index < n_partitions:
            raise ValueError(f"partition {index} of {n_partitions} impossible with {n} windows")
        return Partition(index=index, n_partitions=n_partitions,
                         rows=np.arange(index, n, n_partitions, dtype=np.int64))

    def _windows(self, text: np.ndarray, rows: np.ndarray) -> Batch:
        idx = rows[:, None] * self.context + np.arange(self.context + 1)
        w = text[idx].astype(np.int64)
        return Batch(x=w[:, :-1], y=w[:, 1:])

    def batches(self, part: Partition, batch_size: int,
                rng: np.random.Generator) -> Iterator[Batch]:
        """Endless full batches of windows; each pass over ``part`` a fresh permutation."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        text = self.corpus.train
        buf = np.empty(0, dtype=np.int64)
        while True:
            while buf.size < batch_size:
                buf = np.concatenate([buf, rng.permutation(part.rows)])
            take, buf = buf[:batch_size], buf[batch_size:]
            yield self._windows(text, take)

    # -- parameters ----------------------------------------------------------------------
    def _layout(self) -> list[tuple[tuple[int, ...], str]]:
        """``(shape, initialisation)`` of each tensor, in the flat vector's order."""
        d = self.d_model
        block = [((d,), "one"), ((d,), "zero"), ((3 * d, d), "normal"), ((3 * d,), "zero"),
                 ((d, d), "residual"), ((d,), "zero"), ((d,), "one"), ((d,), "zero"),
                 ((4 * d, d), "normal"), ((4 * d,), "zero"), ((d, 4 * d), "residual"),
                 ((d,), "zero")]
        return ([((VOCAB, d), "normal"), ((self.context, d), "normal")]
                + block * self.layers + [((d,), "one"), ((d,), "zero")])

    def _shapes(self) -> list[tuple[int, ...]]:
        return [s for s, _ in self._layout()]

    @property
    def n_params(self) -> int:
        return sum(prod(s) for s in self._shapes())

    def init_params(self, seed: int) -> np.ndarray:
        """GPT-2 style initialisation (module docstring) from a numpy generator."""
        rng = np.random.default_rng(seed)
        scale = {"normal": 0.02, "residual": 0.02 / sqrt(2 * self.layers)}
        parts = []
        for shape, kind in self._layout():
            k = prod(shape)
            if kind in scale:
                parts.append(rng.standard_normal(k, dtype=np.float32)
                              * np.float32(scale[kind]))
            else:
                parts.append(np.full(k, 1.0 if kind == "one" else 0.0, dtype=np.float32))
        return np.concatenate(parts)

    def _flat(self, device: torch.device, dtype: torch.dtype = torch.float32) -> FlatParams:
        key = ("lm", self.d_model, self.layers, self.context)
        return flat_params(key, self._shapes(), device, dtype)

    # -- the model -----------------------------------------------------------------------
    def logits(self, ws: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Next-byte logits ``(n, T, 256)`` for byte windows ``x`` of shape ``(n, T)``."""
        d, nh = self.d_model, self.heads
        n, t = x.shape
        h = F.embedding(x, ws[0]) + ws[1][:t]
        for i in range(self.layers):
            (g1, c1, wqkv, bqkv, wp, bp, g2, c2, wf, bf, wo, bo) = ws[2 + 12 * i:14 + 12 * i]
            a = F.layer_norm(h, (d,), g1, c1)
            qkv = F.linear(a, wqkv, bqkv).reshape(n, t, 3, nh, d // nh)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (n, heads, t, d / heads)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + F.linear(y.transpose(1, 2).reshape(n, t, d), wp, bp)
            a = F.layer_norm(h, (d,), g2, c2)
            h = h + F.linear(F.gelu(F.linear(a, wf, bf)), wo, bo)
        h = F.layer_norm(h, (d,), ws[-2], ws[-1])
        return F.linear(h, ws[0])  # tied to the token embedding

    def _xent(self, ws: list[torch.Tensor], batch: Batch, fp: FlatParams) -> torch.Tensor:
        x = torch.as_tensor(batch.x).to(fp.device)
        y = torch.as_tensor(batch.y).to(fp.device)
        return F.cross_entropy(self.logits(ws, x).reshape(-1, VOCAB), y.reshape(-1))

    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        """Held-out ``{"loss", "accuracy"}`` on up to :data:`EVAL_WINDOWS` windows."""
        text = self.corpus.held_out
        n = (text.size - 1) // self.context
        rows = np.unique(np.linspace(0, n - 1, min(EVAL_WINDOWS, n)).astype(np.int64))
        fp = self._flat(torch_device(self.device))
        loss_sum, hits, count = 0.0, 0, 0
        with torch.no_grad():
            ws = fp.load(params)
            for at in range(0, rows.size, _EVAL_CHUNK):
                batch = self._windows(text, rows[at:at + _EVAL_CHUNK])
                logits = self.logits(ws, torch.as_tensor(batch.x).to(fp.device))
                y = torch.as_tensor(batch.y).to(fp.device)
                loss_sum += float(F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1),
                                                  reduction="sum"))
                hits += int((logits.argmax(dim=-1) == y).sum())
                count += int(y.numel())
        return {"loss": loss_sum / count, "accuracy": hits / count}
