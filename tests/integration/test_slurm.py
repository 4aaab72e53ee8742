"""A real SLURM (scripts/slurm-local.sh: Debian's slurm-wlm + munge on this machine): a suite runs
through ``--cluster cluster/slurm-local.yaml`` into the cube LocalCluster gives, the queue is
empty afterwards, and SIGTERM or Ctrl-C mid-run ends with exit 143 or 130, the interruption
recorded and the worker jobs gone from the queue. Skipped when no SLURM answers here (``.ci/run`` starts one when
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
from tests.support.failures import default_sigint

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
@pytest.mark.parametrize(("sig", "code", "recorded"), [
    (signal.SIGTERM, 143, "Terminated"),
    # dask-jobqueue's own SIGINT handler calls sys.exit() (exit 0); it is not let in
    (signal.SIGINT, 130, "KeyboardInterrupt"),
])
def test_a_signal_through_slurm_exits_128_plus_it_and_empties_the_queue(
        tmp_path: Path, sig: signal.Signals, code: int, recorded: str) -> None:
    """SIGTERM (walltime, ``timeout``) and Ctrl-C mid-run with a dask-jobqueue profile: the
    shell's 128 + signal, the interruption recorded, no worker job left in the queue."""
    pytest.importorskip("dask_jobqueue")
    from tests.integration.test_crash_recovery import SLOW_SUITE
    from tests.support.failures import done_cells

    suite = tmp_path / "slow.yaml"
    suite.write_text(SLOW_SUITE)
    store = tmp_path / "sig.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "dpbench", "run", str(suite), "--store",
                             str(store), "--cluster", str(PROFILE), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.time() + 180
    while done_cells(store) == 0 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert _our_jobs(), "worker jobs should be queued or running mid-run"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == code, err[-3000:]
    runs = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert recorded in runs[-1].get("interrupted", "")
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


def _local_profile(tmp_path: Path, name: str, *, extra: list[str] | None = None,
                   **top: object) -> Path:
    """cluster/slurm-local.yaml with extra #SBATCH directives and top-level fields."""
    import yaml

    prof = yaml.safe_load(PROFILE.read_text())
    if extra:
        prof["cluster"]["kwargs"]["job_extra_directives"] = extra
    prof["cluster"]["kwargs"]["log_directory"] = str(tmp_path / "jobs")
    prof.update(top)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(prof))
    return path


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpbench", "run", *args, "--quiet"],
                          capture_output=True, text=True, timeout=timeout)


@requires_slurm
def test_a_worker_job_slurm_refuses_is_bad_input_before_the_store(tmp_path: Path) -> None:
    """A wrong partition or a job larger than the node: ``sbatch --test-only`` on the job script
    refuses it, so the run exits 2 naming what SLURM said, and nothing is created."""
    pytest.importorskip("dask_jobqueue")
    import yaml

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    for name, change, said in (("partition", {"queue": "no-such-partition"}, "partition"),
                               ("too-big", {"cores": 64, "processes": 64},
                                "node configuration is not available")):
        prof = yaml.safe_load(PROFILE.read_text())
        prof["cluster"]["kwargs"].update(change)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(prof))
        store = tmp_path / f"{name}.zarr"
        t0 = time.time()
        r = _run([str(suite), "--store", str(store), "--cluster", str(path)], timeout=120)
        assert r.returncode == 2, r.stderr[-2000:]
        assert "refuses the worker job" in r.stderr and said in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        assert not store.exists() and not Path(f"{store}.lock").exists()
        assert time.time() - t0 < 60
    assert _wait_queue_empty() == []


@requires_slurm
@pytest.mark.parametrize(("directive", "top", "said"), [
    ("--hold", {}, "JobHeldUser"),                                    # never starts: at once
    ("--begin=now+3600", {"worker_timeout_s": 15}, "BeginTime"),      # pending: the timeout
])
def test_worker_jobs_that_never_start_end_the_run_with_exit_2_and_the_reason(
        tmp_path: Path, directive: str, top: dict, said: str) -> None:
    """SLURM accepts the job but does not start it: the run does not hang. A held job is given
    up on as soon as squeue says so; a job pending for a reason that may clear gets the profile's
    worker_timeout_s. Exit 2 with the jobs' state and reason, the interruption recorded, the
    jobs cancelled."""
    pytest.importorskip("dask_jobqueue")
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    prof = _local_profile(tmp_path, "stuck", extra=[directive], **top)
    store = tmp_path / "stuck.zarr"
    t0 = time.time()
    r = _run([str(suite), "--store", str(store), "--cluster", str(prof)], timeout=300)
    took = time.time() - t0
    assert r.returncode == 2, r.stderr[-3000:]
    assert said in r.stderr and "PENDING" in r.stderr, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert took < 90, took
    runs = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert "NoWorkers" in runs[-1].get("interrupted", "")
    assert not Path(f"{store}.lock").exists()
    assert _wait_queue_empty() == []


@requires_slurm
def test_scancel_of_every_worker_job_mid_run_is_survived(tmp_path: Path) -> None:
    """The shipped adaptive layout (one worker per job): scancel every worker job once mid-run;
    adapt submits new jobs, the lost tasks are re-run, and the cube is complete (0 failed) and
    equal to LocalCluster's."""
    pytest.importorskip("dask_jobqueue")
    import yaml

    from tests.integration.test_crash_recovery import SLOW_SUITE
    from tests.support.failures import done_cells

    prof = yaml.safe_load(PROFILE.read_text())
    del prof["scale"]
    prof["adapt"] = {"minimum_jobs": 0, "maximum_jobs": 2, "wait_count": 10}
    prof["cluster"]["kwargs"]["log_directory"] = str(tmp_path / "jobs")
    path = tmp_path / "adaptive.yaml"
    path.write_text(yaml.safe_dump(prof))
    suite = tmp_path / "slow.yaml"
    suite.write_text(SLOW_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(parse_suite(SLOW_SUITE), ref, workers=0, progress=False)
    store = tmp_path / "scancel.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "dpbench", "run", str(suite), "--store",
                             str(store), "--cluster", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while done_cells(store) == 0 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    jobs = _our_jobs()
    assert jobs and proc.poll() is None, "the run should be mid-way with worker jobs"
    subprocess.run(["scancel", *jobs], check=True, timeout=30)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-2000:] + err[-3000:]
    assert " 0 failed" in out
    assert_cubes_identical(ref, store, ["e"])
    assert _wait_queue_empty() == []
