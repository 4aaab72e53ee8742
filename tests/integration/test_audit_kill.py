"""Lost workers mid-audit: the bound is computed on the completed runs only and stays valid.

One audit holds a correct mechanism (noisy SGD, strongly convex variant) and a broken-zoo member
(``broken_data_dependent_step``: its run on D′ never moves, a point mass against a continuous
law) at the same point. A 2-worker LocalCluster runs it with
``distributed.scheduler.allowed-failures = 0``; when the first result of the confirmation round
arrives, every worker process is SIGKILLed. The confirmation batches running or queued on the
killed workers then fail (KilledWorker) and are recorded as failed; the nannies restart the
workers and the remaining batches complete. Each point has 6 confirmation batches of 500 runs
per side (pinned runs), packed into several tasks, so when the first result arrives others are
in flight.
"""

from __future__ import annotations

import math
import os
import signal
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dpbench.audit.engine import AuditTaskResult, run_audits
from dpbench.audit.stats import bounds_from_counts, event_alpha
from dpbench.audit.store import open_audit
from dpbench.config.suite import parse_suite
from dpbench.core.schema import DONE, FAILED
from tests.integration.test_audit_engine import _state
from tests.support import failures as tf
from tests.support.cubes import assert_audits_identical

SUITE = textwrap.dedent("""
    name: killaudit
    root_seed: 23
    audit: {alpha: 0.05, runs: 3000, selection_runs: 400}
    audits:
      - name: mixed
        algorithms:
          - {label: sgd, algorithm: noisy_sgd, params: {variant: strongly_convex}}
          - {label: zoo, algorithm: broken_data_dependent_step}
        problems: [lb_quad]
        canaries: [sphere]
        grid: {n: [2], p: [1], epsilon: [1.0], delta: [1e-5]}
""")
RUNS = 3000


def _confirm_batches(store: Path, flat: int) -> dict[str, dict]:
    return {k: b for k, b in _state(store, "mixed", flat)["batches"].items()
            if k.startswith("confirm/")}


def _recomputed(store: Path, ds, flat: int) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(ε_lb, μ_lb, runs) from the stored counts of the completed confirmation batches, exactly
    as the engine should compute them."""
    import zarr

    state = _state(store, "mixed", flat)
    events = state["selection"]["events"]
    done = [int(k.split("/b")[1]) for k, b in _confirm_batches(store, flat).items()
            if b["status"] == DONE]
    counts = np.asarray(zarr.open_group(str(store / "audit/mixed/points" / str(flat)),
                                        mode="r")["confirm_counts"][...])[done].sum(axis=0)
    runs = sum(b["runs"] for b in _confirm_batches(store, flat).values() if b["status"] == DONE)
    num = np.array([e["numerator"] == 1 for e in events])
    pt = ds.isel(algorithm=flat)
    bounds = bounds_from_counts(np.where(num, counts[1], counts[0]),
                                np.where(num, counts[0], counts[1]), runs,
                                delta=float(pt.delta_claimed.values.ravel()[0]),
                                alpha_each=event_alpha(float(pt.alpha.values.ravel()[0]),
                                                       len(events)))
    return max(b.epsilon_lb for b in bounds), max(b.mu_lb for b in bounds), runs


@pytest.mark.slow
def test_killing_every_worker_mid_audit_shrinks_counts_keeps_bounds_valid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dask

    from dpbench.engine import runner

    monkeypatch.setattr(runner, "LINGER_S", 0.0)  # the first result is written (and seen) at once
    import distributed  # noqa: F401  (loads distributed's config before it is overridden)

    suite = parse_suite(SUITE)
    killed: list[int] = []

    def kill_all_workers(res: AuditTaskResult) -> None:
        if killed or not any(b.work.kind == "confirm" for b in res.batches):
            return
        from distributed import get_client

        for pid in sorted(get_client().run(os.getpid).values()):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    store = tmp_path / "killed.zarr"
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            tf.local_cluster(2) as address:
        summary = run_audits(suite, store, scheduler=address, progress=False,
                             on_result=kill_all_workers)
    assert len(killed) == 2
    ds = open_audit(store, "mixed").load()
    lost = {flat: [k for k, b in _confirm_batches(store, flat).items() if b["status"] == FAILED]
            for flat in (0, 1)}
    assert summary.failed == sum(map(len, lost.values())) > 0, "the kill must lose batches"
    errors = [b["error"] for flat in (0, 1) for b in _confirm_batches(store, flat).values()
              if b["status"] == FAILED]
    assert "KilledWorker" in " ".join(errors)
    completed = ds.runs_completed.values.ravel()
    assert np.any(completed < ds.runs_planned.values.ravel())
    for flat in (0, 1):
        eps_lb, mu_lb, runs = _recomputed(store, ds, flat)
        point = ds.isel(algorithm=flat)
        assert int(point.runs_completed.values.ravel()[0]) == runs
        got_mu = float(point.mu_lower_bound.values.ravel()[0])
        if runs == 0:  # every confirmation batch of the point was lost: no bound at all
            assert math.isnan(got_mu) and math.isnan(float(point.epsilon_lower_bound.values.ravel()[0]))
            continue
        assert float(point.epsilon_lower_bound.values.ravel()[0]) == eps_lb
        assert got_mu == mu_lb
    # On the completed runs the correct mechanism still passes and the zoo member is caught (if
    # any of its confirmation batches completed): its D′ runs are a point mass, so one batch of
    # 500 runs per side bounds ε far above its claim of 0.19.
    assert not bool(ds.violation.sel(algorithm="sgd").any())
    if int(ds.runs_completed.sel(algorithm="zoo").sum()):
        assert bool(ds.violation.sel(algorithm="zoo").all())

    # Resuming computes exactly the lost batches; the store then equals an uninterrupted run.
    resumed = run_audits(suite, store, workers=0, progress=False)
    assert resumed.computed == sum(map(len, lost.values()))
    ref = tmp_path / "ref.zarr"
    run_audits(suite, ref, workers=0, progress=False)
    assert_audits_identical(ref, store, ["mixed"])
    assert np.all(open_audit(store, "mixed").runs_completed.values == RUNS)
