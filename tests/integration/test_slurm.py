"""A real SLURM (scripts/slurm-local.sh: Debian's slurm-wlm + munge on this machine): a suite runs
through ``--cluster cluster/slurm-local.yaml`` into the cube LocalCluster gives, the queue is
empty afterwards, and SIGTERM mid-run ends with exit 143, the interruption recorded and the
worker jobs gone from the queue. Skipped when no SLURM answers here (``.ci/run`` starts one when
the packages are installed)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpbench.config.suite import parse_suite
from dpbench.engine.runner import run_suite
from dpbench.store.cube import ROOT_KEY
from tests.support.cubes import TINY_SUITE, assert_cubes_identical

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "cluster" / "slurm-local.yaml"

pytestmark = pytest.mark.slow


def _slurm_up() -> bool:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-p", "dpbench", "-o", "%T"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and any(s in out.stdout for s in ("idle", "mixed", "alloc"))


requires_slurm = pytest.mark.skipif(not _slurm_up(),
                                    reason="no local SLURM (scripts/slurm-local.sh start)")


def _our_jobs() -> list[str]:
    out = subprocess.run(["squeue", "-h", "-p", "dpbench", "-n", "dask-worker", "-o", "%i"],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.split()


def _wait_queue_empty(timeout: float = 60) -> list[str]:
    deadline = time.time() + timeout
    while (jobs := _our_jobs()) and time.time() < deadline:
        time.sleep(0.5)
    return jobs


@requires_slurm
def test_a_suite_runs_through_slurm_into_the_local_cube(tmp_path: Path) -> None:
    pytest.importorskip("dask_jobqueue")
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(parse_suite(TINY_SUITE), ref, workers=0, progress=False)
    store = tmp_path / "slurm.zarr"
    r = subprocess.run([sys.executable, "-m", "dpbench", "run", str(suite), "--store",
                        str(store), "--cluster", str(PROFILE), "--quiet"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "SLURMCluster" in r.stdout
    assert_cubes_identical(ref, store, ["approx", "pure"])
    assert _wait_queue_empty() == []


@requires_slurm
def test_sigterm_through_slurm_exits_143_and_empties_the_queue(tmp_path: Path) -> None:
    pytest.importorskip("dask_jobqueue")
    from tests.integration.test_crash_recovery import SLOW_SUITE, _done_cells

    suite = tmp_path / "slow.yaml"
    suite.write_text(SLOW_SUITE)
    store = tmp_path / "term.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "dpbench", "run", str(suite), "--store",
                             str(store), "--cluster", str(PROFILE), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while _done_cells(store) == 0 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert _our_jobs(), "worker jobs should be queued or running mid-run"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, err[-3000:]
    runs = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert "Terminated" in runs[-1].get("interrupted", "")
    assert _wait_queue_empty() == []


@requires_slurm
def test_the_shipped_slurm_layout_runs_without_failed_cells(tmp_path: Path) -> None:
    """cluster/slurm.yaml as a user fills it in (partition, account, the prologue activating this
    environment; python3 on the job's PATH): one worker per job, adapt 0-10 with wait_count, no
    churn — every cell done, the cube LocalCluster gives, the queue empty afterwards."""
    pytest.importorskip("dask_jobqueue")
    text = (ROOT / "cluster" / "slurm.yaml").read_text()
    venv = Path(sys.executable).parent
    prof = tmp_path / "site.yaml"
    prof.write_text(text.replace("CHANGE-ME-partition", "dpbench")
                    .replace("CHANGE-ME-account", "proj42")
                    .replace("source ~/venvs/dpbench/bin/activate",
                             f"export PATH={venv}:$PATH")
                    .replace("--output=dpbench-worker-%j.out",
                             f"--output={tmp_path}/worker-%j.out"))
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(parse_suite(TINY_SUITE), ref, workers=0, progress=False)
    store = tmp_path / "site.zarr"
    r = subprocess.run([sys.executable, "-m", "dpbench", "run", str(suite), "--store",
                        str(store), "--cluster", str(prof), "--quiet"], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert " 0 failed" in r.stdout
    assert_cubes_identical(ref, store, ["approx", "pure"])
    assert _wait_queue_empty() == []
