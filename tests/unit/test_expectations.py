"""Declared expected rates (``expect:``): validation, checking against fits, report and store."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import zarr

from dpbench.analysis import check_expectations, fit_rates
from dpbench.config.suite import Expectation, parse_suite
from dpbench.core.errors import SuiteError
from dpbench.engine.runner import run_suite
from dpbench.report import build_report

# Output perturbation on LB-Quad (smooth, Δ = β = 1): R9s predicts E ∝ p(p+1)/(n²ε²) on the average
# scale, so slope −2 in n and in ε (BST14 Thm 2.4(2); docs/bst14.md). 60 seeds, n ∈ {50, …, 1600}: far from the cap
# (the Gamma noise radius 2Lp/(nΔε) ≤ 0.32 < R), so the n-slope CI is ≈ ±0.2 around −2 (seeded,
# deterministic; the test checks the machinery: −2 agrees within a ±0.3 band, which needs its
# written reason, and a deliberately wrong −1 disagrees: its CI lies wholly outside −1 ± 0.3).
SUITE = """
name: expectsuite
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
      epsilon: [0.5, 1.0, 2.0, 4.0, 8.0]
    expect:
      - {id: R9s-n, algorithm: outpert, problem: lb_quad, axis: n, slope: -2, tolerance: 0.3,
         tolerance_reason: "machinery test: 60 seeds give a CI of about ±0.2",
         at: {epsilon: 1.0}, source: "BST14 Thm 3.3, R9s"}
      - {id: R9s-eps, algorithm: outpert, problem: lb_quad, axis: epsilon, slope: -2,
         tolerance: 0.3, tolerance_reason: "machinery test"}
      - {id: wrong, algorithm: outpert, problem: lb_quad, axis: n, slope: -1, tolerance: 0.3,
         tolerance_reason: "machinery test", at: {epsilon: 1.0}}
