"""Exact output laws and ε(δ) of the noisy iterative mechanisms (the audit's "true ε").

:mod:`dpbench.numerics.line_law` (atoms + Chebyshev density, projected Gaussian steps, exact
hockey stick) is checked against closed forms (a projected Gaussian, the Balle–Wang Gaussian
hockey stick, the dominating pair of :mod:`dpbench.privacy.hockey_stick`) and against an
independent brute-force propagation on a uniform grid; every mechanism's law is checked against
a Monte Carlo sample of its own ``release_batch`` (χ² over bins and atoms at a small level, fixed
seeds, so deterministic), and private Frank–Wolfe's enumeration against the softmax in closed
form. The designated audit instances (docs/audit.md, "Designated instances") are pinned here
with their true ε.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import chi2, norm

from dpbench.core.neighbours import neighbouring_pair
from dpbench.core.registry import get_algorithm, get_problem
from dpbench.numerics import line_law as ll
from dpbench.privacy.gaussian import gdp_delta, gdp_epsilon
from dpbench.privacy.hockey_stick import mixture_hockey_stick

#: The designated instances: (algorithm, params, problem, params, canary, n, ε, δ, true ε).
DESIGNATED: dict[str, tuple[Any, ...]] = {
    "noisy_sgd_lipschitz": ("noisy_sgd", {"sigma_mode": "accountant"}, "lb_lin", {},
                            "sphere+twin", 2, 1.0, 1e-5, 0.2883993),
    "noisy_sgd_strongly_convex": ("noisy_sgd", {"variant": "strongly_convex",
                                                "sigma_mode": "accountant"}, "lb_quad", {},
                                  "outlier+twin", 2, 1.0, 1e-5, 0.1557361),
    "noisy_mirror_descent": ("noisy_mirror_descent", {"calibration": "tight",
                                                      "stop_fraction": 1.0}, "lb_lin", {},
                             "sphere+twin", 2, 7.0, 1e-3, 0.1206786),
    "localize_gaussian": ("localize_gaussian", {}, "lb_quad", {}, "sphere+twin", 2, 8.0, 1e-2,
                          0.3109044),
    "high_prob_approx": ("high_prob_approx", {"runs": 10, "selection_fraction": 0.95}, "lb_lin",
                         {}, "sphere+twin", 2, 4.0, 1e-5, 2.5590985),
    "langevin_ula": ("langevin", {"h": 0.2, "regularize": "erm", "horizon": 0.02}, "lb_lin", {},
                     "sphere+twin", 10, 4.0, 1e-3, 2.009213),
    "langevin_ou": ("langevin", {"h": 0.2, "sampler": "ou_exact", "horizon": 0.1}, "mean_est",
                    {"mean_norm": 0.0, "spread": 1.0}, "sphere+twin", 50, 8.0, 1e-3, 2.1604048),
    "private_frank_wolfe": ("private_frank_wolfe", {}, "lasso", {"radius": 0.1}, "sphere+twin", 5,
                            2.0, 1e-3, 1.5470714),
}


def _instance(label: str) -> tuple[Any, Any, Any, float, float, float]:
    alg, aparams, prob, pparams, canary, n, eps, delta, true = DESIGNATED[label]
    problem = get_problem(prob)(**pparams)
    pair = neighbouring_pair(problem, n, 1, canary, np.random.default_rng(0))
    return get_algorithm(alg)(**aparams), problem, pair, eps, delta, true


def _law_chi2(law: ll.LineLaw, x: np.ndarray, bins: int = 24) -> float:
    """P-value of a χ² test of the sample ``x`` against ``law``: one cell per atom and ``bins``
    equal-width cells of the density's interval (their masses by Gauss–Legendre on the
    interpolant)."""
    span = max(law.hi - law.lo, 1.0)
    observed, expected = [], []
    rest = np.ones(x.size, dtype=bool)
    for a, m in zip(law.atoms, law.masses):
        hit = np.abs(x - a) <= ll.ATOM_TOL * span
        rest &= ~hit
        if m * x.size > 5:
            observed.append(hit.sum())
            expected.append(m * x.size)
    if law.size:
        edges = np.linspace(law.lo, law.hi, bins + 1)
        t, w = np.polynomial.legendre.leggauss(24)
        for a, b in zip(edges[:-1], edges[1:]):
            mass = 0.5 * (b - a) * float(w @ law.density(0.5 * (a + b) + 0.5 * (b - a) * t))
            if mass * x.size > 5:
                observed.append(np.count_nonzero(rest & (x > a) & (x <= b)))
                expected.append(mass * x.size)
    observed, expected = np.array(observed, float), np.array(expected)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    return float(chi2.sf(stat, len(observed) - 1))


# --- the machinery ------------------------------------------------------------------------------

def test_chebyshev_rules_are_exact_on_polynomials() -> None:
    law = ll.LineLaw(-1.0, 3.0, np.zeros(33), np.empty(0), np.empty(0))
    x = law.nodes
    assert float(law.quadrature @ x**5) == pytest.approx((3.0**6 - 1.0) / 6.0, rel=1e-13)
    poly = ll.LineLaw(-1.0, 3.0, 1.0 + x - 0.5 * x**7, np.empty(0), np.empty(0))
    y = np.array([-0.9, 0.3, 2.71])
    assert np.allclose(poly.density(y), 1.0 + y - 0.5 * y**7, rtol=1e-12)
    anti = poly.coefficients()[1]
    t = (2.0 * 2.0 - 2.0) / 4.0  # y = 2
    integral = np.polynomial.chebyshev.chebval(t, anti) - np.polynomial.chebyshev.chebval(-1.0,
                                                                                          anti)
    assert integral == pytest.approx(3.0 + 1.5 - 0.5 * (2.0**8 - 1.0) / 8.0, rel=1e-12)


def test_projected_gaussian_step_is_exact() -> None:
    step = ll.GaussianStep(lambda x: (0.3 + 0.0 * x)[None, :], np.ones(1), 0.7)
    law = ll.propagate(ll.point_mass(0.0), [step], -1.0, 1.0, 129)
    assert law.masses == pytest.approx([norm.cdf(-1.3 / 0.7), norm.sf(0.7 / 0.7)], rel=1e-13)
    y = np.linspace(-0.99, 0.99, 7)
    assert np.allclose(law.density(y), norm.pdf(y, 0.3, 0.7), rtol=1e-12)
    assert law.total_mass() == pytest.approx(1.0, abs=1e-14)


def test_gaussian_hockey_stick_matches_balle_wang() -> None:
    """Two unprojected Gaussians (an interval of ±30σ): H_γ and ε(δ) in closed form."""
    def gauss(mu: float) -> ll.LineLaw:
        st = ll.GaussianStep(lambda x: (mu + 0.0 * x)[None, :], np.ones(1), 1.0)
        return ll.propagate(ll.point_mass(0.0), [st], -30.0, 30.0, 801)

    P, Q = gauss(1.0), gauss(0.0)
    for eps in (0.0, 0.5, 2.0):
        assert ll.hockey_stick(P, Q, math.exp(eps)) == pytest.approx(gdp_delta(1.0, eps),
                                                                     abs=1e-12)
    assert ll.line_epsilon(P, Q, 1e-5) == pytest.approx(gdp_epsilon(1.0, 1e-5), rel=1e-7)


def test_mixture_hockey_stick_matches_the_dominating_pair_integrator() -> None:
    """One batch-1 step, common rows at D′'s row: (qN(b) + (1−q)N(a), N(a)) with a = b′, the
    dominating pair R of docs/bst14.md, against :func:`mixture_hockey_stick` (exact on a line)."""
    q, s = 0.5, 1.3
    P = ll.propagate(ll.point_mass(0.0), [ll.GaussianStep(
        lambda x: np.stack([2.0 + 0.0 * x, 0.0 * x]), np.array([q, 1 - q]), s)], -40, 40, 1201)
    Q = ll.propagate(ll.point_mass(0.0), [ll.GaussianStep(
        lambda x: (0.0 * x)[None, :], np.ones(1), s)], -40, 40, 1201)
    gammas = np.exp(np.array([-1.0, 0.0, 0.7, 2.0]))
    ref = mixture_hockey_stick([0.0], [2.0], [0.0], q, s, gammas)
    got = [ll.hockey_stick(P, Q, g) for g in gammas]
    assert np.allclose(got, ref, rtol=1e-10, atol=1e-13)


def _brute_force(steps: list[tuple[Any, np.ndarray, float]], start: float, lo: float, hi: float,
                 m: int = 3001) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An independent propagation: the density on a uniform grid (trapezoid rule), the two end
    atoms by Φ. Returns (grid, density, [mass at lo, mass at hi])."""
    x = np.linspace(lo, hi, m)
    w = np.full(m, x[1] - x[0])
    w[[0, -1]] *= 0.5
    pts, wts = np.array([start]), np.array([1.0])
    for means, probs, sd in steps:
        mu = means(pts)
        dens = np.zeros(m)
        ends = np.zeros(2)
        for c, pc in enumerate(probs):
            dens += pc * (norm.pdf((x[:, None] - mu[c][None, :]) / sd) / sd) @ wts
            ends += pc * np.array([ndtr((lo - mu[c]) / sd) @ wts, ndtr((mu[c] - hi) / sd) @ wts])
        pts = np.concatenate([x, [lo, hi]])
        wts = np.concatenate([w * dens, ends])
    return x, dens, ends


