"""Crash safety: SIGKILL the `dpbench run` process (and its cluster) mid-run and resume; SIGKILL a
worker mid-run. The final cube equals an uninterrupted run, bit for bit, with no lost or
duplicated cells."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from dpbench.config.suite import parse_suite
from dpbench.core.schema import DONE
from dpbench.engine.cells import TaskResult
from dpbench.engine.runner import run_suite
from tests.support import failures as tf
from tests.support.cubes import assert_cubes_identical, open_cube
from tests.support.failures import done_cells

SLOW_SUITE = textwrap.dedent("""
    name: slow
    root_seed: 3
    seeds: 3
    experiments:
      - name: e
        problems: [{problem: lb_lin}, {problem: lb_quad}]
        algorithms:
          - {label: sgd, algorithm: noisy_sgd, params: {sigma_mode: paper}}
          - {label: ref, algorithm: nonprivate_erm}
        grid: {n: [200, 300, 400, 500, 600], p: [3], epsilon: [1.0], delta: [1e-5]}
""")


@pytest.mark.slow
def test_sigkill_client_mid_run_then_resume(tmp_path: Path) -> None:
    suite_file = tmp_path / "slow.yaml"
    suite_file.write_text(SLOW_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(parse_suite(SLOW_SUITE), ref, workers=0, progress=False)
    total = int(np.prod(open_cube(ref, "e").status.shape))

    store = tmp_path / "crash.zarr"
    cmd = [sys.executable, "-m", "dpbench", "run", str(suite_file), "--store", str(store),
           "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while done_cells(store) == 0 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    done_at_kill = done_cells(store)
    os.killpg(proc.pid, signal.SIGKILL)  # the client, its scheduler and its workers
    proc.wait()
    assert 0 < done_at_kill < total, "the kill must land mid-run"

    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert_cubes_identical(ref, store, ["e"])
    st = open_cube(store, "e").status.values
    assert np.all(st == DONE)


@pytest.mark.slow
def test_sigkill_a_worker_mid_run_loses_and_duplicates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpbench.engine import runner

    monkeypatch.setattr(runner, "LINGER_S", 0.0)  # the first result is written (and seen) at once
    suite = parse_suite(SLOW_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(suite, ref, workers=0, progress=False)
    killed: list[int] = []
    seen_keys: list[str] = []

    def kill_one_worker(res: TaskResult) -> None:
        seen_keys.append(res.key)
        if killed:
            return
        from distributed import get_client

        client = get_client()
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)

    store = tmp_path / "w.zarr"
    with tf.local_cluster(2) as address:
        summary = run_suite(suite, store, scheduler=address, progress=False,
                            on_result=kill_one_worker)
    assert killed, "a worker was killed"
    assert summary.complete
    assert len(seen_keys) == len(set(seen_keys)), "a task was consumed twice"
    assert summary.computed == int(np.prod(open_cube(ref, "e").status.shape))
    assert_cubes_identical(ref, store, ["e"])


@pytest.mark.slow
def test_sigterm_mid_run_exits_143_records_the_interruption_and_resumes(tmp_path: Path) -> None:
    """SIGTERM (a batch system's walltime, ``timeout``) ends the run like Ctrl-C: exit 143, the
    cluster closed, the interruption in the run log, the lock released; the same command resumes
    to the uninterrupted cube (docs/reliability.md, 'Signals')."""
    import json

    from dpbench.store.cube import ROOT_KEY
    from dpbench.store.lock import lock_path

    suite_file = tmp_path / "slow.yaml"
    suite_file.write_text(SLOW_SUITE)
    ref = tmp_path / "ref.zarr"
    run_suite(parse_suite(SLOW_SUITE), ref, workers=0, progress=False)
    total = int(np.prod(open_cube(ref, "e").status.shape))
    store = tmp_path / "term.zarr"
    cmd = [sys.executable, "-m", "dpbench", "run", str(suite_file), "--store", str(store),
           "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while done_cells(store) == 0 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert 0 < done_cells(store) < total, "the signal must land mid-run"
    runs = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert "Terminated" in runs[-1].get("interrupted", ""), runs[-1]
    assert not lock_path(store).exists()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert_cubes_identical(ref, store, ["e"])
