"""The audit engine: suite validation, `dpbench audit` end to end, determinism across worker
counts, resumption, exit status and the cube variables.

Statistical assertions use fixed seeds (every run's generator derives from the suite's root seed),
so they are deterministic; the margins are stated where they are made.
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
from dpbench.audit.stats import audit_bound, per_audit_alpha
from dpbench.audit.store import AUDIT_KEY, open_audit
from dpbench.audit.verdicts import tightness
from dpbench.cli.main import main
from dpbench.config.audit import AUDIT_SCHEMA
from dpbench.config.suite import parse_suite
from dpbench.core import registry
from dpbench.core.errors import StoreError, SuiteError
from dpbench.core.schema import DONE, FAILED, NOT_APPLICABLE
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
    audit: {alpha: 0.05, runs: 200, batch: 100}
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


# --- validation -----------------------------------------------------------------------------------

BAD = textwrap.dedent("""
    name: bad
    audit: {alpha: 1.5, runs: 300, batch: 7, color: red}
    audits:
      - name: a
        algorithms: [{label: op, algorithm: output_perturbation}, {algorithm: nonprivate_erm}]
        problems: [{problem: logistic}]
        canaries: [sphere, moon]
        grid: {n: [1], epsilon: [1.0], q: [3]}
        expect: maybe
      - name: b
        algorithms: [{algorithm: noisy_sgd}]
        problems: [{problem: lb_lin}]
        grid: {p: [2], epsilon: [1.0]}
        runs: 1500