def _brute_epsilon(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...], delta: float) -> float:
    x, fa, ma = a
    _, fb, mb = b
    h = x[1] - x[0]

    def hockey(f: np.ndarray, g: np.ndarray, mf: np.ndarray, mg: np.ndarray, gam: float) -> float:
        d = np.maximum(f - gam * g, 0.0)
        return float(np.sum(np.maximum(mf - gam * mg, 0.0)) + h * (d.sum() - 0.5 * (d[0] + d[-1])))

    out = 0.0
    for f, g, mf, mg in ((fa, fb, ma, mb), (fb, fa, mb, ma)):
        lo, hi = 0.0, 20.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if hockey(f, g, mf, mg, math.exp(mid)) > delta else (lo, mid)
        out = max(out, hi)
    return out


def test_noisy_sgd_law_matches_a_brute_force_propagation() -> None:
    """The designated Lipschitz instance (T = 3 steps, projection onto [−1, 1]): the exact ε
    against an independent trapezoid propagation on 3001 points (agreement 6e-10, converging
    like the trapezoid rule's h²)."""
    alg, problem, pair, eps, delta, _ = _instance("noisy_sgd_lipschitz")
    T, _, sigma, _, _ = alg._noise(2, 1.0, eps, delta)
    c = 2.0 / math.sqrt(4.0 + sigma**2)  # ‖C‖/√(n²L² + pσ²)
    sides = []
    for d in (pair.d0, pair.d1):
        rows = d.X[:, 0]
        steps = [(lambda x, a=c / math.sqrt(t) * 2: np.stack([x + a * r for r in rows]),
                  np.full(rows.size, 1.0 / rows.size), c / math.sqrt(t) * sigma)
                 for t in range(1, T + 1)]
        sides.append(_brute_force(steps, 0.0, -1.0, 1.0))
    exact = alg.exact_epsilon(pair.d0, pair.d1, problem, epsilon=eps, delta=delta)
    assert exact == pytest.approx(_brute_epsilon(sides[0], sides[1], delta), abs=1e-7)
    laws = alg._line_laws(pair.d0, pair.d1, problem, eps, delta)
    assert np.allclose(laws[0].masses, sides[0][2], atol=1e-6)
    assert np.allclose(laws[1].masses, sides[1][2], atol=1e-6)


