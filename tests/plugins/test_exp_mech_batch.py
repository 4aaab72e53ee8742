"""The vectorised audit paths ``run_batch`` of the discretised exponential mechanisms: A2-net
(``exp_mech_net``: categorical draws on the net) and A2-eff (``exp_mech_grid_walk``: many lazy
grid walks per compiled call, lean draws, a shared memo of the log-weights).

The audit instance is suites/audit.yaml ``pure_discretised``: lb_lin, p = 1, n ∈ {2, 5}, ε = 1,
δ = 0, the sphere canary. Statistical checks use fixed seeds (deterministic) and KS p > 1e-3; a
batch path that breaks the law (a doubled temperature, a walk twice as long) fails the harness's
``check_release_batch``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from scipy.stats import ks_2samp

from dpbench.algorithms import grid_walk
from dpbench.algorithms.exp_mech_net import ExpMechNet, categorical_draws
from dpbench.algorithms.grid_walk import ExpMechGridWalk, run_walks, walk_constants
from dpbench.core.algorithm import Algorithm, BatchRelease
from dpbench.core.neighbours import neighbouring_pair
from dpbench.numerics.kernels import kernel_arrays
from dpbench.problems.lb_lin import LBLin
from dpbench.testing import check_dimension, check_release_batch

EPS = 1.0


# The registered settings (net: p = 2, spacing 0.05; walk: p = 3, 100 steps, a grid too large
# to memoise) run check_release_batch in tests/plugins/test_plugin_harness.py; here the audit's
# dimension p = 1: the default net (spacing 0.01) and a walk on a memoised grid.
@pytest.mark.parametrize("alg", [ExpMechNet(), ExpMechGridWalk(steps=2000)],
                         ids=["net", "grid_walk"])
def test_check_release_batch_passes_at_the_audit_dimension(alg: Algorithm) -> None:
    assert type(alg)._has_batch_path()
    with check_dimension(1):
        check_release_batch(alg, LBLin())


def _same_law(alg: Algorithm, data: object, runs: int, seed: int) -> None:
    prob = LBLin()
    out = alg.release_batch(data, prob, epsilon=EPS, delta=0.0,  # type: ignore[arg-type]
                            rng=np.random.default_rng(seed), size=runs)
    assert out is not None
    loop = alg.release_many(data, prob, epsilon=EPS, delta=0.0,  # type: ignore[arg-type]
                            rngs=np.random.default_rng(seed + 1).spawn(runs))
    assert out.ledger == loop[0].ledger
    ref = np.stack([r.theta for r in loop])
    for j in range(ref.shape[1]):
        assert ks_2samp(out.thetas[:, j], ref[:, j]).pvalue > 1e-3


@pytest.mark.parametrize("n", [2, 5])
def test_net_audit_instance(n: int) -> None:
    """4000 batch rows vs 4000 runs on both datasets of the sphere canary's pair."""
    pair = neighbouring_pair(LBLin(), n, 1, "sphere", np.random.default_rng(n))
    for k, data in enumerate((pair.d0, pair.d1)):
        _same_law(ExpMechNet(), data, 4000, 10 * n + k)


def test_grid_walk_audit_instance() -> None:
    """The default 20 000-step walk at n = 2, p = 1 (D of the sphere pair): 1000 vs 1000."""
    pair = neighbouring_pair(LBLin(), 2, 1, "sphere", np.random.default_rng(2))
    _same_law(ExpMechGridWalk(), pair.d0, 1000, 5)


def test_categorical_draws_law() -> None:
    """Frequencies within 4 binomial s.e. of the probabilities; zero-mass points never drawn."""
    logp = np.array([np.log(0.1), -np.inf, np.log(0.25), np.log(0.05), np.log(0.6)])
    idx = categorical_draws(logp, np.random.default_rng(0), 200_000)
    freq = np.bincount(idx, minlength=5) / idx.size
    prob = np.exp(logp)
    assert freq[1] == 0.0
    assert np.all(np.abs(freq - prob) <= 4 * np.sqrt(prob * (1 - prob) / idx.size))


