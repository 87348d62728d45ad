"""In-memory tensors of one uncertain graph (observed train/valid/test, or a predicted neural adjacency).

This is the hand-off format between the loaders / the Arrow export and the engine: every stored fact once,
sorted by (relation, head, tail), with per-relation offsets so a relation's facts are one slice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch


@dataclass(frozen=True)
class GraphTensors:
    """Facts of one graph. head/rel/tail: (nnz,) int64 (int32 when read from an export: half the memory
    of a CN15k export's 80M+ facts); conf: (nnz,) float32 in [0, 1];
    sorted by (rel, head, tail); rel_offsets: (n_relations + 1,) int64, relation r = [off[r], off[r+1]).
    A fact not stored has confidence 0 (design section 1)."""

    dataset: str
    n_entities: int
    n_relations: int
    head: torch.Tensor
    rel: torch.Tensor
    tail: torch.Tensor
    conf: torch.Tensor
    rel_offsets: torch.Tensor

    @classmethod
    def from_frame(
        cls,
        facts: pd.DataFrame,
        n_entities: int,
        n_relations: int,
        dataset: str = "",
        device: str | torch.device = "cpu",
    ) -> GraphTensors:
        """From a DataFrame with columns h, r, t, conf (distinct triples, e.g. KGData.graph(...))."""
        h = facts["h"].to_numpy(np.int64)
        r = facts["r"].to_numpy(np.int64)
        t = facts["t"].to_numpy(np.int64)
        c = facts["conf"].to_numpy(np.float32)
        return cls.from_arrays(h, r, t, c, n_entities, n_relations, dataset, device)

    @classmethod
    def from_arrays(
        cls,
        h: np.ndarray,
        r: np.ndarray,
        t: np.ndarray,
        c: np.ndarray,
        n_entities: int,
        n_relations: int,
        dataset: str = "",
        device: str | torch.device = "cpu",
    ) -> GraphTensors:
        order = np.lexsort((t, h, r))
        h, r, t, c = h[order], r[order], t[order], c[order]
        offsets = np.searchsorted(r, np.arange(n_relations + 1), side="left").astype(np.int64)
        as_t = lambda a, dt: torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)  # noqa: E731
        return cls(
            dataset,
            int(n_entities),
            int(n_relations),
            as_t(h, torch.int64),
            as_t(r, torch.int64),
            as_t(t, torch.int64),
            as_t(c, torch.float32),
            as_t(offsets, torch.int64),
        )

    @property
    def nnz(self) -> int:
        return int(self.conf.numel())

    @property
    def device(self) -> torch.device:
        return self.conf.device

    def relation(self, r: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(head, tail, conf) of relation r, sorted by (head, tail)."""
        a, b = int(self.rel_offsets[r]), int(self.rel_offsets[r + 1])
        return self.head[a:b], self.tail[a:b], self.conf[a:b]

    def to(self, device: str | torch.device) -> GraphTensors:
        mv = lambda x: x.to(device)  # noqa: E731
        return GraphTensors(
            self.dataset,
            self.n_entities,
            self.n_relations,
            mv(self.head),
            mv(self.rel),
            mv(self.tail),
            mv(self.conf),
            mv(self.rel_offsets),
        )

    def nbytes(self) -> int:
        return sum(
            x.element_size() * x.numel()
            for x in (self.head, self.rel, self.tail, self.conf, self.rel_offsets)
        )


def observed_graph(kg, which: str, device: str | torch.device = "cpu") -> GraphTensors:
    """The observed graph train|valid|test of a loaded data set (loaders.KGData) as tensors; on the CPU one
    per data set and graph while the data set stays loaded (its memo). Treat them as read-only."""
    memo = getattr(kg, "memo", None)
    cpu = torch.device(device).type == "cpu"
    got = memo.get(f"graph-tensors-{which}") if memo is not None and cpu else None
    if got is None:
        got = GraphTensors.from_frame(kg.graph(which), kg.n_entities, kg.n_relations, kg.name, device)
        if memo is not None and cpu:
            memo[f"graph-tensors-{which}"] = got
    return got
