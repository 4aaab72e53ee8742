"""The audit engine: suite validation, `dpbench audit` end to end, determinism across worker
counts, resumption, exit status, the store's variables and the points' batches.

The run counts are pinned (``runs:``, ``selection_runs:``) wherever a test compares stores or
counts batches, so that no timing enters; statistical assertions use fixed seeds (every run's
generator derives from the suite's root seed), so they are deterministic, with the margins
stated where they are made.
"""

from __future__ import annotations

import math
import textwrap
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import xarray as xr
import zarr

from dpbench.algorithms.output_perturbation import OutputPerturbation
from dpbench.audit.engine import AuditTaskResult, plan_audits, run_audits
from dpbench.audit.stats import bounds_from_counts, event_alpha, per_audit_alpha
from dpbench.audit.store import AUDIT_KEY, open_audit
from dpbench.audit.verdicts import tightness
from dpbench.cli.main import main
from dpbench.config.audit import AUDIT_SCHEMA
from dpbench.config.suite import parse_suite
from dpbench.core import registry
from dpbench.core.errors import StoreError, SuiteError
from dpbench.core.schema import DONE, FAILED
from dpbench.store.cube import ROOT_KEY, Store
from tests.support.cubes import assert_audits_identical


class LeakyOutputPerturbation(OutputPerturbation):
    """A broken mechanism for the exit-status tests: noise for 50·ε while the ledger claims ε."""

    name: ClassVar[str] = "test_leaky_outpert"

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Any:
        rel = super().run(data, problem, epsilon=50 * epsilon, delta=delta, rng=rng)
        rel.ledger = type(rel.ledger).from_charges(
            *(type(c)(c.mechanism, epsilon, c.delta, c.theorem) for c in rel.ledger.charges))
        return rel


class FailingOutputPerturbation(OutputPerturbation):
    """Raises on every run: its batches must be recorded as failed, the audit going on."""

    name: ClassVar[str] = "test_failing_outpert"

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Any:
        raise RuntimeError("deliberate failure")