def test_noisy_sgd_law_is_converged_in_the_number_of_points(monkeypatch: pytest.MonkeyPatch) -> None:
    alg, problem, pair, eps, delta, true = _instance("noisy_sgd_lipschitz")
    monkeypatch.setattr(ll, "NODES_PER_SD", 2 * ll.NODES_PER_SD)
    monkeypatch.setattr(ll, "_LAWS", {})
    finer = alg.exact_epsilon(pair.d0, pair.d1, problem, epsilon=eps, delta=delta)
    assert finer == pytest.approx(true, abs=1e-6)


# --- every mechanism's law against its own releases ----------------------------------------------

MC_CASES = [
    pytest.param("noisy_sgd_lipschitz", 1.0, 0.1, id="sgd-lipschitz"),
    pytest.param("noisy_sgd_strongly_convex", 1.0, 0.1, id="sgd-strongly-convex"),
    pytest.param("noisy_mirror_descent", 7.0, 1e-3, id="mirror-descent"),
    pytest.param("localize_gaussian", 8.0, 1e-2, id="localize-gaussian"),
    pytest.param("high_prob_approx", 4.0, 1e-5, id="high-prob"),
    pytest.param("langevin_ula", 4.0, 1e-3, id="langevin-ula"),
    pytest.param("langevin_ou", 8.0, 1e-3, id="langevin-ou"),
]