"""


def _suite(extra: str) -> str:
    return textwrap.dedent(SUITE).replace("    expect:\n", "    expect:\n" + extra, 1)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("expect") / "cube.zarr"
    run_suite(parse_suite(textwrap.dedent(SUITE), "expect.yaml"), path, workers=0,
              progress=False)
    return path


def test_expectations_are_parsed_and_not_part_of_the_fingerprint() -> None:
    suite = parse_suite(textwrap.dedent(SUITE))
    exp = suite.experiments[0]
    assert [e.id for e in exp.expectations] == ["R9s-n", "R9s-eps", "wrong"]
    assert exp.expectations[0].at == {"epsilon": 1.0}
    bare = parse_suite(textwrap.dedent(SUITE).split("    expect:")[0])
    assert bare.experiments[0].fingerprint(11) == exp.fingerprint(11)
    assert Expectation.from_dict(exp.expectations[0].to_dict()) == exp.expectations[0]


@pytest.mark.parametrize("entry, message", [
    ("      - {id: x, algorithm: nope, problem: lb_quad, axis: n, slope: -1, tolerance: 0.1}\n",
     "algorithm: 'nope' is not one of the experiment's algorithm labels"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: p, slope: -1, tolerance: 0.1}\n",
     "axis: 'p' is not a swept axis"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: n, slope: -1, tolerance: 0}\n",
     "tolerance: must be a number in (0, 1) or 'card'"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: n, slope: -1, tolerance: 0.2}\n",
     "tolerance_reason: a tolerance above the default 0.1 needs a written reason"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: n, slope: -1,"
     " level_tolerance: 0.5}\n", "level_reason: a level tolerance above the default 0.1"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: n, slope: -1, tolerance: 0.1,"
     " at: {epsilon: 3.0}}\n", "at.epsilon: 3.0 is not a grid value"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: n, tolerance: 0.1}\n",
     "missing field 'slope'"),
    ("      - {id: x, algorithm: outpert, problem: lb_quad, axis: n, slope: 1, tolerance: 0.1,"
     " slop: 2}\n", "unknown field (did you mean 'slope'?)"),
])
def test_bad_expectations_name_the_field(entry: str, message: str) -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(_suite(entry), "bad.yaml")
    assert message in str(info.value)
    assert "experiments[0].expect[0]" in str(info.value)


def test_check_against_fits(store: Path) -> None:
    import xarray as xr

    ds = xr.open_zarr(str(store), group="pure", consolidated=False).load()
    fits = fit_rates(ds, n_resamples=200)
    checks = check_expectations(fits, ds.attrs["expectations"], "pure")
    by_id: dict[str, list] = {}
    for c in checks:
        by_id.setdefault(c.expectation.id, []).append(c)
    assert [c.outcome for c in by_id["R9s-n"]] == ["agrees"]
    assert [c.outcome for c in by_id["wrong"]] == ["disagrees"]
    # no `at`: one check per value of the other swept axis (n has 6 values)
    assert len(by_id["R9s-eps"]) == 6
    assert all(c.points_used >= 3 for c in checks)


def test_missing_curve_is_reported() -> None:
    exp = Expectation("ghost", "a", "b", "n", -1.0, 0.1)
    [check] = check_expectations([], [exp], "x")
    assert check.outcome == "missing"


def test_report_has_expected_rates_and_edits_refresh(store: Path, tmp_path: Path) -> None:
    html, md = build_report(store, tmp_path / "r.html", n_resamples=200)
    text = md.read_text()
    assert "## Expected rates" in text and "| R9s-n |" in text and "**disagrees**" in text
    assert 'id="expected-rates"' in html.read_text()
    # Editing expectations is cosmetic: the store accepts the suite and refreshes them.
    edited = textwrap.dedent(SUITE).split("      - {id: wrong")[0]
    run_suite(parse_suite(edited, "expect.yaml"), store, workers=0, progress=False)
    attrs = zarr.open_group(str(store), mode="r")["pure"].attrs["expectations"]
    assert [e["id"] for e in attrs] == ["R9s-n", "R9s-eps"]


def test_check_cli(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpbench.cli.main import main

    # The module's earlier test may have dropped the deliberately wrong entry; put it back.
    run_suite(parse_suite(textwrap.dedent(SUITE), "expect.yaml"), store, workers=0,
              progress=False)
    assert main(["check", str(store)]) == 1
    out = capsys.readouterr().out
    assert "R9s-n" in out and "disagrees" in out and "agree" in out
    edited = textwrap.dedent(SUITE).split("      - {id: wrong")[0]
    run_suite(parse_suite(edited, "expect.yaml"), store, workers=0, progress=False)
    assert main(["check", str(store)]) == 0
    assert main(["check", str(store.parent / "nope.zarr")]) == 2


# ``variable:`` fits another float variable of the cube. Output perturbation spends exactly the
# grid's ε (pure DP), so ``epsilon_spent`` has slope +1 along ε with a zero-width CI: +1 must
# agree and 0 must disagree, deterministically (no Monte Carlo in the spent budget).
VARIABLE_ENTRIES = (
    "      - {id: spent, algorithm: outpert, problem: lb_quad, axis: epsilon, slope: 1,"
    " tolerance: 0.05, at: {n: 100}, variable: epsilon_spent, source: pure DP}\n"
    "      - {id: spent-wrong, algorithm: outpert, problem: lb_quad, axis: epsilon, slope: 0,"
    " tolerance: 0.05, at: {n: 100}, variable: epsilon_spent}\n")


def test_expectation_variable_is_validated() -> None:
    suite = parse_suite(_suite(VARIABLE_ENTRIES), "var.yaml")
    exp = suite.experiments[0].expectations[0]
    assert exp.variable == "epsilon_spent" and suite.experiments[0].expectations[2].variable \
        == "excess_risk"
    assert Expectation.from_dict(exp.to_dict()) == exp
    bad = VARIABLE_ENTRIES.replace("variable: epsilon_spent, source", "variable: epsilon_spnt, "
                                   "source")
    with pytest.raises(SuiteError) as info:
        parse_suite(_suite(bad), "bad.yaml")
    text = str(info.value)
    assert "experiments[0].expect[0].variable" in text and "did you mean 'epsilon_spent'" in text
    assert "allowed: excess_risk, population_excess_risk" in text and "func_queries" in text


def test_expectation_variable_is_fitted(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpbench.cli.main import main
    from dpbench.report.build import store_expectations
    from dpbench.store.cube import Store

    run_suite(parse_suite(_suite(VARIABLE_ENTRIES), "expect.yaml"), store, workers=0,
              progress=False)
    by_id = {c.expectation.id: c for c in store_expectations(Store.open(store), n_resamples=200)}
    assert by_id["spent"].outcome == "agrees"
    assert by_id["spent"].slope == pytest.approx(1.0, abs=1e-9)
    assert by_id["spent"].points_used == 5       # no cap/floor exclusions for non-risk variables
    assert by_id["spent-wrong"].outcome == "disagrees"
    assert by_id["R9s-n"].outcome == "agrees"     # excess-risk entries unaffected
    main(["check", str(store)])
    assert "epsilon_spent" in capsys.readouterr().out