class HangingOutputPerturbation(OutputPerturbation):
    """Sleeps for an hour without calling ``checkpoint()``: only a hard limit can stop it."""

    name: ClassVar[str] = "test_hanging_outpert"

    def run(self, data: Any, problem: Any, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Any:
        time.sleep(3600)
        raise AssertionError("unreachable")


@pytest.fixture(autouse=True)
def _register() -> None:
    registry.register("algorithms", LeakyOutputPerturbation)
    registry.register("algorithms", FailingOutputPerturbation)
    registry.register("algorithms", HangingOutputPerturbation)


SUITE = textwrap.dedent("""
    name: tinyaudit
    root_seed: 11
    audit: {alpha: 0.05, runs: 400, selection_runs: 400}
    audits:
      - name: outpert
        algorithms: [{label: op, algorithm: output_perturbation}]
        problems: [{problem: logistic, params: {ridge: 0.5}}, {problem: lb_quad}]
        canaries: [sphere, label_flip]
        grid: {n: [2, 5], p: [2], epsilon: [1.0]}
""")

ZOO = textwrap.indent(textwrap.dedent("""
      - name: zoo
        algorithms: [{label: leaky, algorithm: test_leaky_outpert}]
        problems: [{problem: logistic, params: {ridge: 0.5}}]
        canaries: [sphere]
        grid: {n: [2], p: [2], epsilon: [1.0]}
        expect: {expect}
"""), "  ")


#: One point of the correct mechanism (logistic, n = 2, sphere) next to the zoo audit.
SMALL = SUITE.replace("n: [2, 5]", "n: [2]").replace(", {problem: lb_quad}", "").replace(
    "canaries: [sphere, label_flip]", "canaries: [sphere]")


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _load(store: Path, name: str) -> xr.Dataset:
    return open_audit(store, name).load()


def _state(store: Path, audit: str, flat: int) -> dict[str, Any]:
    return dict(zarr.open_group(str(store / "audit" / audit / "points" / str(flat)),
                                mode="r").attrs["state"])


# --- validation -----------------------------------------------------------------------------------

BAD = textwrap.dedent("""
    name: bad
    audit: {alpha: 1.5, budget_s: -3, color: red}
    audits:
      - name: a
        algorithms: [{label: op, algorithm: output_perturbation}, {algorithm: nonprivate_erm}]
        problems: [{problem: logistic}]
        canaries: [sphere, moon, sphere+void]
        grid: {n: [1], epsilon: [1.0], q: [3]}
        search: {ridge_scale: [1, 2]}
        expect: maybe
      - name: b
        algorithms: [{algorithm: noisy_sgd}]
        problems: [{problem: lb_lin}]
        grid: {p: [2], epsilon: [1.0], n: [2]}
        search: {n: [2, 3]}
        selection_runs: 100
""")


def test_validation_lists_every_error_with_field_and_allowed_values() -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(BAD)
    text = "\n".join(info.value.problems)
    for expected in (
            "audit.alpha: must be a number in (0, 1), got 1.5",
            "audit.budget_s: must be a number of seconds in (0, 86400], got -3",
            "audit.color: unknown field; allowed: alpha, budget_s, runs, selection_runs",
            "audits[0].canaries[1]: canary 'moon': unknown kind 'moon'",
            "allowed: sphere, label_flip, lower_bound, outlier, zero",
            "audits[0].canaries[2]: canary 'sphere+void': unknown background 'void'",
            "audits[0].search.ridge_scale: 'ridge_scale' is neither a grid axis nor a parameter "
            "of every algorithm",
            "audits[0].grid.q: unknown audit axis; allowed: n, p, epsilon, delta",
            "audits[0].grid.p: required axis is missing",
            "audits[0].grid.n[0]: n must be an integer >= 2, got 1",
            "audits[0].expect: got 'maybe'; allowed: private, violation",
            "audits[0].algorithms[nonprivate_erm]: nonprivate_erm is a non-private reference",
            "audits[1].grid.delta: required: the audit has (ε, δ) mechanisms",
            "audits[1].grid.n: is searched (search:): it cannot also be a grid axis",
            "audits[1].selection_runs: needs runs (pinned confirmation runs per side) too"):
        assert expected in text, f"missing {expected!r} in\n{text}"


def test_defaults_tiny_n_search_and_budget() -> None:
    suite = parse_suite(textwrap.dedent("""
        name: d
        audits:
          - name: a
            algorithms: [output_perturbation]
            problems: [{problem: logistic, params: {ridge: 0.5}}]
            grid: {p: [2], epsilon: [1.0]}
    """))
    (a,) = suite.audits
    assert a.grid["n"] == [2, 3, 5, 10] and a.grid["delta"] == [0.0]
    assert a.canaries == ("search",) and (a.budget_s, a.runs) == (60.0, None)
    assert (suite.audit.alpha, a.expect) == (0.05, "private")
    assert suite.experiments == ()
    plan = plan_audits(suite)
    # the canary search: every applicable canary (outlier needs clipping; logistic has labels)
    canaries = {c.canary for c in plan.points[0].configs}
    assert "outlier" not in canaries and {"sphere", "zero+empty", "label_flip"} <= canaries


def test_bad_suite_exits_2_and_writes_nothing(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "never.zarr"
    assert main(["audit", str(_write(tmp_path, BAD)), "--store", str(store), "--quiet"]) == 2
    assert "audit.budget_s: must be a number of seconds" in capsys.readouterr().err
    assert not store.exists()
    exp_only = _write(tmp_path, textwrap.dedent("""
        name: e
        experiments:
          - name: x
            problems: [lb_lin]
            algorithms: [nonprivate_erm]
            grid: {n: [4], p: [1], epsilon: [1.0]}
    """), "e.yaml")
    assert main(["audit", str(exp_only), "--store", str(store), "--quiet"]) == 2
    assert "has no audits" in capsys.readouterr().err
    assert not store.exists()


# --- running --------------------------------------------------------------------------------------

def test_tiny_audit_end_to_end_through_the_cli(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "a.zarr"
    suite_file = _write(tmp_path, SUITE)
    rc = main(["audit", str(suite_file), "--store", str(store), "--workers", "0",
               "--report", str(tmp_path / "r.html")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "audit: OK" in out and "verdict" in out and "resolution" in out
    assert main(["status", str(store)]) == 0
    status = capsys.readouterr().out
    assert status.startswith(f"dpbench store {store}: audits only") and "┃" not in status
    assert "audit outpert: 8 points, 6 finished, 2 not applicable" in status
    ds = _load(store, "outpert")
    point_dims = ("algorithm", "problem", "n", "p", "epsilon", "delta", "canary")
    for var in ("epsilon_lower_bound", "epsilon_claimed", "delta_claimed", "mu_lower_bound",
                "mu_claimed", "epsilon_lower_bound_gdp", "runs_completed", "runs_planned",
                "selection_runs", "audit_gap", "violation", "alpha", "resolution_epsilon",
                "true_epsilon", "config", "event"):
        assert ds[var].dims == point_dims, var
    # lb_quad has no labels: label_flip is not applicable there (recorded, never run)
    na = ds.sel(problem="lb_quad", canary="label_flip")
    assert np.all(na.configurations.values == 0) and np.all(na.runs_completed.values == 0)
    assert "label" in str(na.note.values.flat[0])
    applicable = ds.configurations > 0
    assert int(applicable.sum()) == 6
    assert np.all(ds.runs_completed.values[applicable.values] == 400)
    assert np.all(ds.selection_runs.values[applicable.values] == 400)
    alpha = per_audit_alpha(0.05, 6)
    assert np.allclose(ds.alpha.values[applicable.values], alpha)
    assert not ds.violation.any()
    assert np.all(ds.audit_gap.values[applicable.values] > 0)
    assert np.all(ds.epsilon_claimed.values[applicable.values] == 1.0)
    # the bound is recomputed from the stored confirmation counts of the fixed events
    idx = (0, 0, 1, 0, 0, 0, 0)  # op, logistic, n=5, p=2, ε=1, δ=0, sphere
    flat = int(np.ravel_multi_index(idx, ds.epsilon_claimed.shape))
    state = _state(store, "outpert", flat)
    events = state["selection"]["events"]
    counts = np.asarray(zarr.open_group(str(store / "audit/outpert/points" / str(flat)),
                                        mode="r")["confirm_counts"][...]).sum(axis=0)
    num = np.array([e["numerator"] == 1 for e in events])
    k_num, k_den = np.where(num, counts[1], counts[0]), np.where(num, counts[0], counts[1])
    bounds = bounds_from_counts(k_num, k_den, 400, delta=0.0,
                                alpha_each=event_alpha(alpha, len(events)))
    assert float(ds.epsilon_lower_bound[idx]) == max(b.epsilon_lb for b in bounds)
    assert float(ds.resolution_epsilon[idx]) > 1.0  # 400 runs cannot resolve the claim
    # the report has the audit section
    md = (tmp_path / "r.md").read_text()
    assert "## Privacy audit" in md and "| op | logistic | n=5, p=2, epsilon=1, delta=0 |" in md
    html = (tmp_path / "r.html").read_text()
    for title, anchor in (("Summary", "summary"), ("Rate cards", "rate-cards"),
                          ("Comparisons", "comparisons"), ("Failed and not-applicable cells",
                                                           "cells")):
        assert f"## {title}" not in md and f'href="#{anchor}"' not in html
    assert '<section id="privacy-audit">' in html and 'href="#privacy-audit"' in html
    assert "privacy claims hold" in html and "excess-risk rates" not in html
    assert "- audit outpert (expect: private):" in md
    row = next(line for line in md.splitlines() if line.startswith("| op | 6 | 0 |"))
    best = float(np.nanmax([tightness(float(e), 1.0) for e in
                            ds.epsilon_lower_bound.values[applicable.values]]))
    assert f"| {best:.3g} |" in row


def test_the_multiplicity_counts_applicable_points_before_any_run() -> None:
    plan = plan_audits(parse_suite(SUITE))
    assert plan.n_points == 6 and len(plan.not_applicable) == 2
    assert plan.alpha == pytest.approx(0.05 / 6)


def test_a_search_over_open_parameters_is_recorded(tmp_path: Path) -> None:
    text = textwrap.dedent("""
        name: searched
        root_seed: 3
        audit: {runs: 400, selection_runs: 400}
        audits:
          - name: s
            algorithms: [{label: op, algorithm: output_perturbation}]
            problems: [{problem: lb_quad}]
            canaries: [search]
            grid: {p: [1], epsilon: [1.0], delta: [0.0]}
            search: {n: [2, 5], solver_gap: [1.0e-10, 1.0e-8]}
    """)
    suite = parse_suite(text)
    assert suite.audits[0].point_dims == ("algorithm", "problem", "p", "epsilon", "delta",
                                          "canary")
    [pt] = plan_audits(suite).points
    assert {c.n for c in pt.configs} == {2, 5}
    assert {dict(c.params)["solver_gap"] for c in pt.configs} == {1e-10, 1e-8}
    store = tmp_path / "s.zarr"
    summary = run_audits(suite, store, workers=0, progress=False)
    [r] = summary.results
    assert r.runs_completed == 400 and "solver_gap=" in r.config and "n=" in r.config
    state = _state(store, "s", 0)
    rounds = state["rounds"]
    assert len(rounds) == len(state["plan"]["search_runs"]) and len(rounds[-1][0]) == 1
    assert state["selection"]["config"] == rounds[-1][0][0]


def test_a_time_budget_is_resolved_once_and_recorded(tmp_path: Path) -> None:
    text = SMALL.replace("audit: {alpha: 0.05, runs: 400, selection_runs: 400}",
                         "audit: {alpha: 0.05, budget_s: 1.5}")
    store = tmp_path / "t.zarr"
    run_audits(parse_suite(text), store, workers=0, progress=False)
    ds = _load(store, "outpert")
    plan = _state(store, "outpert", 0)["plan"]
    assert plan["seconds_per_run"] > 0
    assert int(ds.runs_planned.values.flat[0]) == plan["confirm_batch"] * plan["confirm_batches"]
    assert 0.5 < float(ds.seconds.values.flat[0]) < 30
    # a resume reuses the recorded plan and computes nothing
    again = run_audits(parse_suite(text), store, workers=0, progress=False)
    assert again.computed == 0 and _state(store, "outpert", 0)["plan"] == plan


@pytest.mark.slow
def test_identical_store_with_1_and_2_workers(tmp_path: Path) -> None:
    suite = parse_suite(SUITE.replace("n: [2, 5]", "n: [3]").replace(", {problem: lb_quad}", ""))
    one, two = tmp_path / "one.zarr", tmp_path / "two.zarr"
    run_audits(suite, one, workers=1, progress=False)
    run_audits(suite, two, workers=2, progress=False)
    assert_audits_identical(one, two, ["outpert"])


def test_resume_skips_done_batches_and_ends_identical(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dpbench.engine import runner
    from dpbench.engine.backends import inline

    monkeypatch.setattr(runner, "LINGER_S", 0.0)
    monkeypatch.setattr(inline, "IDLE_EVERY_S", 0.0)
    suite = parse_suite(SUITE)
    ref = tmp_path / "ref.zarr"
    full = run_audits(suite, ref, workers=0, progress=False)

    seen: list[int] = []

    def stop_after_some(res: AuditTaskResult) -> None:
        seen.append(len(res.batches))
        raise KeyboardInterrupt  # after the first task of the first round is written

    store = tmp_path / "resume.zarr"
    with pytest.raises(KeyboardInterrupt):
        run_audits(suite, store, workers=0, progress=False, on_result=stop_after_some)
    summary = run_audits(suite, store, workers=0, progress=False)
    assert 0 < summary.computed < full.computed  # only the missing batches ran
    assert summary.computed + sum(seen) == full.computed
    assert_audits_identical(ref, store, ["outpert"])
    again = run_audits(suite, store, workers=0, progress=False)
    assert again.computed == 0


def test_exit_1_on_a_violation_of_an_expect_private_point(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          ) -> None:
    # Noise for ε = 50 while claiming ε = 1: with 400 confirmation runs per side the releases
    # separate completely, so ε_lb ≈ log(0.99 / (log(2E·K/α)/400)) ≈ 3.4 > 1: a margin far from
    # chance, and deterministic (fixed root seed).
    text = SMALL + ZOO.replace("{expect}", "private")
    store = tmp_path / "v.zarr"
    rc = main(["audit", str(_write(tmp_path, text)), "--store", str(store), "--workers", "0",
               "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1 and "PRIVACY VIOLATION: zoo/leaky" in out, out
    ds = _load(store, "zoo")
    assert bool(ds.violation.all()) and float(ds.audit_gap.min()) < 0
    assert float(ds.epsilon_lower_bound.min()) > 2.0
    assert not _load(store, "outpert").violation.any()  # the correct mechanism still passes


def test_exit_0_when_the_zoo_is_caught_and_1_when_it_is_missed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    caught = SMALL + ZOO.replace("{expect}", "violation")
    assert main(["audit", str(_write(tmp_path, caught)), "--store", str(tmp_path / "c.zarr"),
                 "--workers", "0", "--quiet"]) == 0
    missed = caught.replace("algorithm: test_leaky_outpert", "algorithm: output_perturbation")
    rc = main(["audit", str(_write(tmp_path, missed, "m.yaml")), "--store",
               str(tmp_path / "m.zarr"), "--workers", "0", "--quiet"])
    assert rc == 1 and "NOT DETECTED: zoo/leaky" in capsys.readouterr().out


def test_a_changed_audit_is_refused_unless_restart(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "c.zarr"
    small = SUITE.replace("n: [2, 5]", "n: [2]")
    assert main(["audit", str(_write(tmp_path, small)), "--store", str(store), "--workers", "0",
                 "--quiet"]) == 0
    changed = _write(tmp_path, small.replace("p: [2]", "p: [3]"), "c.yaml")
    assert main(["audit", str(changed), "--store", str(store), "--workers", "0",
                 "--quiet"]) == 2
    assert "different definition" in capsys.readouterr().err
    meta = Store.open(store).root.attrs[ROOT_KEY]
    assert meta["suite_yaml"] == small
    assert main(["audit", str(changed), "--store", str(store), "--workers", "0", "--quiet",
                 "--restart"]) == 0
    assert list(_load(store, "outpert").p.values) == [3]


def test_a_failing_cell_is_recorded_and_the_audit_goes_on(tmp_path: Path) -> None:
    text = SMALL.replace("algorithms: [{label: op, algorithm: output_perturbation}]",
                         "algorithms: [{label: op, algorithm: output_perturbation}, "
                         "{label: bad, algorithm: test_failing_outpert}]")
    store = tmp_path / "f.zarr"
    summary = run_audits(parse_suite(text), store, workers=0, progress=False)
    ds = _load(store, "outpert")
    bad, ok = ds.sel(algorithm="bad"), ds.sel(algorithm="op")
    assert summary.failed >= 1
    assert int(bad.runs_completed.sum()) == 0 and np.isnan(bad.epsilon_lower_bound).all()
    assert "RuntimeError: deliberate failure" in str(bad.note.values.flat[0])
    batches = _state(store, "outpert", 1)["batches"]
    assert batches and all(b["status"] == FAILED for b in batches.values())
    assert int(ok.runs_completed.sum()) == 400
    assert [r.verdict for r in summary.results] == [summary.results[0].verdict, "no runs"]


def test_audit_cells_obey_the_per_cell_time_limit(tmp_path: Path) -> None:
    """Audit batches run under the suite's hard per-cell limits like experiment cells: a hung
    mechanism's batches are killed and recorded as failed, and the other points complete."""
    text = ("cell_timeout_s: 0.01\n" + SMALL).replace(
        "algorithms: [{label: op, algorithm: output_perturbation}]",
        "algorithms: [{label: op, algorithm: output_perturbation}, "
        "{label: hung, algorithm: test_hanging_outpert}]")
    t0 = time.perf_counter()
    store = tmp_path / "h.zarr"
    summary = run_audits(parse_suite(text), store, workers=0, progress=False)
    assert time.perf_counter() - t0 < 300
    ds = _load(store, "outpert")
    hung, ok = ds.sel(algorithm="hung"), ds.sel(algorithm="op")
    assert summary.failed >= 1 and int(hung.runs_completed.sum()) == 0
    assert "time limit" in str(hung.note.values.flat[0])
    assert int(ok.runs_completed.sum()) == 400


def test_an_audit_store_of_an_older_schema_is_refused_before_any_compute(tmp_path: Path) -> None:
    suite = parse_suite(SMALL)
    store = tmp_path / "old.zarr"
    run_audits(suite, store, workers=0, progress=False)
    group = zarr.open_group(str(store / "audit" / "outpert"), mode="r+")
    meta = dict(group.attrs[AUDIT_KEY])
    meta["definition"] = {**meta["definition"], "schema": 1}
    meta["fingerprint"] = "written-by-an-older-dpbench"
    group.attrs[AUDIT_KEY] = meta
    before = _state(store, "outpert", 0)
    with pytest.raises(StoreError, match=rf"written with audit schema 1; this dpbench writes "
                                         rf"audit schema {AUDIT_SCHEMA}"):
        run_audits(suite, store, workers=0, progress=False)
    assert _state(store, "outpert", 0) == before
