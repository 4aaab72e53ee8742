"""Derived expected exponents (``derived:`` in ``expect:``; docs/analysis.md, "Derived exponents").

Output perturbation on LB-Quad: its excess is ∝ noise_scale² with noise_scale = 2L/(nΔε) plus
the solver allowance 2√(2·gap/Δ) ≈ 2.8e-5 (1 % of the scale at n = 1600), so ``derived:
{noise_scale: 2}`` must give −1.994 along n (−2 bent by that allowance, which the derivation sees),
computed from the mechanism's own calibration recorded in the store; the same curve declared
with a wrong derivation (``{noise_scale: 1}``: −1) disagrees. The cube is seeded (60 seeds, CI
about ±0.2, as in test_expectations), so the outcomes are deterministic.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import xarray as xr

from dpbench.analysis import check_expectations, fit_rates
from dpbench.config.suite import parse_suite
from dpbench.config.theory import check_derived, derivation, derivations
from dpbench.core.errors import SuiteError
from dpbench.engine.runner import run_suite

SUITE = """
name: derivedsuite
root_seed: 11
seeds: 60
experiments:
  - name: pure
    problems:
      - problem: lb_quad
    algorithms:
      - label: outpert
        algorithm: output_perturbation
    grid:
      n: [50, 100, 200, 400, 800, 1600]
      p: [2]
      epsilon: [1.0]
    expect:
      - {id: derived, algorithm: outpert, problem: lb_quad, axis: n, slope: -2, tolerance: 0.3,
         tolerance_reason: "machinery test: 60 seeds give a CI of about ±0.2",
         derived: {noise_scale: 2}}
      - {id: wrong, algorithm: outpert, problem: lb_quad, axis: n, slope: -2, tolerance: 0.3,
         tolerance_reason: "machinery test", derived: {noise_scale: 1}}
      - {id: by-axis, algorithm: outpert, problem: lb_quad, axis: n, slope: -2, tolerance: 0.3,
         tolerance_reason: "machinery test", derived: {n: -2, epsilon: 5}}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("derived") / "cube.zarr"
    run_suite(parse_suite(textwrap.dedent(SUITE), "derived.yaml"), path, workers=0,
              progress=False)
    return path


def _checks(store: Path, strip_records: bool = False) -> dict:
    ds = xr.open_zarr(str(store), group="pure", consolidated=False).load()
    declared = [dict(e) for e in ds.attrs["expectations"]]
    if strip_records:
        for e in declared:
            e.pop("derivation", None)
    return {c.expectation.id: c for c in check_expectations(fit_rates(ds, n_resamples=300),
                                                            declared, "pure")}


def test_the_store_records_the_calibration_and_the_check_derives_the_slope(store: Path) -> None:
    ds = xr.open_zarr(str(store), group="pure", consolidated=False)
    record = next(e for e in ds.attrs["expectations"] if e["id"] == "derived")["derivation"]
    assert record["error"] == "" and len(record["points"]) == 6
    scales = [pt["values"]["noise_scale"] for pt in record["points"]]
    assert scales[0] == pytest.approx(2 * 2.0 / 50, rel=1e-3)  # 2L/(nΔε), L = 2 on the unit ball
    checks = _checks(store)
    ok, wrong, axis = checks["derived"], checks["wrong"], checks["by-axis"]
    assert ok.derived == pytest.approx(-1.994, abs=1e-3) and ok.outcome == "agrees", ok.reason
    assert "noise_scale" in ok.tolerance_source and "paper -2" in ok.tolerance_source
    assert wrong.derived == pytest.approx(-0.997, abs=1e-3) and wrong.outcome == "disagrees"
    # a grid axis as a factor: slope 1 along itself, 0 along another axis
    assert axis.derived == pytest.approx(-2.0, abs=1e-12) and axis.outcome == "agrees"


def test_a_store_without_the_record_is_inconclusive_not_agreeing(store: Path) -> None:
    checks = _checks(store, strip_records=True)
    assert checks["derived"].outcome == "inconclusive"
    assert "holds no derivation record" in checks["derived"].reason
    assert checks["by-axis"].outcome == "agrees"  # needs no calibration


def test_a_changed_calibration_changes_the_expectation(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpbench.algorithms.output_perturbation import OutputPerturbation

    exp = parse_suite(textwrap.dedent(SUITE)).experiments[0]
    before = derivations(exp)
    assert derivations(exp, [{"id": k, "derivation": v} for k, v in before.items()]) == before
    # a calibration that changes comes with a version bump (its output changes): recomputed
    original = OutputPerturbation.calibrated
    monkeypatch.setattr(OutputPerturbation, "calibrated", lambda self, problem, **kw: {
        "noise_scale": original(self, problem, **kw)["noise_scale"] ** 1.5})
    monkeypatch.setattr(OutputPerturbation, "version", "999")
    after = derivations(exp, [{"id": k, "derivation": v} for k, v in before.items()])
    old = [pt["values"]["noise_scale"] for pt in before["derived"]["points"]]
    new = [pt["values"]["noise_scale"] for pt in after["derived"]["points"]]
    assert new == pytest.approx([v ** 1.5 for v in old])


@pytest.mark.parametrize("entry, message", [
    ("{noise_scale: 2}, tolerance: card", "cannot be combined with tolerance: card"),
    ("{noise_scale: 0}", "must be a finite non-zero power"),
    ("{noise_scale: .inf}", "must be a finite non-zero power"),
    ("[noise_scale]", "must be a non-empty mapping"),
    ("{oracle: 1}, variable: func_queries", "the closed-form oracle is of excess_risk only"),
])
def test_bad_derived_entries_name_the_field(entry: str, message: str) -> None:
    text = textwrap.dedent(SUITE)
    if entry.endswith(", tolerance: card"):  # the entry's own tolerance, not a second one
        text = text.replace("tolerance: 0.3,", "tolerance: card,", 1)
        entry = entry.removesuffix(", tolerance: card")
    text = text.replace("derived: {noise_scale: 2}}", f"derived: {entry}}}", 1)
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "bad.yaml")
    assert message in str(info.value) and "experiments[0].expect[0]" in str(info.value)


def test_an_unknown_quantity_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    text = textwrap.dedent(SUITE).replace("derived: {noise_scale: 2}}",
                                          "derived: {noise_scael: 2}}", 1)
    suite = parse_suite(text, "typo.yaml")
    with pytest.raises(SuiteError) as info:
        check_derived(suite)
    msg = str(info.value)
    assert "experiments[0].expect[0].derived" in msg and "'noise_scael'" in msg
    assert "allowed: noise_scale, n, p, epsilon" in msg
    record = derivation(suite.experiments[0], suite.experiments[0].expectations[0])
    assert record["error"] and not record["points"]