""")


def test_validation_lists_every_error_with_field_and_allowed_values() -> None:
    with pytest.raises(SuiteError) as info:
        parse_suite(BAD)
    text = "\n".join(info.value.problems)
    for expected in (
            "audit.alpha: must be a number in (0, 1), got 1.5",
            "audit.batch: must be an even integer >= 2, got 7",
            "audit.color: unknown field; allowed: alpha, runs, batch",
            "audits[0].canaries[1]: unknown canary 'moon'; allowed: sphere, label_flip, "
            "lower_bound, outlier, zero",
            "audits[0].grid.q: unknown audit axis; allowed: n, p, epsilon, delta",
            "audits[0].grid.p: required axis is missing",
            "audits[0].grid.n[0]: n must be an integer >= 2, got 1",
            "audits[0].expect: got 'maybe'; allowed: private, violation",
            "audits[0].algorithms[nonprivate_erm]: nonprivate_erm is a non-private reference",
            "audits[1].grid.delta: required: the audit has (ε, δ) mechanisms",
            "audits[1].runs: must be a multiple of audit.batch = 1000"):
        assert expected in text, f"missing {expected!r} in\n{text}"


def test_defaults_tiny_n_every_canary_and_settings() -> None:
    suite = parse_suite(textwrap.dedent("""
        name: d
        audits:
          - name: a
            algorithms: [output_perturbation]
            problems: [logistic]
            grid: {p: [2], epsilon: [1.0]}
    """))
    (a,) = suite.audits
    assert a.grid["n"] == [2, 3, 5, 10] and a.grid["delta"] == [0.0]
    assert a.canaries == ("sphere", "label_flip", "lower_bound", "outlier", "zero")
    # output_perturbation has run_batch: the vectorised default budget (docs/audit.md, 'Budget')
    assert (suite.audit.alpha, a.runs, a.batch, a.expect) == (0.05, 1_000_000, 50_000, "private")
    assert suite.experiments == ()


def test_bad_suite_exits_2_and_writes_nothing(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "never.zarr"
    assert main(["audit", str(_write(tmp_path, BAD)), "--store", str(store), "--quiet"]) == 2
    assert "audit.batch: must be an even integer" in capsys.readouterr().err
    assert not store.exists()
    # a suite without audits: exit 2, nothing written
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
    assert "audit: OK" in out and "verdict" in out
    assert "no expected rates declared" not in out  # an audit store declares none to check
    assert main(["status", str(store)]) == 0
    status = capsys.readouterr().out
    assert status.startswith(f"dpbench store {store}: audits only") and "┃" not in status
    assert "audit outpert:" in status
    ds = _load(store, "outpert")
    point_dims = ("algorithm", "problem", "n", "p", "epsilon", "delta", "canary")
    for var in ("epsilon_lower_bound", "epsilon_claimed", "delta_claimed", "mu_lower_bound",
                "mu_claimed", "epsilon_lower_bound_gdp", "runs_completed", "runs_planned",
                "audit_gap", "violation", "alpha"):
        assert ds[var].dims == point_dims, var
    assert ds.scores.dims == (*point_dims, "batch", "side", "run")
    assert ds.scores.dtype == np.float64 and list(ds.side.values) == ["D", "D'"]
    # lb_quad has no labels: label_flip is not applicable there (recorded, never run)
    na = ds.batch_status.sel(problem="lb_quad", canary="label_flip")
    assert np.all(na.values == NOT_APPLICABLE)
    assert "label" in str(ds.note.sel(problem="lb_quad", canary="label_flip").values.flat[0])
    applicable = ds.runs_planned > 0
    assert int(applicable.sum()) == 6  # 2 problems x 2 n x 2 canaries, minus lb_quad's 2
    assert np.all(ds.runs_completed.where(applicable, 200) == 200)
    assert np.all(ds.batch_status.values[applicable.values] == DONE)
    alpha = per_audit_alpha(0.05, 6)
    assert np.allclose(ds.alpha.values[applicable.values], alpha)
    # a correct pure mechanism: not flagged, gap = claimed - lb > 0
    assert not ds.violation.any()
    assert np.all(ds.audit_gap.values[applicable.values] > 0)
    assert np.all(ds.epsilon_claimed.values[applicable.values] == 1.0)
    # the bound is what audit_bound gives on the stored scores (first half of each batch selects)
    pt = dict(algorithm="op", problem="logistic", n=5, p=2, epsilon=1.0, delta=0.0,
              canary="sphere")
    s = ds.scores.sel(**pt).values                       # (batch, side, run)
    select = np.tile(np.arange(100) < 50, 2)
    bound = audit_bound(s[:, 0].ravel(), s[:, 1].ravel(), select, epsilon_claimed=1.0,
                        delta_claimed=0.0, mu_claimed=math.nan, alpha=alpha)
    assert float(ds.epsilon_lower_bound.sel(**pt)) == bound.epsilon_lb
    # the report has the audit section
    md = (tmp_path / "r.md").read_text()
    assert "## Privacy audit" in md and "| op | logistic | 5 | 2 |" in md
    # an audit-only store has no experiments: no empty experiment sections, in either output
    html = (tmp_path / "r.html").read_text()
    for title, anchor in (("Summary", "summary"), ("Rate cards", "rate-cards"),
                          ("Comparisons", "comparisons"), ("Failed and not-applicable cells",
                                                           "cells")):
        assert f"## {title}" not in md and f'href="#{anchor}"' not in html
    for anchor in ("figures", "overlay", "cost", "methods"):
        assert f'<section id="{anchor}">' not in html and f'href="#{anchor}"' not in html
    assert '<section id="privacy-audit">' in html and 'href="#privacy-audit"' in html
    assert "privacy claims hold" in html and "excess-risk rates" not in html
    assert "<th>experiments</th>" not in html and "<th>audits</th>" in html
    assert "- audit outpert (expect: private):" in md
    # the per-mechanism summary names the best point and says whether any point is informative
    row = next(line for line in md.splitlines() if line.startswith("| op | 6 | 0 |"))
    best = float(np.nanmax([tightness(float(e), 1.0) for e in
                            ds.epsilon_lower_bound.values[applicable.values]]))
    assert f"| {best:.3g} |" in row and row.rstrip(" |").endswith(
        "informative" if best >= 0.1 else "uninformative everywhere")


def test_the_multiplicity_counts_applicable_points_before_any_run() -> None:
    plan = plan_audits(parse_suite(SUITE))
    assert plan.n_points == 6 and len(plan.not_applicable) == 2
    assert plan.alpha == pytest.approx(0.05 / 6)


@pytest.mark.slow
def test_identical_store_with_1_and_2_workers(tmp_path: Path) -> None:
    # 2 points x 2 batches of 100 runs: 4 cells packed into 2 tasks (2000 units per run)
    suite = parse_suite(SUITE.replace("n: [2, 5]", "n: [3]").replace(", {problem: lb_quad}", ""))
    assert sum(a.n_batches * len(a.canaries) for a in suite.audits) == 4
    one, two = tmp_path / "one.zarr", tmp_path / "two.zarr"
    run_audits(suite, one, workers=1, progress=False)
    run_audits(suite, two, workers=2, progress=False)
    assert_audits_identical(one, two, ["outpert"])


def test_resume_skips_done_batches_and_ends_identical(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Write each task as it completes (the client otherwise batches writes), so that the run
    # is interrupted with work left.
    from dpbench.engine import runner
    from dpbench.engine.backends import inline

    monkeypatch.setattr(runner, "LINGER_S", 0.0)
    monkeypatch.setattr(inline, "IDLE_EVERY_S", 0.0)
    suite = parse_suite(SUITE)
    ref = tmp_path / "ref.zarr"
    run_audits(suite, ref, workers=0, progress=False)

    seen: list[int] = []

    def stop_after_first(res: AuditTaskResult) -> None:
        seen.append(len(res.batches))
        raise KeyboardInterrupt

    store = tmp_path / "resume.zarr"
    with pytest.raises(KeyboardInterrupt):
        run_audits(suite, store, workers=0, progress=False, on_result=stop_after_first)
    done_before = int((_load(store, "outpert").batch_status == DONE).sum())
    assert done_before == seen[0] and 0 < done_before < 12
    summary = run_audits(suite, store, workers=0, progress=False)
    assert summary.computed == 12 - done_before  # only the missing batches ran
    assert_audits_identical(ref, store, ["outpert"])
    again = run_audits(suite, store, workers=0, progress=False)
    assert again.computed == 0


def test_exit_1_on_a_violation_of_an_expect_private_point(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          ) -> None:
    # Noise for ε = 50 while claiming ε = 1: with 100 confirmation runs per side the scores
    # separate completely, so ε_lb ≈ log(0.95 / (log(4K/α)/100)) ≈ 3.0 > 1 (K = 2): a margin far
    # from chance, and deterministic (fixed root seed).
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
    # a correct mechanism declared as a zoo member is (correctly) not flagged: a miss, exit 1
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
    assert meta["suite_yaml"] == small and len(meta["runs"]) == 1  # nothing written
    assert main(["audit", str(changed), "--store", str(store), "--workers", "0", "--quiet",
                 "--restart"]) == 0
    assert list(_load(store, "outpert").p.values) == [3]


def test_a_failing_cell_is_recorded_and_the_audit_goes_on(tmp_path: Path) -> None:
    text = SMALL.replace("algorithms: [{label: op, algorithm: output_perturbation}]",
                         "algorithms: [{label: op, algorithm: output_perturbation}, "
                         "{label: bad, algorithm: test_failing_outpert}]")
    summary = run_audits(parse_suite(text), tmp_path / "f.zarr", workers=0, progress=False)
    ds = _load(tmp_path / "f.zarr", "outpert")
    bad, ok = ds.sel(algorithm="bad"), ds.sel(algorithm="op")
    assert np.all(bad.batch_status.values == FAILED) and summary.failed == 2
    assert all("RuntimeError: deliberate failure" in str(e) for e in bad.batch_error.values.ravel())
    assert int(bad.runs_completed.sum()) == 0 and np.isnan(bad.epsilon_lower_bound).all()
    assert np.all(ok.batch_status.values == DONE) and int(ok.runs_completed.sum()) == 200
    # 100 runs per side cannot approach the claim: a clean point says so instead of "pass"
    assert summary.results[0].tightness < 0.1
    assert [r.verdict for r in summary.results] == ["uninformative", "no runs"]


def test_audit_cells_obey_the_per_cell_time_limit(tmp_path: Path) -> None:
    """Audit batches run under the suite's hard per-cell limits like experiment cells: a hung
    mechanism's batches are killed and recorded as failed, and the other points complete."""
    text = ("cell_timeout_s: 0.01\n" + SMALL).replace(
        "algorithms: [{label: op, algorithm: output_perturbation}]",
        "algorithms: [{label: op, algorithm: output_perturbation}, "
        "{label: hung, algorithm: test_hanging_outpert}]")
    t0 = time.perf_counter()
    summary = run_audits(parse_suite(text), tmp_path / "h.zarr", workers=0, progress=False)
    assert time.perf_counter() - t0 < 300
    ds = _load(tmp_path / "h.zarr", "outpert")
    hung, ok = ds.sel(algorithm="hung"), ds.sel(algorithm="op")
    assert np.all(hung.batch_status.values == FAILED) and summary.failed == 2
    assert all("time limit" in str(e) for e in hung.batch_error.values.ravel())
    assert np.all(ok.batch_status.values == DONE) and int(ok.runs_completed.sum()) == 200


def test_an_audit_store_of_an_older_schema_is_refused_before_any_compute(tmp_path: Path) -> None:
    suite = parse_suite(SUITE)
    store = tmp_path / "old.zarr"
    run_audits(suite, store, workers=0, progress=False)
    group = zarr.open_group(str(store / "audit" / "outpert"), mode="r+")
    meta = dict(group.attrs[AUDIT_KEY])
    meta["definition"] = {**meta["definition"], "schema": 1}
    meta["fingerprint"] = "written-by-an-older-dpbench"
    group.attrs[AUDIT_KEY] = meta
    before = np.asarray(group["batch_status"][...]).copy()
    with pytest.raises(StoreError, match=rf"written with audit schema 1; this dpbench writes "
                                         rf"audit schema {AUDIT_SCHEMA}"):
        run_audits(suite, store, workers=0, progress=False)
    assert np.array_equal(np.asarray(group["batch_status"][...]), before)