def _walk_setup(n: int, p: int, gamma: float | None = None):  # type: ignore[no-untyped-def]
    prob = LBLin()
    data = prob.generate(n, p, np.random.default_rng(0))
    consts = walk_constants(n, p, EPS, 1.0, 1.0)
    if gamma is not None:
        consts = dict(consts, gamma=gamma)
    return prob, data, consts


def test_grid_walk_memo_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of log F holds the values _log_weight computes, so with and without it the
    batch walks are bit-identical (p = 2: cells outside C use the Lemma 6.3 extension)."""
    prob, data, consts = _walk_setup(4, 2, gamma=0.05)
    memo = run_walks(prob.kernel(), data, consts, 1.0, 3000, np.random.default_rng(1), 300)
    monkeypatch.setattr(grid_walk, "MEMO_CELLS", 0)
    plain = run_walks(prob.kernel(), data, consts, 1.0, 3000, np.random.default_rng(1), 300)
    assert np.array_equal(memo, plain)
    assert len(np.unique(memo, axis=0)) > 50


def test_grid_walk_batch_reaches_the_stationary_law() -> None:
    """Lean walks keep the lazy walk's kernel, whose stationary law is ∝ F over the cells of A
    (Lemma 6.1). On a coarse grid (γ = 0.1, 20×20 cells, relaxation ~10³ steps) the end points
    of 3000 walks of 20 000 steps, all from the origin, match 3000 draws from the enumerated law
    (F from _log_weight on every cell, the extension outside C included): KS p > 1e-3 on
    ⟨θ, s⟩ and on each coordinate."""
    prob, data, consts = _walk_setup(24, 2, gamma=0.1)
    kern = prob.kernel()
    ends = run_walks(kern, data, consts, 1.0, 20_000, np.random.default_rng(2), 3000)
    lo, hi = grid_walk._cell_range(1.0, 0.1)
    axis = (np.arange(lo, hi + 1) + 0.5) * 0.1
    cells = np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
    X, y = kernel_arrays(data)
    prm = np.ascontiguousarray(kern.prm, dtype=np.float64)
    scratch = [np.empty(2) for _ in range(3)]
    logf = np.array([grid_walk._log_weight(kern.loss, kern.grad, X, y, prm, consts["cf"],
                                           consts["eta"], consts["alpha"], 1.0, c, *scratch,
                                           grid_walk.EXTENSION_ITERS) for c in cells])
    w = np.exp(logf - logf.max())
    exact = cells[np.random.default_rng(3).choice(len(cells), size=3000, p=w / w.sum())]
    s = data.X.sum(axis=0)
    assert ks_2samp(ends @ s, exact @ s).pvalue > 1e-3
    for j in range(2):
        assert ks_2samp(ends[:, j], exact[:, j]).pvalue > 1e-3


class HotNetBatch(ExpMechNet):
    """DELIBERATELY BROKEN: the batch draws at twice the temperature k (ledger unchanged)."""

    name: ClassVar[str] = "hot_net_batch"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        grid, _, logp = self._net(data, problem, epsilon)
        return BatchRelease(grid[categorical_draws(2 * logp, rng, size)], self._ledger(epsilon))


class LongWalkBatch(ExpMechGridWalk):
    """DELIBERATELY BROKEN: the batch walks twice the steps of run (a walk that ignores the
    lazy coin moves as fast)."""

    name: ClassVar[str] = "long_walk_batch"

    def run_batch(self, data, problem, *, epsilon, delta, rng, size):  # type: ignore[no-untyped-def]
        kern, R, consts = self._setup(data, problem, epsilon)
        cells = run_walks(kern, data, consts, R, 2 * self.steps, rng, size)
        thetas = problem.constraint.project(
            cells + consts["gamma"] * (rng.random(cells.shape) - 0.5))
        return BatchRelease(thetas, self._ledger(epsilon))


@pytest.mark.parametrize("alg", [HotNetBatch(), LongWalkBatch(steps=100)], ids=["net", "walk"])
def test_broken_batch_paths_fail_the_check(alg: Algorithm) -> None:
    with check_dimension(1), pytest.raises(AssertionError, match="do not have run's law"):
        check_release_batch(alg, LBLin())
