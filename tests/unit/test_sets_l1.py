"""The ℓ1 ball and V-polytope sets: exact projections and linear-minimisation oracles against
brute force (docs/frank-wolfe.md)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from dpbench.core.sets import Ball, L1Ball, Polytope, project_l1_ball


def _kkt_l1(z: np.ndarray, x: np.ndarray, r: float) -> None:
    """x = Π_{‖·‖₁ ≤ r}(z) iff x feasible and z − x ∈ N_C(x): either x = z (inside), or
    z − x = τ·u with τ > 0, u ∈ ∂‖x‖₁ and ‖x‖₁ = r."""
    assert np.abs(x).sum() <= r * (1 + 1e-12)
    if np.abs(z).sum() <= r:
        np.testing.assert_array_equal(x, z)
        return
    assert np.abs(x).sum() == pytest.approx(r, rel=1e-12)
    d = z - x
    tau = np.max(np.abs(d))
    assert tau > 0
    on = np.abs(x) > 0
    np.testing.assert_allclose(d[on], tau * np.sign(x[on]), rtol=1e-9, atol=1e-12)
    assert np.all(np.abs(d[~on]) <= tau * (1 + 1e-12))


@pytest.mark.parametrize("p", [1, 2, 5, 40])
def test_l1_projection_satisfies_kkt_on_random_inputs(p: int) -> None:
    rng = np.random.default_rng(p)
    for r in (0.3, 1.0, 4.0):
        Z = rng.standard_normal((50, p)) * rng.choice([0.1, 1.0, 5.0], size=(50, 1))
        X = L1Ball(r).project(Z)
        for z, x in zip(Z, X):
            _kkt_l1(z, x, r)
            np.testing.assert_array_equal(project_l1_ball(z, r), x)  # batch == single


def test_l1_projection_matches_a_generic_qp_solver() -> None:
    rng = np.random.default_rng(7)
    for _ in range(5):
        z = rng.standard_normal(6) * 2
        # min ½‖x − z‖² s.t. ‖x‖₁ ≤ 1 via the split x = u − v, u, v ≥ 0
        fun = lambda w: 0.5 * np.sum((w[:6] - w[6:] - z) ** 2)  # noqa: E731
        res = minimize(fun, np.zeros(12), method="SLSQP", bounds=[(0, None)] * 12,
                       constraints=[{"type": "ineq", "fun": lambda w: 1.0 - w.sum()}],
                       options={"ftol": 1e-14, "maxiter": 500})
        np.testing.assert_allclose(L1Ball(1.0).project(z), res.x[:6] - res.x[6:], atol=1e-6)


def test_l1_ball_oracles() -> None:
    ball = L1Ball(2.0)
    assert ball.diameter == 4.0 and ball.l1_radius == 2.0 and ball.l1_diameter == 4.0
    V = ball.vertices(3)
    assert V.shape == (6, 3)
    rng = np.random.default_rng(1)
    for _ in range(20):
        g = rng.standard_normal(3)
        s = ball.lmo(g)
        assert float(s @ g) == pytest.approx(float(np.min(V @ g)))
        assert any(np.array_equal(s, v) for v in V)
    assert ball.contains(np.array([1.0, -1.0, 0.0])) and not ball.contains(np.array([1.5, 1.0, 0]))
    np.testing.assert_array_equal(ball.center(4), np.zeros(4))
    assert not Ball(1.0).has_vertices and L1Ball().has_vertices


def test_polytope_projection_against_brute_force() -> None:
    """Brute force: the projection onto conv(V) is the best projection onto the affine hull of
    some subset of vertices that lands inside the hull with non-negative weights."""
    rng = np.random.default_rng(3)
    V = rng.standard_normal((6, 3))
    P = Polytope(V)
    for _ in range(15):
        z = rng.standard_normal(3) * 2
        x = P.project(z)
        best = np.inf
        for k in range(1, 5):
            for sub in itertools.combinations(range(6), k):
                Q = V[list(sub)]
                K = np.block([[Q @ Q.T, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
                rhs = np.concatenate([Q @ z, [1.0]])
                w = np.linalg.lstsq(K, rhs, rcond=None)[0][:k]
                if np.all(w >= -1e-12):
                    best = min(best, float(np.sum((w @ Q - z) ** 2)))
        assert float(np.sum((x - z) ** 2)) == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert P.projection_gap(x, z) <= 1e-10


def test_polytope_lmo_diameter_and_l1_ball_agree() -> None:
    rng = np.random.default_rng(5)
    V = rng.standard_normal((7, 4))
    P = Polytope(V)
    for _ in range(10):
        g = rng.standard_normal(4)
        assert float(P.lmo(g) @ g) == pytest.approx(float(np.min(V @ g)))
    d = max(np.linalg.norm(a - b) for a in V for b in V)
    assert P.diameter == pytest.approx(d)
    assert P.l1_radius == pytest.approx(np.abs(V).sum(axis=1).max())
    # conv{±e_j} is the ℓ1 ball: both projections agree
    cross = Polytope(L1Ball(1.0).vertices(3))
    for _ in range(10):
        z = rng.standard_normal(3) * 2
        np.testing.assert_allclose(cross.project(z), L1Ball(1.0).project(z), atol=1e-9)
    assert cross.diameter == pytest.approx(2.0)