@pytest.mark.parametrize(("label", "eps", "delta"), MC_CASES)
def test_law_matches_release_batch(label: str, eps: float, delta: float) -> None:
    alg, problem, pair, _, _, _ = _instance(label)
    laws = alg._line_laws(pair.d0, pair.d1, problem, eps, delta)
    for side, (law, data) in enumerate(zip(laws, (pair.d0, pair.d1))):
        x = alg.release_batch(data, problem, epsilon=eps, delta=delta,
                              rng=np.random.default_rng(10 + side), size=200_000).thetas[:, 0]
        assert law.total_mass() == pytest.approx(1.0, abs=1e-9)
        assert _law_chi2(law, x) > 1e-4, (label, side)


def test_mirror_descent_at_n2_releases_the_centre() -> None:
    """m = ⌈n/2⌉ = 1 fresh point: the release is w₁ = the centre whatever the data, ε = 0."""
    alg = get_algorithm("noisy_mirror_descent")()
    problem = get_problem("lb_lin")()
    pair = neighbouring_pair(problem, 2, 1, "sphere+twin", np.random.default_rng(0))
    assert alg.exact_epsilon(pair.d0, pair.d1, problem, epsilon=1.0, delta=1e-5) == 0.0
    x = alg.release_batch(pair.d0, problem, epsilon=1.0, delta=1e-5,
                          rng=np.random.default_rng(0), size=1000).thetas
    assert np.all(x == 0.0)


def test_high_prob_with_one_run_is_its_base() -> None:
    """k = 1: the selection is trivial, so the release is the base run at ((1 − f)ε, δ)."""
    problem = get_problem("lb_lin")()
    pair = neighbouring_pair(problem, 2, 1, "sphere+twin", np.random.default_rng(0))
    wrapper = get_algorithm("high_prob_approx")(runs=1, selection_fraction=0.5)
    base = get_algorithm("noisy_sgd")()
    assert wrapper.exact_epsilon(pair.d0, pair.d1, problem, epsilon=2.0, delta=1e-3) == \
        pytest.approx(base.exact_epsilon(pair.d0, pair.d1, problem, epsilon=1.0, delta=1e-3),
                      rel=1e-12)


def test_selection_law_matches_enumeration_on_atoms() -> None:
    """:func:`selected_line_law` on a law of atoms only, against enumerating the k = 3
    candidates."""
    from dpbench.algorithms.high_prob import selected_line_law, selection_probabilities
    from dpbench.core.problem import Dataset

    problem = get_problem("lb_lin")()
    data = Dataset(np.array([[1.0], [1.0], [-1.0]]))
    atoms, masses = np.array([-1.0, 0.2, 1.0]), np.array([0.5, 0.2, 0.3])
    base = ll.LineLaw(-1.0, 1.0, np.empty(0), atoms, masses)
    got = selected_line_law(base, data, problem, 3, 1.5, 1.0, 2.0)
    want = np.zeros(3)
    for i, j, k in np.ndindex(3, 3, 3):
        idx = [i, j, k]
        probs = selection_probabilities(-(atoms[idx] * 1.0), 1.5, 1.0, 2.0)
        for pos, which in enumerate(idx):
            want[which] += masses[i] * masses[j] * masses[k] * probs[pos]
    assert np.allclose(got.masses, want, rtol=1e-10)


