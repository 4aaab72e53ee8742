"""A suite run through `--scheduler` on a separately started `dask scheduler` and two
`dask worker` processes gives the same cube, bit for bit, as an inline run and as a LocalCluster
run."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpbench.cli.main import main
from dpbench.config.suite import load_suite
from dpbench.engine.runner import run_suite
from tests.support.cubes import assert_cubes_identical


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_external_scheduler_and_worker_processes(tiny_suite_file: Path, tmp_path: Path) -> None:
    dask = shutil.which("dask", path=str(Path(sys.executable).parent))
    assert dask, "the dask command ships with distributed"
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0", "--no-show"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        time.sleep(2)
        for i in range(2):
            procs.append(subprocess.Popen(
                [dask, "worker", address, "--nthreads", "1", "--nworkers", "1",
                 "--no-dashboard", "--local-directory", str(tmp_path / f"w{i}")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        store = tmp_path / "ext.zarr"
        assert main(["run", str(tiny_suite_file), "--store", str(store), "--scheduler", address,
                     "--quiet"]) == 0
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
    ref = tmp_path / "ref.zarr"
    run_suite(load_suite(tiny_suite_file), ref, workers=0, progress=False)
    assert_cubes_identical(ref, store, ["approx", "pure"])
    local = tmp_path / "local.zarr"  # and the embedded LocalCluster (2 worker processes)
    run_suite(load_suite(tiny_suite_file), local, workers=2, progress=False)
    assert_cubes_identical(local, store, ["approx", "pure"])
