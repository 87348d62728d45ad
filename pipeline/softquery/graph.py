"""The query graph of one conjunction: constant and variable nodes, atoms as (multi-)edges, self-loops,
connected components and cycle detection. The engine plans its elimination order from it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Var


@dataclass(frozen=True)
class QueryGraph:
    """Atoms of a conjunction classified by what they connect (indices into `conjunction.atoms`)."""

    conjunction: Conjunction

    @cached_property
    def variables(self) -> tuple[Var, ...]:
        return self.conjunction.variables()

    @cached_property
    def constant_atoms(self) -> tuple[int, ...]:
        """Atoms between two constants: a scalar each."""
        return tuple(i for i, a in enumerate(self.conjunction.atoms) if not a.variables())

    @cached_property
    def anchor_atoms(self) -> tuple[int, ...]:
        """Atoms between a constant and a variable: folded into the variable's state."""
        return tuple(
            i
            for i, a in enumerate(self.conjunction.atoms)
            if len(a.variables()) == 1 and (isinstance(a.head, Const) or isinstance(a.tail, Const))
        )

    @cached_property
    def self_loops(self) -> tuple[int, ...]:
        """Atoms r(?x, ?x): their diagonal is folded into ?x."""
        return tuple(
            i for i, a in enumerate(self.conjunction.atoms) if isinstance(a.head, Var) and a.head == a.tail
        )

    @cached_property
    def edges(self) -> dict[frozenset[Var], tuple[int, ...]]:
        """Atoms between two distinct variables, grouped by the unordered pair (multi-edges together)."""
        out: dict[frozenset[Var], list[int]] = {}
        for i, a in enumerate(self.conjunction.atoms):
            if isinstance(a.head, Var) and isinstance(a.tail, Var) and a.head != a.tail:
                out.setdefault(frozenset((a.head, a.tail)), []).append(i)
        return {k: tuple(v) for k, v in out.items()}

    def neighbours(self, v: Var) -> list[Var]:
        return [w for pair in self.edges for w in pair if v in pair and w != v]

    @cached_property
    def components(self) -> tuple[tuple[Var, ...], ...]:
        """Connected components of the variable graph; the one holding ?y (if any) comes first."""
        seen: set[Var] = set()
        comps = []
        order = sorted(self.variables, key=lambda v: v != FREE)
        for start in order:
            if start in seen:
                continue
            comp, stack = [], [start]
            seen.add(start)
            while stack:
                v = stack.pop()
                comp.append(v)
                for w in self.neighbours(v):
                    if w not in seen:
                        seen.add(w)
                        stack.append(w)
            comps.append(tuple(comp))
        return tuple(comps)

    @cached_property
    def has_cycle(self) -> bool:
        """A cycle among distinct variables (multi-edges and self-loops do not count: they are summed)."""
        n_edges = len(self.edges)
        return n_edges > len(self.variables) - len(self.components)

    def cycle_variables(self) -> tuple[Var, ...]:
        """Variables that lie on some cycle (2-core of the variable graph), ?y last."""
        deg = {v: len(self.neighbours(v)) for v in self.variables}
        alive = set(self.variables)
        changed = True
        while changed:
            changed = False
            for v in list(alive):
                if deg[v] <= 1:
                    alive.discard(v)
                    for w in self.neighbours(v):
                        if w in alive:
                            deg[w] -= 1
                    changed = True
        return tuple(sorted(alive, key=lambda v: (v == FREE, v.name)))

    def atom(self, i: int) -> Atom:
        return self.conjunction.atoms[i]
