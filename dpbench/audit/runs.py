"""Running one audit batch: the mechanism many times on D and on D′, scored on a fixed direction.

Run r of a batch uses two independent child generators, one for D and one for D′, spawned from
the batch generator (:meth:`numpy.random.Generator.spawn`, i.e. ``SeedSequence.spawn``: streams
independent by construction, never shared between runs, sides or batches), so a batch is a
deterministic function of its generator. The score of a release θ is ⟨θ, direction⟩ with the
pair's direction fixed before any run.

The releases of one side come from the mechanism's vectorised path when it has one
(:meth:`~dpbench.core.algorithm.Algorithm.release_batch`: all of a side's ``runs`` releases from
one child generator of the batch, child 0 for D and child 1 for D′), otherwise from
:meth:`~dpbench.core.algorithm.Algorithm.release_many`: the optional ``run_many`` (the
data-dependent, noise-free work done once; each release equal to ``run`` with its generator) or
a loop over ``run``. Every release is checked like
:meth:`~dpbench.core.algorithm.Algorithm.release` (docs/plugins.md, 'Fast paths for audits').
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.algorithm import Algorithm
from ..core.errors import NotApplicable
from ..core.neighbours import NeighbourPair, canary_not_applicable_reason
from ..core.problem import Problem
from ..privacy.ledger import PrivacyLedger
from ..privacy.profile import PROFILE_EPSILONS

__all__ = ["AuditBatch", "run_audit_batch"]


@dataclass
class AuditBatch:
    """Scores of one batch (``runs`` releases on each side) and the privacy the ledgers claim.

    Claims are the maximum over the batch's runs (they must agree: a ledger whose ε depends on
    the data would itself leak); ``mu_claimed`` is NaN when some ledger has no GDP claim;
    ``certified`` is False when any ledger is nominal only. ``profile_delta`` is the claimed
    privacy profile (:attr:`~dpbench.privacy.ledger.PrivacyLedger.claimed_profile`) read on
    :data:`~dpbench.privacy.profile.PROFILE_EPSILONS`, the largest δ over the batch's ledgers.
    """

    scores0: np.ndarray
    scores1: np.ndarray
    epsilon_claimed: float
    delta_claimed: float
    mu_claimed: float
    certified: bool
    profile_delta: np.ndarray


def _claims(ledgers: Sequence[PrivacyLedger]) -> tuple[float, float, float, bool]:
    eps = max(float(ledger.epsilon) for ledger in ledgers)
    delta = max(float(ledger.delta) for ledger in ledgers)
    mus = [ledger.gdp_mu for ledger in ledgers]
    mu = math.nan if any(m is None for m in mus) else max(float(m) for m in mus)  # type: ignore[arg-type]
    certified = all(bool(ledger.certified) for ledger in ledgers)
    return eps, delta, mu, certified


def _profile_delta(ledgers: Sequence[PrivacyLedger]) -> np.ndarray:
    """The weakest claimed profile of the ledgers (they agree unless a ledger is data-dependent)."""
    distinct = {(led.epsilon, led.delta, led.gdp_mu, led.profile): led for led in ledgers}
    return np.max([led.claimed_profile.delta_at(PROFILE_EPSILONS) for led in distinct.values()],
                  axis=0)


def run_audit_batch(algorithm: Algorithm, problem: Problem, pair: NeighbourPair, *,
                    epsilon: float, delta: float, runs: int,
                    rng: np.random.Generator) -> AuditBatch:
    """``runs`` releases on ``pair.d0`` and on ``pair.d1``, scored by ⟨θ, pair.direction⟩.

    Deterministic given ``rng``: with a vectorised path it spawns 2 children (D, D′), otherwise
    2·``runs`` children (run r: child 2r for D, 2r + 1 for D′). Raises :class:`NotApplicable` when the pair's canary does not apply to the algorithm
    (``outlier`` without ``clips_gradients``) or the algorithm cannot run on the problem.
    """
    if not (isinstance(runs, (int, np.integer)) and runs >= 1):
        raise ValueError(f"runs must be an integer >= 1, got {runs!r}")
    reason = canary_not_applicable_reason(algorithm, pair.canary)
    if reason is not None:
        raise NotApplicable(reason)
    u = np.asarray(pair.direction, dtype=float)
    if algorithm._has_batch_path():
        c0, c1 = rng.spawn(2)
        b0 = algorithm.release_batch(pair.d0, problem, epsilon=epsilon, delta=delta, rng=c0,
                                     size=int(runs))
        b1 = algorithm.release_batch(pair.d1, problem, epsilon=epsilon, delta=delta, rng=c1,
                                     size=int(runs))
        if b0 is not None and b1 is not None:
            ledgers = [b0.ledger, b1.ledger]
            return AuditBatch(np.ascontiguousarray(b0.thetas @ u, dtype=np.float64),
                              np.ascontiguousarray(b1.thetas @ u, dtype=np.float64),
                              *_claims(ledgers), _profile_delta(ledgers))
    children = rng.spawn(2 * int(runs))
    rel0 = algorithm.release_many(pair.d0, problem, epsilon=epsilon, delta=delta,
                                  rngs=children[0::2])
    rel1 = algorithm.release_many(pair.d1, problem, epsilon=epsilon, delta=delta,
                                  rngs=children[1::2])
    scores0 = np.array([float(np.dot(r.theta, u)) for r in rel0], dtype=np.float64)
    scores1 = np.array([float(np.dot(r.theta, u)) for r in rel1], dtype=np.float64)
    ledgers = [r.ledger for r in rel0 + rel1]
    return AuditBatch(scores0, scores1, *_claims(ledgers), _profile_delta(ledgers))
