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
    """The legitimate case: at the smallest n (where the bound is largest) the data-independent
    output does as well as the mechanism (its trivial excess lowered to 1.1× the mechanism's
    there, so the point sits at the trivial level where its own power law puts it): excluded and
    shown; the row still agrees on the remaining points."""
    ds = cubes["expmech_n"]
    out = ds.copy(deep=True)
    triv = out.trivial_excess_risk.values
    triv[:, :, 0] = 1.1 * float(ds.excess_risk.isel(n=0).mean())
    out["trivial_excess_risk"] = (out.trivial_excess_risk.dims, triv)
    [c] = _checks(out)
    assert c.outcome == "agrees", c.reason
    assert c.points_used == 5 and any("capped" in e for e in c.excluded)


def test_a_jump_at_the_cap_end_is_a_blow_up(cubes: dict[str, xr.Dataset]) -> None:
    """The smallest n lifted to 10× the trivial level, 66× what the other points' law puts
    there: a jump, not the capped regime (it was excluded, and the row agreed, before)."""
    ds = cubes["expmech_n"]
    out = ds.copy(deep=True)
    er = out.excess_risk.values
    er[:, :, 0] = 10 * float(ds.trivial_excess_risk.max())
    out["excess_risk"] = (out.excess_risk.dims, er)
    [c] = _checks(out)
    assert c.outcome == "disagrees" and "jump to the trivial level" in c.reason, c.reason
