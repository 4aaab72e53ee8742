"""DP-SCO evaluation (issue item 4): problems with a data law fill ``population_excess_risk`` in the
cube (with the cell's n for laws that scale with n), the others leave it NaN; FLAT-1D's closed
form; and ``suites/sco.yaml`` validates."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dpbench.config.suite import load_suite, parse_suite
from dpbench.core import registry
from dpbench.core.exact_samplers import exact_sampler
from dpbench.core.schema import DONE
from dpbench.engine.runner import run_suite
from dpbench.problems.flat_1d import Flat1D, flat_tau
from tests.support.cubes import open_cube

SUITES = Path(__file__).resolve().parents[2] / "suites"

# Problems with and without a data law, all able to run at p = 1 (FLAT-1D and HUB-1D are 1-D only).
WITH_LAW = {"flat_1d": {}, "mean_est": {}, "linear_ridge": {},
            "median": {"population_sample": 2000}, "logistic": {"population_sample": 2000}}
WITHOUT_LAW = {"lb_lin": {}, "lb_quad": {}, "hub_1d": {}}

TINY_SCO = """
name: tiny_sco
root_seed: 7
seeds: 2
experiments:
  - name: sco
    problems:
{problems}
    algorithms:
      - {{label: b1, algorithm: noisy_mirror_descent}}
      - {{label: erm, algorithm: nonprivate_erm}}
    grid:
      n: [64, 256]
      p: [1]
      epsilon: [0.5]
      delta: [1.0e-5]
