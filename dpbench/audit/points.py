"""Audit points and their configurations: what a worker needs to run a batch (small, picklable).

An :class:`AuditPoint` is one (audit, algorithm, problem, grid point, canary) of a suite's
``audits:``; its :class:`Config` list is what its search tries (docs/audit.md, "The search"):
the canaries (every applicable one of :func:`dpbench.core.neighbours.search_canaries` for the
canary ``search``), crossed with the values of the public parameters the audit leaves open
(``search:``), at most :data:`MAX_CONFIGS` of them (a deterministic sample beyond).

Identities (docs/audit.md, "Determinism"): a neighbouring pair is keyed by the problem, (n, p)
and the canary only — every mechanism of an audit, and every audit of a suite, meets the same
pairs — and a batch by the point, the configuration and its key in the store.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.algorithm import Algorithm
from ..core.grid import GridPoint
from ..core.neighbours import NeighbourPair, neighbouring_pair
from ..core.params import identity_params
from ..core.problem import Problem
from ..core.seeding import make_rng, stable_hash

__all__ = ["MAX_CONFIGS", "AuditPoint", "Config", "pair_identity"]

#: Most configurations a point's search tries.
MAX_CONFIGS = 24


@dataclass(frozen=True)
class Config:
    """One configuration of a point: the canary, the grid values (n, p, ε, δ) and the algorithm
    parameters set by the search (``params``, sorted (name, value) pairs)."""

    canary: str
    n: int
    p: int
    epsilon: float
    delta: float
    params: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"canary": self.canary, "n": self.n, "p": self.p, "epsilon": self.epsilon,
                "delta": self.delta, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Config:
        return cls(str(d["canary"]), int(d["n"]), int(d["p"]), float(d["epsilon"]),
                   float(d["delta"]), tuple(sorted(dict(d.get("params") or {}).items())))

    @property
    def point(self) -> GridPoint:
        """The grid point the configuration runs the mechanism at (its budget: the audit
        refuses a pure mechanism at δ > 0 and an (ε, δ) one at δ = 0 rather than mapping δ)."""
        return GridPoint(self.n, self.p, self.epsilon, self.delta)

    def describe(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self.params)
        return (f"{self.canary}, n={self.n}, p={self.p}, ε={self.epsilon:g}, "
                f"δ={self.delta:g}{extra}")


def pair_identity(problem_name: str, problem_cls: type[Problem], problem_params: Mapping[str, Any],
                  n: int, p: int, canary: str) -> dict[str, Any]:
    """The identity of a neighbouring pair's data: problem, (n, p), canary — nothing else."""
    return {"pair": {"problem": problem_name,
                     "params": identity_params(problem_cls.params, dict(problem_params))},
            "n": int(n), "p": int(p), "canary": canary}


@dataclass(frozen=True)
class AuditPoint:
    """Everything a worker needs to run the batches of one audit point."""

    audit: str
    index: tuple[int, ...]               # position along the audit's point dims
    algorithm_label: str
    algorithm_cls: type[Algorithm]
    algorithm_name: str
    algorithm_params: dict[str, Any]
    problem_label: str
    problem_cls: type[Problem]
    problem_name: str
    problem_params: dict[str, Any]
    point: dict[str, Any]                # the grid values of the point (searched axes absent)
    canary: str                          # a canary, or "search"
    configs: tuple[Config, ...]
    budget_s: float
    runs: int | None
    selection_runs: int | None
    root_seed: int
    expect: str = "private"

    def identity(self) -> dict[str, Any]:
        return {"audit": self.audit, "algorithm": self.algorithm_name,
                "params": identity_params(self.algorithm_cls.params, self.algorithm_params),
                "problem": {"name": self.problem_name,
                            "params": identity_params(self.problem_cls.params,
                                                      self.problem_params)},
                "point": self.point, "canary": self.canary}

    def batch_rng(self, config: int, key: str) -> np.random.Generator:
        return make_rng({**self.identity(), "config": self.configs[config].to_dict(),
                         "batch": key}, self.root_seed)

    def problem(self) -> Problem:
        return self.problem_cls(**self.problem_params)

    def algorithm(self, config: int) -> Algorithm:
        return self.algorithm_cls(**{**self.algorithm_params, **dict(self.configs[config].params)})

    def pair_key(self, config: int) -> str:
        c = self.configs[config]
        return stable_hash([pair_identity(self.problem_name, self.problem_cls,
                                          self.problem_params, c.n, c.p, c.canary),
                            self.root_seed, self.problem_cls.version])

    def make_pair(self, config: int) -> NeighbourPair:
        c = self.configs[config]
        rng = make_rng(pair_identity(self.problem_name, self.problem_cls, self.problem_params,
                                     c.n, c.p, c.canary), self.root_seed)
        return neighbouring_pair(self.problem(), c.n, c.p, c.canary, rng)


def expand_configs(canaries: tuple[str, ...], point: Mapping[str, Any],
                   search: Mapping[str, list[Any]], identity: Any, root_seed: int
                   ) -> list[Config]:
    """Every configuration of a point, in a fixed order: each canary crossed with each
    combination of the searched values; more than :data:`MAX_CONFIGS` are sampled without
    replacement by a generator keyed by the point's ``identity`` (deterministic)."""
    axes = [a for a in ("n", "p", "epsilon", "delta") if a in search]
    params = [k for k in search if k not in axes]
    combos = list(itertools.product(*(search[k] for k in axes + params)))
    out = []
    for canary in canaries:
        for combo in combos or [()]:
            values = dict(zip(axes + params, combo))
            out.append(Config(canary, int(values.get("n", point.get("n", 0))),
                              int(values.get("p", point.get("p", 0))),
                              float(values.get("epsilon", point.get("epsilon", 0.0))),
                              float(values.get("delta", point.get("delta", 0.0))),
                              tuple(sorted((k, values[k]) for k in params))))
    if len(out) > MAX_CONFIGS:
        rng = make_rng({"configs": identity}, root_seed)
        keep = np.sort(rng.choice(len(out), MAX_CONFIGS, replace=False))
        out = [out[i] for i in keep]
    return out
