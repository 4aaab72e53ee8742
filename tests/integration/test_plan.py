"""``dpbench plan``: the cost of a run before it starts, and the run-log timings it calibrates
from (issue 18). The estimates are arithmetic on recorded figures, checked exactly; only the
recorded seconds themselves are measurements, and the tests assert nothing about their size
beyond being positive."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dpbench.cli.main import main
from dpbench.config.suite import parse_suite
from dpbench.engine.estimate import UNITS_PER_SECOND, Scale, calibration, estimate
from dpbench.engine.plan import plan_suite
from dpbench.engine.runner import run_suite
from dpbench.store.cube import ROOT_KEY, Store
from tests.support.cubes import TINY_SUITE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("plan")
    (d / "t.yaml").write_text(TINY_SUITE)
    run_suite(parse_suite(TINY_SUITE), d / "s.zarr", workers=0, progress=False)
    return d


def test_a_run_records_what_each_class_cost(ran: Path) -> None:
    run = Store.open(ran / "s.zarr").root.attrs[ROOT_KEY]["runs"][-1]
    timings = run["timings"]
    assert "noisy_sgd|lb_lin" in timings and "output_perturbation|logistic" in timings
    assert sum(row["cells"] for row in timings.values()) == run["cells_computed"]
    for row in timings.values():
        assert row["seconds"] > 0 and row["units"] > 0
        assert 0 < row["first_tasks"] and row["first_seconds"] <= row["seconds"] + 1e-9
        assert row["first_units"] <= row["units"]


def test_an_estimate_is_rate_times_work_plus_one_off_costs(ran: Path) -> None:
    suite = parse_suite(TINY_SUITE)
    plan = plan_suite(suite)
    raw = estimate(suite, plan)
    assert raw.cells == plan.n_cells == 124
    assert raw.cpu_seconds == pytest.approx(plan.total_cost / UNITS_PER_SECOND)
    assert all(c.measured is None for c in raw.classes)
    scales = {"noisy_sgd|lb_lin": Scale(1e-6, 0.25, 2e-7, 0.5)}
    est = estimate(suite, plan, scales, ["x"], workers=2)
    sgd = next(c for c in est.classes if (c.algorithm, c.problem) == ("noisy_sgd", "lb_lin"))
    # "sgd" at n = 8, 16, 24 (4 seeds each; "sgd_sc" does not apply to the linear loss):
    # 3 chunks, each worker pays its one-off once (min(2 workers, 3 chunks))
    mech = data = 0.0
    for n in (8, 16, 24):
        m, d = _units("noisy_sgd", {"sigma_mode": "accountant"}, n, 3)
        mech, data = mech + 4 * m, data + 4 * d
    assert sgd.cells == 12
    assert sgd.seconds == pytest.approx(mech * 1e-6 + 3 * 0.25 + data * 2e-7 + 2 * 0.5)
    others = math.fsum(c.seconds for c in est.classes if c is not sgd)
    assert est.cpu_seconds == pytest.approx(sgd.seconds + others)
    assert 0 < est.calibrated_fraction < 1


def _units(algorithm: str, params: dict, n: int, p: int) -> tuple[float, float]:
    """(Algorithm.cost(n, p), the data term n·p + CELL_OVERHEAD_COST) of one cell."""
    from dpbench.core import registry
    from dpbench.engine.plan import CELL_OVERHEAD_COST

    return float(registry.get("algorithms", algorithm)(**params).cost(n, p)), \
        float(n * p + CELL_OVERHEAD_COST)


def test_calibration_reads_the_rate_the_one_offs_and_the_data_term(tmp_path: Path) -> None:
    """A tiny store whose timings are replaced by made-up ones: noisy_sgd's cells take
    2e-7 s per cost unit, plus 1 s in the first cell of each chunk (a noise calibration); its
    tasks took 4e-8 s per data unit once warm and its first tasks 0.3 s more. The calibration
    must give back exactly these figures."""
    store = tmp_path / "s.zarr"
    run_suite(parse_suite(TINY_SUITE), store, workers=0, progress=False)
    s = Store.open(store, mode="r+")
    g = s.root["approx"]
    wall = np.asarray(g["wall_time_s"][...])
    sgd = 1  # the label "sgd" (noisy_sgd with the accountant's sigma), on lb_lin (problem 0)
    mech_total = data_total = 0.0
    for ni, n in enumerate([8, 16, 24]):
        mech, data = _units("noisy_sgd", {"sigma_mode": "accountant"}, n, 3)
        wall[sgd, 0, ni, 0, 0, 0, :] = 2e-7 * mech
        wall[sgd, 0, ni, 0, 0, 0, 0] += 1.0
        mech_total += 4 * mech
        data_total += 4 * data
    g["wall_time_s"][...] = wall
    mech_seconds = 2e-7 * mech_total + 3 * 1.0
    meta = dict(s.root.attrs[ROOT_KEY])
    # half the work in the first tasks (0.3 s of one-off beyond the rates), half warm
    warm = 4e-8 * data_total / 2 + mech_seconds / 2
    meta["runs"] = [{"timings": {
        "noisy_sgd|lb_lin": {"seconds": 2 * warm + 0.3, "units": mech_total + data_total,
                             "first_seconds": warm + 0.3,
                             "first_units": (mech_total + data_total) / 2, "first_tasks": 1,
                             "cells": 12}}},
        {"seconds": 1.0}]  # a run recorded before timings existed: contributes nothing
    s.root.attrs[ROOT_KEY] = meta
    scales, used = calibration([Store.open(store)])
    assert used == [str(store)]
    fine = next(k for k in scales if k.startswith("noisy_sgd|lb_lin|"))
    assert scales[fine].rate == pytest.approx(2e-7)
    assert scales[fine].per_chunk == pytest.approx(1.0)
    assert scales["noisy_sgd|lb_lin"].data == pytest.approx(4e-8)
    assert scales["noisy_sgd|lb_lin"].per_worker == pytest.approx(0.3)
    # classes without timings keep the default data rate; their rates still come from cells
    assert scales["nonprivate_erm|lb_quad"].data == pytest.approx(1 / UNITS_PER_SECOND)
    assert scales["nonprivate_erm|lb_quad"].rate > 0


def test_plan_command(ran: Path, capsys: pytest.CaptureFixture) -> None:
    suite, store = str(ran / "t.yaml"), str(ran / "s.zarr")
    assert main(["plan", suite]) == 0
    out = capsys.readouterr().out
    assert "cells to compute: 124" in out and "uncalibrated" in out
    assert main(["plan", suite, "--calibrate", store, "--workers", "4"]) == 0
    out = capsys.readouterr().out
    assert "100% of it calibrated from" in out and "(measured)" in out
    assert "on 4 worker(s)" in out
    # resuming the finished store: nothing left to compute
    assert main(["plan", suite, "--store", store]) == 0
    assert "cells to compute: 0" in capsys.readouterr().out
    assert main(["plan", suite, "--only", "experiment=pure"]) == 0
    # output perturbation does not apply to the hinge loss: 2 problems x 8 points x 4 seeds
    assert "cells to compute: 64" in capsys.readouterr().out
    assert main(["plan", suite, "--cluster", str(ROOT / "cluster" / "slurm-local.yaml")]) == 0
    out = capsys.readouterr().out
    assert "1 worker(s) per job" in out and "job walltime" in out


@pytest.mark.parametrize("argv", [["--calibrate", "{d}/nothing.zarr"], ["--workers", "0"],
                                  ["--only", "algorithm=nope"]])
def test_plan_bad_input_exits_2(ran: Path, argv: list[str], capsys: pytest.CaptureFixture,
                                ) -> None:
    args = [a.replace("{d}", str(ran)) for a in argv]
    assert main(["plan", str(ran / "t.yaml"), *args]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_plan_of_an_audit_suite_says_what_it_holds(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """An audit-only suite once planned as "cells to compute: 0" and "about 0 s": it now counts
    its audit points and configurations, and the time their budgets buy (pinned runs: not
    estimated)."""
    from tests.integration.test_audit_engine import SUITE as AUDIT_SUITE

    (tmp_path / "a.yaml").write_text(AUDIT_SUITE)
    assert main(["plan", str(tmp_path / "a.yaml")]) == 0
    out = capsys.readouterr().out
    assert "cells to compute" not in out and "about 0 s" not in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("audits:"))
    assert "applicable points searching" in line and "not estimated" in line
    budgeted = AUDIT_SUITE.replace("audit: {alpha: 0.05, runs: 400, selection_runs: 400}",
                                   "audit: {alpha: 0.05, budget_s: 30}")
    (tmp_path / "b.yaml").write_text(budgeted)
    assert main(["plan", str(tmp_path / "b.yaml"), "--workers", "2"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.strip().startswith("audits:"))
    assert "budgets 180 s of worker time, about 90 s on 2 worker(s)" in line, line
    assert not any(tmp_path.glob("*.zarr"))