def test_ou_exact_law_matches_its_closed_form() -> None:
    """raw = d̄ + λ(θ₀ − d̄) + N(0, v), θ₀ ~ U[−R, R]: the density (1/(2Rλ))·[Φ(·+λR) − Φ(·−λR)]
    and the projection's atoms ∫ of the tails."""
    from scipy.integrate import quad

    alg = get_algorithm("langevin")(h=0.2, sampler="ou_exact", horizon=0.05)
    problem = get_problem("mean_est")(mean_norm=0.0, spread=1.0)
    pair = neighbouring_pair(problem, 30, 1, "sphere", np.random.default_rng(0))
    eps, delta = 8.0, 1e-3
    law = alg._line_law(pair.d0, problem, eps, delta)
    plan = alg.plan(problem, 30, 1, eps, delta)
    rate = plan.beta
    lam = math.exp(-rate * plan.eta * plan.steps)
    v = -math.expm1(-2 * rate * plan.eta * plan.steps) / rate
    dbar = float(pair.d0.X.mean())
    c, s = (1 - lam) * dbar, math.sqrt(v)
    assert 0.05 < lam < 0.9  # the start is not forgotten: the box has a width

    def dens(y: float) -> float:
        return (ndtr((y - c + lam) / s) - ndtr((y - c - lam) / s)) / (2 * lam)

    y = np.linspace(-0.95, 0.95, 9)
    assert np.allclose(law.density(y), [dens(t) for t in y], rtol=1e-8, atol=1e-12)
    upper = quad(lambda t: ndtr((t * lam + c - 1.0) / s) / 2.0, -1.0, 1.0, epsabs=1e-14)[0]
    assert law.masses[1] == pytest.approx(upper, rel=1e-8, abs=1e-14)


# --- private Frank–Wolfe: a finite law --------------------------------------------------------

def test_frank_wolfe_one_step_is_the_softmax() -> None:
    """T = 2: one exponential-mechanism choice between ±r at θ₁ = 0, P(+r) = σ(−ε₀·r·g/Δ)."""
    alg = get_algorithm("private_frank_wolfe")(steps=2)
    problem = get_problem("lasso")(radius=0.1)
    pair = neighbouring_pair(problem, 5, 1, "sphere+twin", np.random.default_rng(0))
    pts, P, Q = alg._laws(pair.d0, pair.d1, problem, 2.0, 1e-3)
    _, eps0, sens, _, _ = alg._calibration(5, problem, 2.0, 1e-3)
    for law, d in ((P, pair.d0), (Q, pair.d1)):
        g = float(problem.full_grad(np.zeros(1), d)[0])
        plus = 1.0 / (1.0 + math.exp(eps0 * 0.1 * g / sens))
        got = {round(float(x[0]), 12): m for x, m in zip(pts, law)}
        assert got[round(2 / 3 * 0.1, 12)] == pytest.approx(plus, rel=1e-12)


@pytest.mark.parametrize("selection", ["exponential", "laplace"])
def test_frank_wolfe_law_matches_release_batch(selection: str) -> None:
    alg = get_algorithm("private_frank_wolfe")(selection=selection, steps=3)
    problem = get_problem("lasso")(radius=0.1)
    pair = neighbouring_pair(problem, 5, 2, "sphere+twin", np.random.default_rng(0))
    pts, P, Q = alg._laws(pair.d0, pair.d1, problem, 2.0, 1e-3)
    for side, (law, d) in enumerate(((P, pair.d0), (Q, pair.d1))):
        x = alg.release_batch(d, problem, epsilon=2.0, delta=1e-3,
                              rng=np.random.default_rng(side), size=100_000).thetas
        k = np.argmin(((x[:, None, :] - pts[None]) ** 2).sum(-1), axis=1)
        counts = np.bincount(k, minlength=len(pts))
        keep = law * x.shape[0] > 5
        stat = float(np.sum((counts[keep] - law[keep] * len(x)) ** 2 / (law[keep] * len(x))))
        assert chi2.sf(stat, keep.sum() - 1) > 1e-4
        assert counts[~keep].sum() <= max(30, 10 * law[~keep].sum() * len(x))