"""


def _problems_yaml() -> str:
    rows = []
    for name, params in {**WITH_LAW, **WITHOUT_LAW}.items():
        extra = f", params: {params}" if params else ""
        rows.append(f"      - {{problem: {name}{extra}}}")
    return "\n".join(rows)


def test_population_excess_filled_exactly_for_problems_with_a_law(tmp_path: Path) -> None:
    for name in WITH_LAW:
        assert registry.get_problem(name).has_population, name
    for name in WITHOUT_LAW:
        assert not registry.get_problem(name).has_population, name
    suite = parse_suite(textwrap.dedent(TINY_SCO.format(problems=_problems_yaml())))
    store = tmp_path / "sco.zarr"
    assert run_suite(suite, store, workers=0, progress=False).complete
    ds = open_cube(store, "sco")
    assert np.all(ds.status.values == DONE)
    for name in WITH_LAW:
        pop = ds.population_excess_risk.sel(problem=name).values
        assert np.all(np.isfinite(pop)), name
        assert np.all(pop >= -1e-6), name  # MC laws: ≥ −(certified gap + rounding)
    for name in WITHOUT_LAW:
        assert np.all(np.isnan(ds.population_excess_risk.sel(problem=name).values)), name
    # FLAT-1D: the engine passes the cell's n. The ERM output is sign(d̄) ∈ {−1, 0, 1}, so the
    # population excess τ(n)(1 − θ) is one of {0, τ(n), 2τ(n)} with τ(n) = 1/√n.
    erm = ds.population_excess_risk.sel(problem="flat_1d", algorithm="erm")
    for n in (64, 256):
        vals = erm.sel(n=n).values.ravel() * math.sqrt(n)
        assert np.all(np.isclose(vals[:, None], [0.0, 1.0, 2.0], atol=1e-12).any(axis=1)), vals
    b1 = ds.population_excess_risk.sel(problem="flat_1d", algorithm="b1").values
    assert np.all((b1 >= 0) & (b1 <= 2 / math.sqrt(64) + 1e-12))


def test_flat_1d_law_and_closed_forms() -> None:
    problem = Flat1D(signal=2.0)
    n = 40_000
    data = problem.generate(n, 1, np.random.default_rng(0))
    tau = flat_tau(2.0, n)
    assert tau == 0.01 and flat_tau(2.0, 1) == 1.0
    # E d = τ: the sample mean is within 5 s.e. (1/√n = 0.005) of τ (fixed seed).
    assert abs(data.X.mean() - tau) < 5 / math.sqrt(n)
    opt = problem.solve(data)
    assert opt.theta[0] == np.sign(data.X.mean()) and opt.gap == 0.0
    assert opt.value == pytest.approx(problem.risk(opt.theta, data), abs=1e-15)
    for t in (-1.0, -0.3, 0.0, 0.7, 1.0):
        # population loss −τθ: excess τ(1 − θ), and the empirical risk is −d̄θ.
        assert problem.population_excess(np.array([t]), 1, n) == pytest.approx(tau * (1 - t))
        assert problem.risk(np.array([t]), data) == pytest.approx(-data.X.mean() * t)
    with pytest.raises(ValueError, match="cell's n"):
        problem.population_excess(np.array([0.0]), 1)
    from dpbench.core.errors import NotApplicable

    with pytest.raises(NotApplicable, match="one-dimensional"):
        problem.generate(10, 2, np.random.default_rng(0))


def test_flat_1d_exact_gibbs_sampler_matches_its_density() -> None:
    # ∝ exp(kθS) on [−1, 1]: CDF (e^{a(θ+1)} − 1)/(e^{2a} − 1), a = kS. KS test on 4000 draws at
    # the fixed seed; the 1% critical value 0.0258 (not flaky: deterministic seed).
    from scipy import stats

    problem = Flat1D()
    data = problem.generate(200, 1, np.random.default_rng(1))
    k = 0.05
    a = k * float(data.X.sum())
    draw = exact_sampler("gibbs", problem, data, k, problem.constraint)
    assert draw is not None
    rng = np.random.default_rng(2)
    xs = np.array([draw(rng)[0] for _ in range(4000)])
    cdf = lambda t: np.expm1(a * (np.asarray(t) + 1)) / np.expm1(2 * a)  # noqa: E731
    assert stats.kstest(xs, cdf).statistic < 0.0258


def test_flat_1d_with_ridge_closed_forms_and_sampler() -> None:
    # The A8-regularised family (ridge r): ERM clip(d̄/r), population minimiser min(1, τ/r) with
    # excess ≥ 0 and 0 there; exact truncated-normal Gibbs law, KS at 4000 draws (1% value 0.0258).
    from scipy import stats

    problem = Flat1D(ridge=0.5)
    n = 400
    data = problem.generate(n, 1, np.random.default_rng(3))
    assert problem.lipschitz == 1.5 and problem.strong_convexity == 0.5
    opt = problem.solve(data)
    grid = np.linspace(-1, 1, 20001)
    risks = [problem.risk(np.array([t]), data) for t in grid]
    assert opt.value <= min(risks) + 1e-15 and abs(opt.theta[0] - grid[np.argmin(risks)]) < 2e-4
    tau = flat_tau(1.0, n)
    star = np.array([min(1.0, tau / 0.5)])
    assert problem.population_excess(star, 1, n) == pytest.approx(0.0, abs=1e-15)
    assert all(problem.population_excess(np.array([t]), 1, n) >= 0 for t in grid[::100])
    k = 0.02
    draw = exact_sampler("gibbs", problem, data, k, problem.constraint)
    rng = np.random.default_rng(4)
    xs = np.array([draw(rng)[0] for _ in range(4000)])
    loc, scale = data.X.mean() / 0.5, 1 / math.sqrt(k * n * 0.5)
    law = stats.truncnorm((-1 - loc) / scale, (1 - loc) / scale, loc=loc, scale=scale)
    assert stats.kstest(xs, law.cdf).statistic < 0.0258
    # REM law exp(−k·L̄ − (kμ/2)(θ − c)²): N((d̄ + μc)/(r + μ), 1/(k(r + μ))) on [−1, 1].
    k_rem, mu, c = 30.0, 0.2, 0.5
    draw = exact_sampler("regularized_gibbs", problem, data, k_rem, mu, np.array([c]))
    xs = np.array([draw(rng)[0] for _ in range(4000)])
    loc = (data.X.mean() + mu * c) / (0.5 + mu)
    scale = 1 / math.sqrt(k_rem * (0.5 + mu))
    law = stats.truncnorm((-1 - loc) / scale, (1 - loc) / scale, loc=loc, scale=scale)
    assert stats.kstest(xs, law.cdf).statistic < 0.0258


def test_sco_suite_validates() -> None:
    path = SUITES / "sco.yaml"
    if not path.exists():
        pytest.skip("suites/sco.yaml not written yet")
    suite = load_suite(path)
    variables = {e.variable for exp in suite.experiments for e in exp.expectations}
    assert variables == {"population_excess_risk"}
