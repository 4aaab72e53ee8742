"""Lost workers mid-audit: the bound is computed on the completed runs only and stays valid.

One audit holds a correct mechanism (noisy SGD, strongly convex variant) and a broken-zoo member
(``broken_data_dependent_step``: its run on D′ never moves, a point mass against a continuous
law) at the same point, so that packed tasks interleave their batches. A 2-worker LocalCluster
runs it with ``distributed.scheduler.allowed-failures = 0``; when the first task result arrives,
every worker process is SIGKILLed. The tasks running or queued on the killed workers then fail
(KilledWorker) and their batches are recorded as failed; the nannies restart the workers and the
remaining tasks complete. Deterministic enough: 4 tasks of ~1 s each (5 batches of 100 runs), so when the first result
arrives at least one other task is in flight; the first task holds batches of both mechanisms.
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
from dpbench.audit.stats import audit_bound
from dpbench.audit.store import open_audit
from dpbench.config.suite import parse_suite
from dpbench.core.schema import DONE, FAILED
from tests.support import failures as tf
from tests.support.cubes import assert_audits_identical

SUITE = textwrap.dedent("""
    name: killaudit
    root_seed: 23
    audit: {alpha: 0.05, runs: 800, batch: 100}
    audits:
      - name: mixed
        algorithms:
          - {label: sgd, algorithm: noisy_sgd, params: {variant: strongly_convex}}
          - {label: zoo, algorithm: broken_data_dependent_step}
        problems: [lb_quad]
        canaries: [sphere]
        grid: {n: [2], p: [1], epsilon: [1.0], delta: [1e-5]}
""")
BATCH = 100


def _recomputed(ds, algorithm: str) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(ε_lb, μ_lb, runs) from the stored completed scores, exactly as the engine should."""
    pt = ds.sel(algorithm=algorithm).isel(problem=0, n=0, p=0, epsilon=0, delta=0, canary=0)
    done = pt.batch_status.values == DONE
    s = pt.scores.values[done]                      # (k, side, run)
    select = np.tile(np.arange(BATCH) < BATCH // 2, int(done.sum()))
    b = audit_bound(s[:, 0].ravel(), s[:, 1].ravel(), select,
                    epsilon_claimed=float(pt.epsilon_claimed),
                    delta_claimed=float(pt.delta_claimed), mu_claimed=float(pt.mu_claimed),
                    alpha=float(pt.alpha))
    return b.epsilon_lb, b.mu_lb, int(done.sum()) * BATCH


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
        if killed:
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
    status = ds.batch_status.values
    assert summary.failed == int((status == FAILED).sum()) > 0, "the kill must lose batches"
    assert "KilledWorker" in " ".join(str(e) for e in ds.batch_error.values[status == FAILED])
    completed = ds.runs_completed.values.ravel()
    assert np.any(completed < ds.runs_planned.values.ravel())
    assert np.all(completed >= BATCH), "the first task holds a batch of each mechanism"
    for algo in ("sgd", "zoo"):
        eps_lb, mu_lb, runs = _recomputed(ds, algo)
        point = ds.sel(algorithm=algo)
        assert int(point.runs_completed.values.ravel()[0]) == runs
        assert float(point.epsilon_lower_bound.values.ravel()[0]) == eps_lb
        got_mu = float(point.mu_lower_bound.values.ravel()[0])
        assert got_mu == mu_lb or (math.isnan(got_mu) and math.isnan(mu_lb))
    # On the completed runs the correct mechanism still passes and the zoo member is caught:
    # its D′ runs are a point mass, so even one batch (50 confirmation runs per side) bounds ε
    # well above its claim of 0.19 (ε_lb ≈ 2.7 with 200 confirmation runs; ≥ 1 with 50).
    assert not bool(ds.violation.sel(algorithm="sgd").any())
    assert bool(ds.violation.sel(algorithm="zoo").all())
    assert float(ds.audit_gap.sel(algorithm="zoo").max()) < 0

    # Resuming computes exactly the lost batches; the store then equals an uninterrupted run.
    resumed = run_audits(suite, store, workers=0, progress=False)
    assert resumed.computed == int((status == FAILED).sum())
    ref = tmp_path / "ref.zarr"
    run_audits(suite, ref, workers=0, progress=False)
    assert_audits_identical(ref, store, ["mixed"])
    assert np.all(open_audit(store, "mixed").runs_completed.values == 800)
