"""Pure ε-DP and (ε, δ)-DP mechanisms in one experiment (issue 18).

One experiment holds output perturbation (pure), NoisySGD (approx) and the non-private reference
over δ ∈ {1e-6, 1e-5}; a second experiment of the same suite runs output perturbation without a δ
axis (δ = 0). The pure mechanism runs at δ = 0 at every grid δ: its cells are bit-identical across
δ and to the δ = 0 experiment (same data seeds), its ledger records δ spent = 0; NoisySGD's
cells change with δ; the paired comparisons, the rate fits and the report cover both kinds.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from dpbench.analysis import fit_rates, paired_comparisons
from dpbench.config.suite import parse_suite
from dpbench.core.errors import SuiteError
from dpbench.core.schema import DONE, NONDETERMINISTIC_VARS
from dpbench.engine.runner import run_suite
from dpbench.report import build_report
from tests.support.cubes import open_cube

SEEDS = 6
DELTAS = (1e-6, 1e-5)

MIXED_SUITE = f"""
name: mixed_privacy
root_seed: 11
seeds: {SEEDS}
experiments:
  - name: mixed
    problems:
      - problem: lb_quad
    algorithms:
      - label: nonprivate
        algorithm: nonprivate_erm
      - label: outpert
        algorithm: output_perturbation
      - label: sgd
        algorithm: noisy_sgd
        params: {{sigma_mode: paper}}
    grid:
      n: [16, 32]
      p: [2]
      epsilon: [1.0]
      delta: [{DELTAS[0]}, {DELTAS[1]}]
  - name: pure_only
    problems:
      - problem: lb_quad
    algorithms:
      - label: outpert
        algorithm: output_perturbation
    grid:
      n: [16, 32]
      p: [2]
      epsilon: [1.0]