def test_discrete_epsilon() -> None:
    from dpbench.algorithms.private_frank_wolfe import discrete_epsilon

    P, Q = np.array([0.6, 0.4]), np.array([0.3, 0.7])
    assert discrete_epsilon(P, Q, 0.0) == pytest.approx(math.log(2.0), rel=1e-10)
    # at δ the excess 0.6 − e^ε·0.3 must fall to δ
    assert discrete_epsilon(P, Q, 0.1) == pytest.approx(math.log(0.5 / 0.3), rel=1e-10)
    assert discrete_epsilon(P, Q, 0.3) == 0.0
    assert discrete_epsilon(np.array([0.5, 0.5]), np.array([1.0, 0.0]), 0.1) == math.inf


# --- the designated instances -------------------------------------------------------------------

@pytest.mark.parametrize("label", list(DESIGNATED))
def test_designated_true_epsilon(label: str) -> None:
    """The pinned true ε of each designated instance, at most the claim (post-processing of
    what the ledger accounts), and the log-density ratio consistent with the laws."""
    alg, problem, pair, eps, delta, true = _instance(label)
    got = alg.exact_epsilon(pair.d0, pair.d1, problem, epsilon=eps, delta=delta)
    assert got == pytest.approx(true, abs=2e-6)
    claim = alg.release_batch(pair.d0, problem, epsilon=eps, delta=delta,
                              rng=np.random.default_rng(0), size=10).ledger.epsilon
    assert got <= claim
    x = alg.release_batch(pair.d0, problem, epsilon=eps, delta=delta,
                          rng=np.random.default_rng(1), size=2000).thetas
    ratio = alg.log_density_ratio(x, pair.d0, pair.d1, problem, epsilon=eps, delta=delta)
    assert ratio.shape == (2000,) and np.all(np.isfinite(ratio))


def test_not_computable_cases_return_none() -> None:
    problem = get_problem("lb_lin")()
    pair2 = neighbouring_pair(problem, 2, 2, "sphere+twin", np.random.default_rng(0))
    pair1 = neighbouring_pair(problem, 2, 1, "sphere+twin", np.random.default_rng(0))
    sgd = get_algorithm("noisy_sgd")(sigma_mode="accountant")
    assert sgd.exact_epsilon(pair2.d0, pair2.d1, problem, epsilon=1.0, delta=1e-5) is None
    averaged = get_algorithm("noisy_sgd")(sigma_mode="accountant", output="average")
    assert averaged.exact_epsilon(pair1.d0, pair1.d1, problem, epsilon=1.0, delta=1e-5) is None
    assert averaged.log_density_ratio(np.zeros((3, 1)), pair1.d0, pair1.d1, problem,
                                      epsilon=1.0, delta=1e-5) is None
    from dpbench.audit.zoo import BrokenNoClipping

    quad = get_problem("lb_quad")()
    pair = neighbouring_pair(quad, 2, 1, "outlier", np.random.default_rng(0))
    assert BrokenNoClipping().exact_epsilon(pair.d0, pair.d1, quad, epsilon=1.0,
                                            delta=1e-5) is None
    # localisation ball smaller than C: the region moves with θ₀ (not computed)
    loc = get_algorithm("localize_gaussian")()
    pairq = neighbouring_pair(quad, 2, 1, "sphere+twin", np.random.default_rng(0))
    assert loc.exact_epsilon(pairq.d0, pairq.d1, quad, epsilon=16.0, delta=1e-2) is None
