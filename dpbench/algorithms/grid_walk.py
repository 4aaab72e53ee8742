"""A2-eff: BST14's polynomial-time exponential mechanism (Algorithms 5–7), uncertified.

Algorithm 7 = Algorithm 6 (A_eff-samp) on f = (ε/(6L‖C‖))·𝓛, η = nε/(6‖C‖), ε̃ = ε/3; Algorithm 6
retries Algorithm 5 (A_init-samp) m times; Algorithm 5 runs the lazy Applegate–Kannan grid walk
(A_cube-samp, Lemma 6.1) on the cube A ⊇ C with weight F = exp(−f̄ − ψ̄_α). Implemented for a
ball C = B(0, R) in p ≤ 3 with a **user-set** step count: the certified mixing time is
astronomical ([derived], docs/bst14.md "Derived constants": ≳ 10¹⁵ steps at n = 1000, p = 10), so
the release is only nominally ε-DP and the ledger says ``certified=False``. The audit path
(``run_batch``) runs many walks per compiled call (:func:`run_walks`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numba import njit

from ..core.algorithm import Algorithm, BatchRelease, Release
from ..core.errors import NotApplicable
from ..core.kernel import LossKernel
from ..core.params import Param
from ..core.problem import Dataset, Problem
from ..core.ratecard import RateCard
from ..core.sets import Ball
from ..core.time_limit import checkpoint
from ..numerics.kernels import kernel_arrays, sum_grad, sum_loss
from ..privacy.exact_loss import digest, epsilon_pieces, memo
from ..privacy.ledger import Charge, PrivacyLedger

MAX_DIM = 3
#: Projected-subgradient iterations of the convex Lipschitz extension outside C.
EXTENSION_ITERS = 50
_BLOCK = 200_000
#: Largest grid (cells of A) whose log-weights the batch path memoises (8 bytes a cell).
MEMO_CELLS = 1 << 21


@njit(cache=True)
def _norm(v):  # type: ignore[no-untyped-def]
    s = 0.0
    for j in range(v.shape[0]):
        s += v[j] * v[j]
    return math.sqrt(s)


# Not cached: it takes the kernel's dispatchers as arguments, which numba cannot key
# stably on disk (one new index entry per process, and a racy index under concurrent workers:
# "ReferenceError: underlying object has vanished").
@njit(cache=False)
def _log_weight(loss, grad, X, y, prm, cf, eta, alpha, R, theta, u, g, work, iters):  # type: ignore[no-untyped-def]
    """log F(θ) = −f̄(θ) − α·max(0, ‖θ‖/R − 1) with f = cf·Σℓ (Algorithm 5, steps 2–4).

    Outside C, f̄(θ) = min_{u∈C} f(u) + η‖θ − u‖ (Lemma 6.3) is computed by projected subgradient
    descent from Π_C(θ) (``iters`` steps R/√t, best value kept): an upper bound of the exact
    extension that converges to it.
    """
    p = theta.shape[0]
    nrm = _norm(theta)
    if nrm <= R:
        return -cf * sum_loss(loss, theta, X, y, prm)
    for j in range(p):
        u[j] = theta[j] * (R / nrm)
    best = cf * sum_loss(loss, u, X, y, prm) + eta * (nrm - R)
    for it in range(1, iters + 1):
        sum_grad(grad, u, X, y, prm, g, work)
        dist = 0.0
        for j in range(p):
            g[j] *= cf
            dist += (u[j] - theta[j]) ** 2
        dist = math.sqrt(dist)
        if dist > 0.0:
            for j in range(p):
                g[j] += eta * (u[j] - theta[j]) / dist
        gn = _norm(g)
        if gn == 0.0:
            break
        step = R / math.sqrt(it) / gn
        for j in range(p):
            u[j] -= step * g[j]
        un = _norm(u)
        if un > R:
            for j in range(p):
                u[j] *= R / un
        dist = 0.0
        for j in range(p):
            dist += (u[j] - theta[j]) ** 2
        val = cf * sum_loss(loss, u, X, y, prm) + eta * math.sqrt(dist)
        if val < best:
            best = val
    return -best - alpha * (nrm / R - 1.0)


# Not cached: it takes the kernel's dispatchers as arguments, which numba cannot key
# stably on disk (one new index entry per process, and a racy index under concurrent workers:
# "ReferenceError: underlying object has vanished").
@njit(cache=False)
def _walk(loss, grad, X, y, prm, cf, eta, alpha, R, gamma, lo, hi, steps, rng, idx, acc,  # type: ignore[no-untyped-def]
          iters, lean, table):
    """Lazy Applegate–Kannan walk on the cell centres (idx + ½)·γ of A = [−R, R]ᵖ (Lemma 6.1).

    Per step: stay with probability ½; else pick one of the 2p neighbours uniformly, stay if it
    leaves A, else move with probability min(1, F(v)/F(u)). ``idx`` is updated in place; ``acc``
    accumulates (Σ cell centres in C, number of such states) for ergodic averages.
    Returns the number of accepted moves.

    A step draws three numbers (a uniform for the lazy coin, the direction in 0..2p−1, the
    Metropolis uniform), used or not: the stream of a lone run. ``lean`` (the batch path,
    :func:`run_walks`) draws only what the step uses, and skips ``acc``: one uniform c gives the
    coin (c < ½) and the sign of a move (c < ¾: both dyadic cuts, exact), the axis is drawn only
    when p > 1, and the Metropolis uniform only for a downhill move (every uniform in [0, 1)
    accepts an uphill one). The same transition kernel.

    ``table`` (empty: none) memoises log F per cell, NaN until computed, at the flat index
    Σⱼ (idxⱼ − lo)·wʲ, w = hi − lo + 1: log F is a function of the cell, so walks on the same
    data share it (:func:`run_walks`) and take the values :func:`_log_weight` gives.
    """
    p = idx.shape[0]
    cur = np.empty(p)
    prop = np.empty(p)
    u = np.empty(p)
    g = np.empty(p)
    work = np.empty(p)
    memo = table.shape[0] > 0
    strides = np.empty(p, dtype=np.int64)
    flat = 0
    for j in range(p):
        cur[j] = (idx[j] + 0.5) * gamma
        strides[j] = (hi - lo + 1) ** j
        flat += (idx[j] - lo) * strides[j]
    if memo and not math.isnan(table[flat]):
        lw = table[flat]
    else:
        lw = _log_weight(loss, grad, X, y, prm, cf, eta, alpha, R, cur, u, g, work, iters)
        if memo:
            table[flat] = lw
    moves = 0
    for _ in range(steps):
        coin = rng.random()
        if lean:
            if coin < 0.5:
                continue
            axis = 0 if p == 1 else rng.integers(0, p)
            up = coin < 0.75
            v = -1.0
        else:
            move = rng.integers(0, 2 * p)
            v = rng.random()
            axis = move // 2
            up = move % 2 == 0
        if coin >= 0.5:
            nxt = idx[axis] + (1 if up else -1)
            if lo <= nxt <= hi:
                flat_new = flat + (strides[axis] if up else -strides[axis])
                if memo and not math.isnan(table[flat_new]):
                    lw_new = table[flat_new]
                else:
                    for j in range(p):
                        prop[j] = cur[j]
                    prop[axis] = (nxt + 0.5) * gamma
                    lw_new = _log_weight(loss, grad, X, y, prm, cf, eta, alpha, R, prop, u, g,
                                         work, iters)
                    if memo:
                        table[flat_new] = lw_new
                d = lw_new - lw
                if lean:
                    v = 0.0 if d >= 0.0 else rng.random()
                if v == 0.0 or math.log(v) < d:
                    idx[axis] = nxt
                    cur[axis] = (nxt + 0.5) * gamma
                    flat = flat_new
                    lw = lw_new
                    moves += 1
        if not lean and _norm(cur) <= R:
            for j in range(p):
                acc[j] += cur[j]
            acc[p] += 1.0
    return moves


@njit(cache=False)
def _walks(loss, grad, X, y, prm, cf, eta, alpha, R, gamma, lo, hi, steps, rng, idxs,  # type: ignore[no-untyped-def]
           iters, table):
    """:func:`_walk` (``lean``, sharing ``table``) for every row of ``idxs`` in turn, ``steps``
    steps each, in place: one compiled call advances many independent walks."""
    acc = np.zeros(idxs.shape[1] + 1)
    for r in range(idxs.shape[0]):
        _walk(loss, grad, X, y, prm, cf, eta, alpha, R, gamma, lo, hi, steps, rng, idxs[r], acc,
              iters, True, table)


def walk_constants(n: int, p: int, epsilon: float, L: float, R: float) -> dict[str, float]:
    """The constants of Algorithms 5–7 (and Lemma 6.1) for C = B(0, R), all public.

    Algorithm 7: cf = ε/(6L‖C‖), η = nε/(6‖C‖), ε̃ = ε/3. Algorithm 6: m = ⌈4η‖C‖ + p·log‖C‖ +
    log(1/(1 − e^{−ε̃/4}))⌉ tries of Algorithm 5 at ε̃/4, whose α = 3e^{2ε̃/4}(η‖C‖ + p) and cube
    sampler runs at (η + α, ε̃/8) with grid spacing γ = (ε̃/8)/(2(η + α)√p).
    """
    D = 2.0 * R
    eps_t = epsilon / 3.0
    eta = n * epsilon / (6.0 * D)
    eps5 = eps_t / 4.0
    alpha = 3.0 * math.exp(2.0 * eps5) * (eta * D + p)
    eps_cube = eps5 / 2.0
    gamma = eps_cube / (2.0 * (eta + alpha) * math.sqrt(p))
    m = 4.0 * eta * D + p * math.log(D) + math.log(1.0 / (1.0 - math.exp(-eps_t / 4.0)))
    return {"cf": epsilon / (6.0 * L * D), "eta": eta, "alpha": alpha, "gamma": gamma,
            "tries": float(max(1, math.ceil(m))), "eps_tilde": eps_t}


_NO_TABLE = np.empty(0)


def _cell_range(R: float, gamma: float) -> tuple[int, int]:
    """The indices lo..hi of the cells whose centres (idx + ½)·γ lie in A = [−R, R]."""
    return int(math.ceil(-R / gamma - 0.5)), int(math.floor(R / gamma - 0.5))


def run_walk(kern: LossKernel, data: Dataset, consts: dict[str, float], R: float, steps: int,
             rng: np.random.Generator, acc: np.ndarray | None = None) -> np.ndarray:
    """One A_cube-samp walk of ``steps`` steps from the cell at the origin; returns its cell centre.

    ``acc`` (length p + 1), when given, accumulates the in-C states (see :func:`_walk`).
    """
    p = data.p
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
    gamma = consts["gamma"]
    lo, hi = _cell_range(R, gamma)
    idx = np.zeros(p, dtype=np.int64)
    acc = np.zeros(p + 1) if acc is None else acc
    done = 0
    while done < steps:
        checkpoint()
        m = min(_BLOCK, steps - done)
        _walk(kern.loss, kern.grad, X, y, prm, consts["cf"], consts["eta"], consts["alpha"], R,
              gamma, lo, hi, m, rng, idx, acc, EXTENSION_ITERS, False, _NO_TABLE)
        done += m
    return (idx + 0.5) * gamma


def run_walks(kern: LossKernel, data: Dataset, consts: dict[str, float], R: float, steps: int,
              rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` independent walks of :func:`run_walk` (same chain, lean draws), as the rows of a
    (size, p) array of cell centres. The walks share a memo of the log-weights when the grid has
    at most ``MEMO_CELLS`` cells (:func:`_walk`). One compiled call (:func:`_walks`) advances up
    to ``_BLOCK // steps`` walks (at least one) by up to ``_BLOCK`` steps; ``checkpoint()`` runs
    between calls."""
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
    gamma = consts["gamma"]
    lo, hi = _cell_range(R, gamma)
    cells = (hi - lo + 1) ** data.p
    table = np.full(cells, np.nan) if cells <= MEMO_CELLS else _NO_TABLE
    idxs = np.zeros((int(size), data.p), dtype=np.int64)
    per_call = max(1, _BLOCK // max(steps, 1))
    for first in range(0, int(size), per_call):
        block = idxs[first:first + per_call]
        for done in range(0, steps, _BLOCK):
            checkpoint()
            _walks(kern.loss, kern.grad, X, y, prm, consts["cf"], consts["eta"], consts["alpha"],
                   R, gamma, lo, hi, min(_BLOCK, steps - done), rng, block, EXTENSION_ITERS,
                   table)
    return (idxs + 0.5) * gamma


#: Largest number of cells of a 1-D walk whose law :func:`walk_output_law` computes.
EXACT_MAX_CELLS = 20_000


def walk_output_law(kern: LossKernel, data: Dataset, consts: dict[str, float], R: float,
                    steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact law of :class:`ExpMechGridWalk`'s release at p = 1 [derived]: the ``edges``
    (m + 1,) of m intervals of [−R, R] on each of which the release has a constant density, and
    the logs of their masses (m,) (−∞ for none; the masses sum to 1).

    At p = 1 the cube A = [−R, R] is C, every cell centre (j + ½)γ (j = lo..hi) lies in C and
    log F = −cf·Σᵢ ℓ(centre; dᵢ) there (:func:`_log_weight`'s first branch). The lazy walk's
    kernel (:func:`_walk`): stay with probability ½; else move to j ± 1 with probability ¼ each,
    accepted with probability min(1, F(j ± 1)/F(j)), a move out of lo..hi staying put. Its law
    after ``steps`` steps from the cell j = 0 is π = e₀·Pˢ, computed by ``steps`` tridiagonal
    vector–matrix products (in logs, so that the far cells' tiny masses keep their exact ratios).
    A try jitters the centre uniformly over its cell [jγ, (j + 1)γ] and
    succeeds when the point lies in C, with probability a = Σⱼ πⱼ·|[jγ, (j+1)γ] ∩ C|/γ; the
    release is the first success among the m tries of Algorithm 6, else a uniform point of
    [−min(1, R), min(1, R)]. So its density is Σⱼ πⱼ·1[θ ∈ cell j]/γ·(1 − (1 − a)^m)/a plus
    (1 − a)^m times the uniform density, constant between consecutive cell edges, C's ends and
    ±min(1, R); the ends of C beyond the outermost cells carry the fallback's density only.
    """
    gamma = consts["gamma"]
    lo, hi = _cell_range(R, gamma)
    cells = np.arange(lo, hi + 1)
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
    centres = (cells + 0.5) * gamma
    log_f = np.array([-consts["cf"] * sum_loss(kern.loss, np.array([c]), X, y, prm)
                      for c in centres])
    up = np.zeros(cells.size)    # P(j → j + 1)
    down = np.zeros(cells.size)  # P(j → j − 1)
    up[:-1] = 0.25 * np.minimum(1.0, np.exp(log_f[1:] - log_f[:-1]))
    down[1:] = 0.25 * np.minimum(1.0, np.exp(log_f[:-1] - log_f[1:]))
    with np.errstate(divide="ignore"):
        log_stay, log_up, log_down = np.log(1.0 - up - down), np.log(up[:-1]), np.log(down[1:])
    # in logs: the far cells' masses (e^{−1000} and below) keep their ratios (the δ = 0 supremum)
    log_pi = np.full(cells.size, -np.inf)
    log_pi[-lo] = 0.0  # the cell j = 0
    moved = np.full(cells.size, -np.inf)
    for _ in range(int(steps)):
        nxt = log_pi + log_stay
        moved[0], moved[1:] = -np.inf, log_pi[:-1] + log_up
        nxt = np.logaddexp(nxt, moved)
        moved[-1], moved[:-1] = -np.inf, log_pi[1:] + log_down
        log_pi = np.logaddexp(nxt, moved)
    left, right = cells * gamma, (cells + 1) * gamma
    # exactly 1 for a cell within C (a rounded 1 − 1e−16 would invent fallback mass)
    inside = np.where((left >= -R) & (right <= R), 1.0,
                      np.clip((np.minimum(right, R) - np.maximum(left, -R)) / gamma, 0.0, 1.0))
    with np.errstate(divide="ignore"):
        # log(1 − a) from the cells that stick out of C only (exactly −∞ when no walk reaches
        # them, as at few steps: then no try ever fails)
        log_miss = float(np.logaddexp.reduce(log_pi + np.log1p(-inside)))
    tries = int(consts["tries"])
    log_fail = tries * log_miss
    miss = math.exp(log_miss)
    # Σ_{t<m} (1 − a)^t = (1 − (1 − a)^m)/a, computed without cancellation for a near 0 or 1
    success = float(np.sum(miss ** np.arange(tries)))
    half = min(1.0, R)
    edges = np.unique(np.clip(np.concatenate([left, right, [-R, R, -half, half]]), -R, R))
    mids = 0.5 * (edges[:-1] + edges[1:])
    widths = np.diff(edges)
    cell = np.clip(np.floor(mids / gamma).astype(np.int64) - lo, 0, cells.size - 1)
    # the ends of C beyond the outermost cells (|θ| > (hi + 1)γ when R is not a multiple of γ
    # away from a centre) are reached by the fallback only
    covered = (mids >= left[0]) & (mids <= right[-1])
    walk = np.where(covered, log_pi[cell] - math.log(gamma) + math.log(success), -np.inf)
    log_density = np.logaddexp(walk,
                               np.where(np.abs(mids) <= half, log_fail - math.log(2.0 * half),
                                        -np.inf))
    return edges, log_density + np.log(widths)


class ExpMechGridWalk(Algorithm):
    """BST14 Algorithm 7 (A_eff-exp-samp) with a user-set walk length; **uncertified** reference.

    Each of Algorithm 6's m tries runs Algorithm 5: the lazy Applegate–Kannan grid walk (Lemma 6.1;
    the lazy rule is the standard one, not written out in the paper, docs/bst14.md) on the cell
    centres of the cube A = [−R, R]ᵖ ⊇ C, started at the data-independent cell at the origin, with
    weight F = exp(−f̄ − ψ̄_α): f̄ the convex η-Lipschitz extension (Lemma 6.3) of f = (ε/(6L‖C‖))𝓛,
    ψ(θ) = ‖θ‖/R the Minkowski gauge of the ball and ψ̄_α = α·max(0, ψ − 1). The walk's point is
    jittered uniformly in its cell; the first try landing in C is released, else a uniform point of
    the ball B(0, min(1, R)) ⊆ C (Algorithm 6, step 4).

    Privacy: with the certified walk length t∞ (Lemma 6.2) the output is ε-DP (Thm 3.4; Lemma 6.6:
    ε/3 + 2ε/3). The ``steps`` used here are far fewer than t∞ (docs/bst14.md: ≳ 10¹⁵ at
    n = 1000, p = 10), so the release is nominal ε-DP and the ledger is uncertified. Needs a
    compiled kernel (:meth:`~dpbench.core.problem.Problem.kernel`), C = Ball(R) and p ≤ 3. Non-isotropic
    radii (R < 1) are not rescaled; the fallback uses the ball of radius min(1, R).
    """

    name: ClassVar[str] = "exp_mech_grid_walk"
    summary: ClassVar[str] = "BST14 Alg. 5-7 grid-walk exponential mechanism, p <= 3, uncertified"
    citation: ClassVar[str] = ("Bassily, Smith, Thakurta (FOCS 2014), Algorithms 5-7, Thm 3.4; "
                               "Applegate-Kannan (1991) grid walk")
    privacy: ClassVar[str] = "pure"
    requires: ClassVar[tuple[str, ...]] = ("convex", "lipschitz")
    version: ClassVar[str] = "1"
    #: Generic harness: 100 walk steps. With ``run_batch`` the harness audits 10⁶ runs per side and
    #: compares 4000 batch rows with 4000 looped runs; at the default 20 000 steps (p = 3, no
    #: memo of the weights) that is hours and minutes. The walk length is public and the nominal
    #: claim does not depend on it (the audit suite runs the default, suites/audit.yaml).
    check_settings: ClassVar[dict[str, Any]] = {"params": {"steps": 100}}
    params: ClassVar[dict[str, Param]] = {
        "steps": Param(20000, kind="int", low=1, doc="grid-walk steps per try (user-set, uncertified)"),
    }

    def cost(self, n: int, p: int) -> float:
        return float(self.steps) * n * p

    def rate_card(self) -> RateCard:
        """Thm 3.4: the exponential mechanism's O(pL‖C‖/ε) (sum scale), average scale here."""
        return RateCard(
            expression="p*L*D/(n*epsilon)",
            exponents={"n": -1, "p": 1, "epsilon": -1},
            citation="BST14 Thm 3.4 (efficient exponential mechanism)",
            regime="only with the certified walk length; p <= 3 here",
            notes="targets the exponential mechanism at ε/3, so the constant is 3× that of exp_mech",
        )

    def run(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator,
    ) -> Release:
        n, p = data.n, data.p
        constraint = problem.constraint
        kern, R, consts = self._setup(data, problem, epsilon)
        tries = int(consts["tries"])
        theta: np.ndarray | None = None
        used = 0
        for _ in range(tries):
            used += 1
            cell = run_walk(kern, data, consts, R, self.steps, rng)
            cand = cell + consts["gamma"] * (rng.random(p) - 0.5)
            if constraint.contains(cand, tol=0.0):
                theta = cand
                break
        fallback = theta is None
        if theta is None:
            g = rng.standard_normal(p)
            theta = min(1.0, R) * rng.random() ** (1.0 / p) * g / np.linalg.norm(g)
        info: dict[str, Any] = dict(
            consts, steps=self.steps, tries_used=used, fallback=fallback, certified=False,
            privacy_note=("nominal ε-DP: the certified walk length t∞ of Lemma 6.2 is "
                          "astronomically larger (docs/bst14.md, 'Derived constants')"))
        return Release(theta=np.asarray(theta, dtype=float), ledger=self._ledger(epsilon),
                       func_queries=n * self.steps * used, iterations=self.steps * used, info=info)

    def run_batch(
        self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
        rng: np.random.Generator, size: int,
    ) -> BatchRelease:
        """``size`` independent runs of :meth:`run`: Algorithm 6's tries for all rows at once —
        each try runs the walks of the rows still without a release (:func:`run_walks`: the
        same chain, from the same cell, for the same ``steps``), jitters them in their cells and
        releases the rows that land in C; rows left after the m tries get a uniform point of
        B(0, min(1, R)). Each row has :meth:`run`'s law (its tries use fresh draws)."""
        p = data.p
        constraint = problem.constraint
        kern, R, consts = self._setup(data, problem, epsilon)
        thetas = np.empty((int(size), p))
        pending = np.arange(int(size))
        for _ in range(int(consts["tries"])):
            if pending.size == 0:
                break
            cells = run_walks(kern, data, consts, R, self.steps, rng, pending.size)
            cand = cells + consts["gamma"] * (rng.random((pending.size, p)) - 0.5)
            inside = np.asarray(constraint.contains(cand, tol=0.0), dtype=bool)
            thetas[pending[inside]] = cand[inside]
            pending = pending[~inside]
        if pending.size:
            g = rng.standard_normal((pending.size, p))
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            thetas[pending] = g * (min(1.0, R) * rng.random(pending.size) ** (1.0 / p))[:, None]
        return BatchRelease(thetas, self._ledger(epsilon))

    def _exact_law(self, data: Dataset, problem: Problem,
                   epsilon: float) -> tuple[np.ndarray, np.ndarray] | None:
        """:func:`walk_output_law` at p = 1 (``None`` for p ≥ 2, where the walk's state space
        is too large for its transition matrix, or beyond :data:`EXACT_MAX_CELLS` cells)."""
        if data.p != 1:
            return None
        kern, R, consts = self._setup(data, problem, epsilon)
        lo, hi = _cell_range(R, consts["gamma"])
        if hi - lo + 1 > EXACT_MAX_CELLS:
            return None
        return memo(digest("grid walk law", self, problem, data, epsilon),
                    lambda: walk_output_law(kern, data, consts, R, self.steps))

    def exact_epsilon(self, d0: Dataset, d1: Dataset, problem: Problem, *, epsilon: float,
                      delta: float) -> float | None:
        """The exact ε(δ) of the walk's release at p = 1 (:func:`walk_output_law`: both laws
        are constant on the same intervals, so the hockey sticks are finite sums,
        :func:`dpbench.privacy.exact_loss.epsilon_pieces`); ``None`` for p ≥ 2. Its nominal
        claim is not a theorem at this walk length: the value says what the walk really
        spends."""
        law0 = self._exact_law(d0, problem, epsilon)
        law1 = self._exact_law(d1, problem, epsilon)
        if law0 is None or law1 is None:
            return None
        return epsilon_pieces(law0[1], law1[1], delta, log=True)

    def log_density_ratio(self, thetas: np.ndarray, d0: Dataset, d1: Dataset, problem: Problem,
                          *, epsilon: float, delta: float) -> np.ndarray | None:
        """log p_D(θ) − log p_D′(θ) of the walk's release at p = 1 (piecewise constant on the
        intervals of :func:`walk_output_law`); ``None`` for p ≥ 2."""
        law0 = self._exact_law(d0, problem, epsilon)
        law1 = self._exact_law(d1, problem, epsilon)
        if law0 is None or law1 is None:
            return None
        edges, log_m0 = law0
        with np.errstate(invalid="ignore"):
            ratio = np.where(np.isneginf(log_m0) & np.isneginf(law1[1]), 0.0, log_m0 - law1[1])
        t = np.atleast_2d(np.asarray(thetas, dtype=float))[:, 0]
        piece = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, ratio.size - 1)
        return ratio[piece]

    def _setup(self, data: Dataset, problem: Problem,
               epsilon: float) -> tuple[LossKernel, float, dict[str, float]]:
        """(the compiled kernel, R, the public constants of Algorithms 5–7); not applicable
        outside p ≤ 3, C = Ball(R), a compiled kernel and an ε whose α fits a float."""
        n, p = data.n, data.p
        constraint = problem.constraint
        kern = problem.kernel()
        if p > MAX_DIM or not isinstance(constraint, Ball) or kern is None:
            raise NotApplicable(f"{self.name}: needs p <= {MAX_DIM}, C = Ball(R) and a compiled "
                                f"kernel; got p={p}, C={type(constraint).__name__}")
        R = float(constraint.radius)
        try:
            consts = walk_constants(n, p, epsilon, float(problem.lipschitz), R)
        except OverflowError:
            raise NotApplicable(f"{self.name}: ε = {epsilon:g} is too large for the walk: its "
                                "α = 3e^{ε/6}(η‖C‖ + p) overflows a float") from None
        return kern, R, consts

    def _ledger(self, epsilon: float) -> PrivacyLedger:
        return PrivacyLedger.from_charges(Charge(
            "grid-walk exponential mechanism (nominal ε-DP, uncertified walk length)",
            float(epsilon), 0.0, "BST14 Thm 3.4 (needs the certified t∞)", certified=False))
