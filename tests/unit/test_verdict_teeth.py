"""Rate verdicts with teeth: on real cubes, a wrong expected slope never *agrees*.

A small BST14-style subset is run through the engine (inline, deterministic seeds): exact ExpMech
on LB-Lin along n and ε (R1, BST14 Thm 3.2; average-scale slopes −1) and output perturbation on
the smooth LB-Quad along n (R9s, BST14 Thm 3.3 on a smooth loss; slope −2). The correct slopes
agree; planted errors of ±0.3 and ±0.5 on every row never agree (each is ≥ 3× the default
tolerance away, and the CIs here have half-widths ≤ 0.07, so an *agree* would need the CI to miss
the truth by ≥ 0.13: the seeded cube is fixed, so the test is deterministic, not a 2.5 % gamble);
a blow-up at the informative end (the two largest n lifted into the capped regime) and a
negative mean excess there make the row *disagree*, where the old point-by-point exclusions
dropped those points and still agreed.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import xarray as xr

from dpbench.analysis import check_expectations, fit_rates
from dpbench.config.suite import Expectation, parse_suite
from dpbench.engine.runner import run_suite

SUITE = """
name: teeth
root_seed: 20141014
seeds: 60
experiments:
  - name: expmech_n
    problems:
      - problem: lb_lin
    algorithms:
      - label: exp_mech
        algorithm: exp_mech
    grid:
      n: [160, 320, 640, 1280, 2560, 5120]
      p: [10]
      epsilon: [1.0]
    expect:
      - {id: R1, algorithm: exp_mech, problem: lb_lin, axis: n, slope: -1}
  - name: expmech_eps
    problems:
      - problem: lb_lin
    algorithms:
      - label: exp_mech
        algorithm: exp_mech
    grid:
      n: [5120]
      p: [10]
      epsilon: [0.25, 0.5, 1.0, 2.0, 4.0]
    expect:
      - {id: R1-eps, algorithm: exp_mech, problem: lb_lin, axis: epsilon, slope: -1}
  - name: outpert_n
    seeds: 120
    problems:
      - problem: lb_quad
    algorithms:
      - label: outpert
        algorithm: output_perturbation
    grid:
      n: [50, 100, 200, 400, 800, 1600, 3200, 6400]
      p: [2]
      epsilon: [1.0]
    expect:
      - {id: R9s, algorithm: outpert, problem: lb_quad, axis: n, slope: -2}
