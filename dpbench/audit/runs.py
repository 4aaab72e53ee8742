"""Running one audit batch: the mechanism many times on D and on D′, scored on a fixed direction.

Run r of a batch uses two independent child generators, one for D and one for D′, spawned from
the batch generator (:meth:`numpy.random.Generator.spawn`, i.e. ``SeedSequence.spawn``: streams
independent by construction, never shared between runs, sides or batches), so a batch is a
deterministic function of its generator. The score of a release θ is ⟨θ, direction⟩ with the
pair's direction fixed before any run.

The releases of one side come from :meth:`~dpbench.core.algorithm.Algorithm.release_many`: the
mechanism's optional fast path ``run_many`` (the data-dependent, noise-free work done once; each
release equal to ``run`` with its generator) or a loop over ``run``, every release checked like
:meth:`~dpbench.core.algorithm.Algorithm.release` (docs/plugins.md, 'Fast path for audits').
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.algorithm import Algorithm, Release
from ..core.errors import NotApplicable
from ..core.neighbours import NeighbourPair, canary_not_applicable_reason
from ..core.problem import Problem

__all__ = ["AuditBatch", "run_audit_batch"]


@dataclass
class AuditBatch:
    """Scores of one batch (``runs`` releases on each side) and the privacy the ledgers claim.

    Claims are the maximum over the batch's runs (they must agree: a ledger whose ε depends on
    the data would itself leak); ``mu_claimed`` is NaN when some ledger has no GDP claim;
    ``certified`` is False when any ledger is nominal only.
    """

    scores0: np.ndarray
    scores1: np.ndarray
    epsilon_claimed: float
    delta_claimed: float
    mu_claimed: float
    certified: bool


def _claims(releases: Sequence[Release]) -> tuple[float, float, float, bool]:
    eps = max(float(r.ledger.epsilon) for r in releases)
    delta = max(float(r.ledger.delta) for r in releases)
    mus = [r.ledger.gdp_mu for r in releases]
    mu = math.nan if any(m is None for m in mus) else max(float(m) for m in mus)  # type: ignore[arg-type]
    certified = all(bool(r.ledger.certified) for r in releases)
    return eps, delta, mu, certified


def run_audit_batch(algorithm: Algorithm, problem: Problem, pair: NeighbourPair, *,
                    epsilon: float, delta: float, runs: int,
                    rng: np.random.Generator) -> AuditBatch:
    """``runs`` releases on ``pair.d0`` and on ``pair.d1``, scored by ⟨θ, pair.direction⟩.

    Deterministic given ``rng``: it spawns 2·``runs`` children (run r: child 2r for D, 2r + 1 for
    D′). Raises :class:`NotApplicable` when the pair's canary does not apply to the algorithm
    (``outlier`` without ``clips_gradients``) or the algorithm cannot run on the problem.
    """
    if not (isinstance(runs, (int, np.integer)) and runs >= 1):
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")
    reason = canary_not_applicable_reason(algorithm, pair.canary)
    if reason is not None:
        raise NotApplicable(reason)
    children = rng.spawn(2 * int(runs))
    rel0 = algorithm.release_many(pair.d0, problem, epsilon=epsilon, delta=delta,
                                  rngs=children[0::2])
    rel1 = algorithm.release_many(pair.d1, problem, epsilon=epsilon, delta=delta,
                                  rngs=children[1::2])
    u = np.asarray(pair.direction, dtype=float)
    scores0 = np.array([float(np.dot(r.theta, u)) for r in rel0], dtype=np.float64)
    scores1 = np.array([float(np.dot(r.theta, u)) for r in rel1], dtype=np.float64)
    eps, dlt, mu, cert = _claims(rel0 + rel1)
    return AuditBatch(scores0, scores1, eps, dlt, mu, cert)
