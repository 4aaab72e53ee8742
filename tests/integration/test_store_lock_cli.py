"""Two ``dpbench run`` on the same new store, started together, 20 times (issue: no store lock).

Each race must end with one writer that proceeds (exit 0) and one refused with exit 2 naming the
holder — or, when the first finished before the second got going, a clean resume (both 0) — and
never with a corrupt store: ``status`` reads it, every cell is done, and the run log has one entry
per writer that proceeded (no lost root-attribute write). The 20 races fork the CLI's ``main``
from this process (the same code as the command, without 20 × 2 interpreter start-ups); two more
races run the real command in subprocesses.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import pytest

from dpbench.store.cube import ROOT_KEY, Store
from dpbench.store.lock import lock_path

pytestmark = pytest.mark.slow

SUITE = """
name: race
root_seed: 1
experiments:
  - name: e
    problems: [{problem: lb_quad}]
    algorithms: [{algorithm: output_perturbation}]
    grid: {n: [10, 20], p: [2], epsilon: [1.0]}
    seeds: 3
"""


def _check_store(store: Path, proceeded: int) -> None:
    s = Store.open(store)
    counts = s.counts("e")
    assert (counts.done, counts.total) == (6, 6)
    runs = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert len(runs) == proceeded, runs
    assert not lock_path(store).exists()


def _cli(args: list[str], barrier: mp.synchronize.Barrier, out: mp.Queue) -> None:  # type: ignore[name-defined]
    import contextlib
    import io

    from dpbench.cli.main import main

    barrier.wait()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    out.put((code, err.getvalue()))


def test_twenty_concurrent_runs_on_one_new_store(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    ctx = mp.get_context("fork")
    refused = 0
    for i in range(20):
        store = tmp_path / f"r{i}.zarr"
        args = ["run", str(suite), "--store", str(store), "--workers", "0", "--quiet"]
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_cli, args=(args, barrier, out)) for _ in range(2)]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(30)
        codes = sorted(code for code, _ in results)
        assert codes in ([0, 0], [0, 2]), (i, results)
        if codes == [0, 2]:
            refused += 1
            err = next(e for code, e in results if code == 2)
            assert "being written by dpbench run race" in err and "Traceback" not in err
        _check_store(store, codes.count(0))
    assert refused >= 10, refused  # started together, most races really overlap


def test_two_real_commands_race(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    for i in range(2):
        store = tmp_path / f"c{i}.zarr"
        cmd = [sys.executable, "-m", "dpbench", "run", str(suite), "--store", str(store),
               "--workers", "0", "--quiet"]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        codes = sorted(p.returncode for p in procs)
        assert codes in ([0, 0], [0, 2]), (codes, outs)
        _check_store(store, codes.count(0))