"""

TRUTH = {"R1": -1.0, "R1-eps": -1.0, "R9s": -2.0}


@pytest.fixture(scope="module")
def cubes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, xr.Dataset]:
    path = tmp_path_factory.mktemp("teeth") / "cube.zarr"
    run_suite(parse_suite(textwrap.dedent(SUITE), "teeth.yaml"), path, workers=0, progress=False)
    return {g: xr.open_zarr(str(path), group=g, consolidated=False).load()
            for g in ("expmech_n", "expmech_eps", "outpert_n")}


def _checks(ds: xr.Dataset, slope_shift: float = 0.0) -> list:
    fits = fit_rates(ds, n_resamples=1000)
    declared = [Expectation.from_dict({**e, "slope": e["slope"] + slope_shift})
                for e in ds.attrs["expectations"]]
    return check_expectations(fits, declared, str(ds.attrs["experiment"]))


def test_correct_slopes_agree(cubes: dict[str, xr.Dataset]) -> None:
    checks = [c for ds in cubes.values() for c in _checks(ds)]
    assert {c.expectation.id for c in checks} == set(TRUTH)
    for c in checks:
        assert c.outcome == "agrees", (c.expectation.id, c.reason)
        assert c.resolution < 0.2, c.resolution


@pytest.mark.parametrize("shift", [-0.5, -0.3, 0.3, 0.5])
def test_planted_wrong_slopes_never_agree(cubes: dict[str, xr.Dataset], shift: float) -> None:
    for ds in cubes.values():
        for c in _checks(ds, shift):
            assert c.outcome == "disagrees", (c.expectation.id, shift, c.reason)


def _along_n(ds: xr.Dataset, values: np.ndarray, last: int) -> xr.Dataset:
    """A copy of ``ds`` whose excess at the ``last`` largest n is replaced by ``values``."""
    out = ds.copy(deep=True)
    er = out.excess_risk.values
    er[:, :, -last:] = values
    out["excess_risk"] = (out.excess_risk.dims, er)
    return out


@pytest.mark.parametrize("name", ["expmech_n", "outpert_n"])
def test_blow_up_at_the_informative_end_disagrees(cubes: dict[str, xr.Dataset], name: str) -> None:
    ds = cubes[name]
    trivial = float(ds.trivial_excess_risk.max())
    [c] = _checks(_along_n(ds, 10 * trivial, last=2))
    assert c.outcome == "disagrees" and "blow-up" in c.reason, c.reason


@pytest.mark.parametrize("name", ["expmech_n", "outpert_n"])
def test_negative_mean_at_the_informative_end_disagrees(cubes: dict[str, xr.Dataset],
                                                         name: str) -> None:
    ds = cubes[name]
    [c] = _checks(_along_n(ds, -float(ds.excess_risk.mean()), last=1))
    assert c.outcome == "disagrees" and "non-positive" in c.reason, c.reason


def test_capped_points_at_the_cap_end_are_excluded_not_failures(
        cubes: dict[str, xr.Dataset]) -> None:
    """The legitimate case: the smallest n lifted into the capped regime (where the bound is
    largest) is excluded and shown; the row still agrees on the remaining points."""
    ds = cubes["expmech_n"]
    out = ds.copy(deep=True)
    er = out.excess_risk.values
    er[:, :, 0] = 10 * float(ds.trivial_excess_risk.max())
    out["excess_risk"] = (out.excess_risk.dims, er)
    [c] = _checks(out)
    assert c.outcome == "agrees", c.reason
    assert c.points_used == 5 and any("capped" in e for e in c.excluded)


def test_card_tolerance_shifts_the_band_and_keeps_its_teeth() -> None:
    """``tolerance: card`` on a log n/n bound: the band moves by the card's own local slope
    (−1 + 1/ln n: −0.89…−0.78 over n ∈ [10², 10⁴], band −0.84 ± 0.155) instead of widening, so the exact finite-range slope
    agrees and an exponent planted 0.3 away still cannot. Synthetic curve exactly ∝ the bound with
    5 % lognormal noise and 50 seeds (seeded): CI half-width ≈ 0.01."""
    from dpbench.analysis import fit_curve
    from dpbench.core.ratecard import RateCard

    card = RateCard("log(n)/n", {"n": -1}, citation="test")
    n = np.array([100.0, 300.0, 1000.0, 3000.0, 10000.0])
    rng = np.random.default_rng(3)
    samples = [np.log(x) / x * rng.lognormal(0, 0.05, 50) for x in n]
    fit = fit_curve("e", "a", "p", "n", {}, n, samples, card=card, constants={})
    [ok] = check_expectations([fit], [Expectation("c", "a", "p", "n", -1.0, "card")])
    assert ok.outcome == "agrees", ok.reason
    assert ok.tolerance_source.startswith("card") and ok.tolerance == pytest.approx(0.155, abs=0.01)
    assert ok.centre == pytest.approx(-0.84, abs=0.01)
    for wrong in (-1.3, -0.7, -1.5, -0.5):
        [bad] = check_expectations([fit], [Expectation("c", "a", "p", "n", wrong, "card")])
        assert bad.outcome == "disagrees", (wrong, bad.reason)
    # without the card the same data do not agree with the bare exponent −1
    [bare] = check_expectations([fit], [Expectation("c", "a", "p", "n", -1.0)])
    assert bare.outcome != "agrees"


def test_right_slope_wrong_level_disagrees(cubes: dict[str, xr.Dataset]) -> None:
    """A mechanism that adds twice the noise has the right slope and the wrong level: on the exact
    O1 oracle (ExpMech on LB-Lin) the excess scaled by 2 keeps the slope and must disagree; the
    unscaled cube agrees (test_correct_slopes_agree) with empirical/oracle within 10 %."""
    ds = cubes["expmech_n"]
    [ok] = _checks(ds)
    assert ok.level_outcome == "agrees", ok.reason
    doubled = ds.copy(deep=True)
    doubled["excess_risk"] = doubled.excess_risk * 2.0
    [c] = _checks(doubled)
    assert c.slope == pytest.approx(ok.slope)
    assert c.outcome == "disagrees" and "level is off" in c.reason, c.reason


def test_card_tolerance_without_kept_points_still_fails_and_says_why() -> None:
    """With ``tolerance: card`` a fit with no kept point has no band to bend; a failure (here a
    non-positive mean) must still make the row disagree instead of hiding behind an
    "inconclusive", and a row with no failure says what would decide it (more kept points), not
    that the card lacks an exponent it has."""
    from dpbench.analysis import fit_curve
    from dpbench.core.ratecard import RateCard

    card = RateCard("1/n", {"n": -1}, citation="test")
    n = np.array([100.0, 300.0, 1000.0, 3000.0, 10000.0])
    rng = np.random.default_rng(4)
    negative = [-1.0 / x * rng.lognormal(0, 0.05, 20) for x in n]
    fit = fit_curve("e", "a", "p", "n", {}, n, negative, card=card, constants={})
    assert not fit.used.any()
    [c] = check_expectations([fit], [Expectation("c", "a", "p", "n", -1.0, "card")])
    assert c.outcome == "disagrees" and "non-positive" in c.reason, c.reason
    few = [1.0 / x * rng.lognormal(0, 0.05, 20) for x in n[:2]]
    fit = fit_curve("e", "a", "p", "n", {}, n[:2], few, card=card, constants={})
    [c] = check_expectations([fit], [Expectation("c", "a", "p", "n", -1.0, "card")])
    assert c.outcome == "inconclusive" and "points kept" in c.reason, c.reason