"""

#: Variables that are a function of the cell's identity (the rest are timings).
DETERMINISTIC = ("excess_risk", "optimum_gap", "trivial_excess_risk", "oracle_excess_risk",
                 "grad_queries", "func_queries", "iterations", "epsilon_spent", "delta_spent")


def _bits(da: xr.DataArray) -> np.ndarray:
    return np.ascontiguousarray(da.values, dtype=np.float64).view(np.uint64)


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("mixed") / "mixed.zarr"
    summary = run_suite(parse_suite(MIXED_SUITE, "mixed.yaml"), store, workers=0,
                        progress=False)
    assert summary.complete
    return store


def test_mixed_experiment_runs_every_cell(mixed_store: Path) -> None:
    ds = open_cube(mixed_store, "mixed")
    assert list(ds.delta.values) == list(DELTAS)
    assert np.all(ds.status.values == DONE), ds.error.values[ds.status.values != DONE]
    assert ds.attrs["algorithms"]["outpert"]["privacy"] == "pure"
    assert ds.attrs["algorithms"]["sgd"]["privacy"] == "approx"


def test_pure_mechanism_is_identical_across_delta_and_to_a_delta_zero_experiment(
        mixed_store: Path) -> None:
    ds = open_cube(mixed_store, "mixed").sel(algorithm="outpert")
    ref = open_cube(mixed_store, "pure_only").sel(algorithm="outpert")
    assert list(ref.delta.values) == [0.0]
    assert set(DETERMINISTIC).isdisjoint(NONDETERMINISTIC_VARS)
    for var in DETERMINISTIC:
        zero = _bits(ref[var].sel(delta=0.0))
        for d in DELTAS:
            assert np.array_equal(_bits(ds[var].sel(delta=d)), zero), f"{var} at delta={d}"
    # the noise is real (not a constant release): the seeds differ
    assert np.unique(ds.excess_risk.values).size > SEEDS
    # the oracle (O4 on LB-Quad) is evaluated at the pure mechanism's budget, finite at δ > 0
    assert np.all(np.isfinite(ds.oracle_excess_risk.values))


def test_ledgers_state_each_kind_guarantee(mixed_store: Path) -> None:
    ds = open_cube(mixed_store, "mixed")
    pure = ds.sel(algorithm="outpert")
    assert np.all(pure.delta_spent.values == 0.0)
    assert np.all(pure.epsilon_spent.values <= 1.0 * (1 + 1e-9))
    assert np.all(ds.delta_spent.sel(algorithm="sgd").values > 0)
    # every private ledger fits the grid's budget: 0 <= delta_spent <= grid delta (xarray
    # broadcasts the delta coordinate over the cells)
    spent = ds.delta_spent.sel(algorithm=["outpert", "sgd"])
    assert bool(((spent >= 0) & (spent <= ds.delta * (1 + 1e-9))).all())
    assert bool((ds.epsilon_spent.sel(algorithm=["outpert", "sgd"]) <= ds.epsilon * (1 + 1e-9))
                .all())


def test_approx_mechanism_and_reference_follow_their_rules(mixed_store: Path) -> None:
    ds = open_cube(mixed_store, "mixed")
    sgd = ds.excess_risk.sel(algorithm="sgd")
    # the (ε, δ) mechanism runs at the grid's δ: its noise (and stream) change with δ
    assert not np.array_equal(_bits(sgd.sel(delta=DELTAS[0])), _bits(sgd.sel(delta=DELTAS[1])))
    # the non-private reference ignores (ε, δ): the certified optimum at every δ
    ref = ds.excess_risk.sel(algorithm="nonprivate")
    assert np.array_equal(_bits(ref.sel(delta=DELTAS[0])), _bits(ref.sel(delta=DELTAS[1])))
    assert np.all(np.abs(ref.values) <= 1e-9)


def test_paired_comparisons_include_both_kinds_at_every_delta(mixed_store: Path) -> None:
    ds = open_cube(mixed_store, "mixed")
    comps = paired_comparisons(ds)
    pure_vs_approx = [c for c in comps if {c.a, c.b} == {"outpert", "sgd"}]
    assert sorted((c.point["n"], c.point["delta"]) for c in pure_vs_approx) == sorted(
        (n, d) for n in (16, 32) for d in DELTAS)
    for c in pure_vs_approx:
        assert c.n_pairs == SEEDS and math.isfinite(c.p_value)
        # the pair is on the same data: the difference is the mechanisms', seed by seed
        a = ds.excess_risk.sel(algorithm=c.a, problem=c.problem, **c.point).values
        b = ds.excess_risk.sel(algorithm=c.b, problem=c.problem, **c.point).values
        assert c.median_difference == pytest.approx(float(np.median(a - b)))
    # the pure mechanism's side of the pair is the same at both δ
    by_n = {}
    for c in pure_vs_approx:
        side = ds.excess_risk.sel(algorithm="outpert", problem=c.problem, **c.point).values
        by_n.setdefault(c.point["n"], []).append(side)
    assert all(np.array_equal(x, y) for x, y in by_n.values())


def test_rate_fits_along_delta_are_flat_for_the_pure_mechanism(mixed_store: Path) -> None:
    ds = open_cube(mixed_store, "mixed")
    fits = fit_rates(ds, n_resamples=200)
    along = {(f.algorithm, f.fixed["n"]): f for f in fits if f.axis == "delta"}
    for n in (16, 32):
        pure = along[("outpert", n)]
        assert pure.mean[0] == pure.mean[1]
        assert pure.predicted_slope == 0.0      # its card does not depend on δ
        assert pure.bound[0] == pure.bound[1] and math.isfinite(pure.bound[0])
        assert along[("sgd", n)].mean[0] != along[("sgd", n)].mean[1]


def test_report_renders_the_mixed_experiment(mixed_store: Path, tmp_path: Path) -> None:
    html, md = build_report(mixed_store, tmp_path / "mixed.html", n_resamples=200)
    text = html.read_text(encoding="utf-8")
    for label in ("outpert", "sgd", "nonprivate", "mixed", "pure_only"):
        assert label in text
    summary = md.read_text(encoding="utf-8")
    assert "outpert" in summary and "sgd" in summary


def test_approx_mechanism_at_delta_zero_is_refused() -> None:
    text = MIXED_SUITE.replace(f"delta: [{DELTAS[0]}, {DELTAS[1]}]", f"delta: [0, {DELTAS[1]}]")
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "bad.yaml")
    assert len(info.value.problems) == 1
    msg = info.value.problems[0]
    assert msg.startswith("experiments[0].algorithms[sgd]:")
    for fragment in ("noisy_sgd is an (ε, δ)-DP mechanism", "grid.delta contains 0",
                     "allowed: delta values in (0, 1)",
                     "pure ε-DP mechanisms may sit at any delta"):
        assert fragment in msg, msg
