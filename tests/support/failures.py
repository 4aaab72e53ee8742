"""Failure injection: the scenarios behind ``tests/integration/test_failure_injection.py`` and
``scripts/inject_failures.py`` (test support: not part of the installed package).

A small suite (:data:`FAULT_SUITE`) is run uninterrupted once (inline); then each scenario breaks a
run — SIGKILL a worker, SIGKILL the client and resume, kill the dask scheduler and resume, a cell
that hangs, a cell that exhausts its memory — and compares the final cube with the uninterrupted
one. Every scenario returns an :class:`Outcome` (passed, cells lost / differing / duplicated, what
``dpbench status`` showed).

Faults come from the test mechanism :class:`FaultInjector` (``fault_injector``: the non-private
reference, optionally slowed down), triggered through the environment variable
:data:`FAULT_ENV` so that the uninterrupted run and the resumed run use the very same suite:
``hang@N`` sleeps for an hour without calling ``checkpoint()``, ``memory@N`` allocates 4 GiB, in
every cell of problem ``lb_lin`` at ``n = N``. Worker processes import this module when they
unpickle the mechanism; client processes run ``python -m tests.support.failures run ...``
(with the repository root on ``PYTHONPATH``, see :func:`child_env`), which registers the
mechanism and runs the ``dpbench`` command line.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dpbench.algorithms.nonprivate import NonPrivateERM
from dpbench.core import registry
from dpbench.core.algorithm import Release
from dpbench.core.params import Param
from dpbench.core.problem import Dataset, Problem
from dpbench.core.schema import DONE, FAILED, FLOAT_VARS, NONDETERMINISTIC_VARS
from dpbench.engine.cells import TaskResult

FAULT_ENV = "DPBENCH_INJECT_FAULT"
#: The n at which faults fire (problem lb_lin only), and the limits of :data:`FAULT_SUITE`.
FAULT_N = 60
TIMEOUT_S = 1.0
MEMORY_MB = 256
HUNG_MESSAGE = f"exceeded its time limit of {TIMEOUT_S:g} s (killed)"
MEMORY_MESSAGE = f"MemoryError: exceeded the cell memory limit of {MEMORY_MB:g} MB"
EXPERIMENT = "e"

FAULT_SUITE = f"""\
name: faults
root_seed: 11
seeds: 2
cell_timeout_s: {TIMEOUT_S:g}
cell_memory_mb: {MEMORY_MB:g}
experiments:
  - name: {EXPERIMENT}
    problems: [{{problem: lb_lin}}, {{problem: lb_quad}}]
    algorithms:
      - {{label: ref, algorithm: nonprivate_erm}}
      - {{label: fault, algorithm: fault_injector, params: {{delay_s: 0.2}}}}
    grid: {{n: [40, {FAULT_N}, 80, 100, 120], p: [3], epsilon: [1.0], delta: [1e-5]}}
"""


class FaultInjector(NonPrivateERM):
    """The non-private reference, ``delay_s`` slower per cell, with faults from :data:`FAULT_ENV`.

    Its results never depend on the fault setting or the delay, so a faulty run and a clean run
    of the same suite must agree on every cell that completed.
    """

    name: ClassVar[str] = "fault_injector"
    summary: ClassVar[str] = "Test mechanism: hangs or exhausts memory on demand"
    citation: ClassVar[str] = "dpbench failure injection (tests only)"
    params: ClassVar[dict[str, Param]] = {
        "delay_s": Param(kind="float", default=0.0, low=0.0, doc="sleep per cell (seconds)"),
        "cheap": Param(kind="bool", default=False,
                       doc="declare a small cost, so that chunks are packed several per task"),
    }

    def cost(self, n: int, p: int) -> float:
        if self.get_params()["cheap"]:
            return float(n * p)
        return 1e7  # one task per chunk, so that a run has many tasks to interrupt

    def run(self, data: Dataset, problem: Problem, *, epsilon: float, delta: float,
            rng: np.random.Generator) -> Release:
        kind, _, at = os.environ.get(FAULT_ENV, "").partition("@")
        if at and data.n == int(at) and problem.name == "lb_lin":
            if kind == "hang":
                time.sleep(3600)  # no checkpoint(): only a hard limit stops it
            elif kind == "memory":
                np.ones(4 * 2**30 // 8).sum()
            elif kind == "segfault":
                os.kill(os.getpid(), signal.SIGSEGV)  # what a crashing compiled extension does
        time.sleep(self.get_params()["delay_s"])
        return super().run(data, problem, epsilon=epsilon, delta=delta, rng=rng)


def register() -> None:
    """Register :class:`FaultInjector` in this process (suite parsing needs it)."""
    registry.register("algorithms", FaultInjector)


# --- comparing cubes ----------------------------------------------------------------------------

@dataclass
class Comparison:
    """How a cube differs from the uninterrupted reference."""

    lost: int          # cells done in the reference but not in the cube
    differing: int     # done cells whose deterministic values differ (bit for bit)
    failed: list[str]  # error messages of failed cells


def _open(store: Path) -> Any:
    import xarray as xr

    return xr.open_zarr(str(store), group=EXPERIMENT, consolidated=False).load()


def compare(ref: Path, store: Path) -> Comparison:
    """Cell by cell comparison of the cube at ``store`` with the reference cube."""
    a, b = _open(ref), _open(store)
    done = b["status"].values == DONE
    lost = int(np.sum((a["status"].values == DONE) & ~done))
    differing = np.zeros(done.shape, dtype=bool)
    for var in (*FLOAT_VARS, "status", "error"):
        if var in NONDETERMINISTIC_VARS:
            continue
        va, vb = a[var].values, b[var].values
        same = va.view(np.uint64) == vb.view(np.uint64) if va.dtype.kind == "f" else va == vb
        differing |= ~same
    failed = [str(e) for e in b["error"].values[b["status"].values == FAILED]]
    return Comparison(lost, int(np.sum(differing & done)), failed)


def done_cells(store: Path) -> int:
    """Cells marked done in ``store`` so far (0 while it does not exist yet).

    Called while a run writes the store: zarr may list a group whose metadata is not written
    yet, or a chunk's temporary ``.partial`` file, and warns about it (``ZarrUserWarning``);
    that is this reader racing the writer, not a defect of the store, so it is not shown.
    """
    import warnings

    from dpbench.store.cube import Store

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Object at .* is not recognized")
            return int((Store.open(store).status(EXPERIMENT) == DONE).sum())
    except Exception:
        return 0


def duplicated_cells(store: Path) -> int:
    """Cells counted as computed by more than one recorded run (runs killed by SIGKILL record
    nothing, so their cells are not counted)."""
    from dpbench.store.cube import ROOT_KEY, Store

    runs = Store.open(store).root.attrs[ROOT_KEY].get("runs", [])
    return max(0, sum(int(r.get("cells_computed", 0)) for r in runs) - done_cells(store))


def status_text(store: Path) -> str:
    """What ``dpbench status STORE`` prints."""
    from dpbench.cli.main import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["status", str(store), "--failures", "20"])
    return buf.getvalue()


# --- processes ----------------------------------------------------------------------------------

def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05,
             ) -> None:
    """Poll ``condition`` until it holds; raise ``TimeoutError`` naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def local_cluster(n_workers: int = 2) -> Iterator[str]:
    """A LocalCluster that is up before the run starts (the embedded default computes its first
    tasks in the client while its own cluster starts): its scheduler address. Tests that kill
    workers mid-run use it, so that tasks are on workers when the first result arrives."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: The repository root: subprocesses import this module as ``tests.support.failures``.
REPO_ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The environment of the processes a scenario starts: this one's, with the repository root on
    ``PYTHONPATH`` so that clients and workers can import the fault mechanism by name."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def cli_command(suite_file: Path, store: Path, *extra: str) -> list[str]:
    """``dpbench run`` in a fresh process that knows the fault mechanism."""
    return [sys.executable, "-m", "tests.support.failures", "run", str(suite_file),
            "--store", str(store), "--quiet", *extra]


@dataclass
class ExternalCluster:
    """A ``dask scheduler`` and ``dask worker`` processes started as separate OS processes."""

    workdir: Path
    n_workers: int = 2
    port: int = field(default_factory=free_port)
    scheduler: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        """Start the scheduler and the workers; return once every worker has connected."""
        dask = shutil.which("dask", path=str(Path(sys.executable).parent)) or "dask"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        self.scheduler = subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
             "--dashboard-address", ":0", "--no-show"], env=child_env(), **quiet)
        self.workers = [subprocess.Popen(
            [dask, "worker", self.address, "--nthreads", "1", "--nworkers", "1",
             "--no-dashboard", "--local-directory", str(self.workdir / f"w{i}")],
            env=child_env(), **quiet)
            for i in range(self.n_workers)]
        from distributed import Client

        deadline = time.monotonic() + timeout
        while True:  # the scheduler takes a moment to listen: retry until it answers
            try:
                with Client(self.address, timeout="5s") as client:
                    client.wait_for_workers(self.n_workers, timeout=timeout)
                return
            except (OSError, TimeoutError):
                if time.monotonic() > deadline or self.scheduler.poll() is not None:
                    raise

    def kill_scheduler(self) -> None:
        assert self.scheduler is not None
        self.scheduler.send_signal(signal.SIGKILL)
        self.scheduler.wait()

    def stop(self) -> None:
        """Terminate every process (workers first); SIGKILL what does not exit in 30 s."""
        stop_processes([*self.workers, *([self.scheduler] if self.scheduler else [])])


@contextlib.contextmanager
def external_cluster(workdir: Path, n_workers: int = 2) -> Iterator[ExternalCluster]:
    cluster = ExternalCluster(workdir, n_workers)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def fault(kind: str | None) -> Iterator[None]:
    """Set :data:`FAULT_ENV` (inherited by worker processes started inside the block)."""
    old = os.environ.get(FAULT_ENV)
    if kind is None:
        os.environ.pop(FAULT_ENV, None)
    else:
        os.environ[FAULT_ENV] = f"{kind}@{FAULT_N}"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(FAULT_ENV, None)
        else:
            os.environ[FAULT_ENV] = old


# --- scenarios ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    """Result of one scenario; ``passed`` means the final cube equals the reference."""

    name: str
    passed: bool
    lost: int
    differing: int
    duplicated: int
    status: str                       # what `dpbench status` showed after the failure
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.lost} lost, "
                f"{self.differing} differing, {self.duplicated} duplicated"
                + "".join(f"; {n}" for n in self.notes) + f" | status showed: {self.status}")


@dataclass
class Workspace:
    """A directory with the suite file and the uninterrupted reference cube."""

    root: Path

    @property
    def suite_file(self) -> Path:
        return self.root / "faults.yaml"

    @property
    def reference(self) -> Path:
        return self.root / "reference.zarr"

    def prepare(self) -> Workspace:
        """Write the suite and compute the reference inline (idempotent)."""
        from dpbench.config.suite import parse_suite
        from dpbench.engine.runner import run_suite

        register()
        self.root.mkdir(parents=True, exist_ok=True)
        self.suite_file.write_text(FAULT_SUITE)
        if not self.reference.exists():
            with fault(None):
                run_suite(parse_suite(FAULT_SUITE), self.reference, workers=0, progress=False)
        return self

    @property
    def total(self) -> int:
        return int(np.prod(_open(self.reference)["status"].shape))


def status_summary(store: Path) -> str:
    """`dpbench status` in one line: the counts, then its first failure or interruption line."""
    from dpbench.store.cube import Store

    c = Store.open(store).counts(EXPERIMENT)
    lines = [ln.strip() for ln in status_text(store).splitlines()
             if ln.startswith(("failed [", "last run interrupted"))]
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    first = f"; {lines[0][:170]}{more}" if lines else ""
    return f"{c.done} done, {c.pending} pending, {c.failed} failed{first}"


def _finish(name: str, ws: Workspace, store: Path, status: str, notes: list[str],
            ok: bool = True, duplicated: int | None = None) -> Outcome:
    cmp = compare(ws.reference, store)
    dup = duplicated_cells(store) if duplicated is None else duplicated
    passed = ok and cmp.lost == 0 and cmp.differing == 0 and not cmp.failed and dup == 0
    return Outcome(name, passed, cmp.lost, cmp.differing, dup, status, notes)


def _kill_when_started(cmd: list[str], store: Path, total: int, *, new_session: bool,
                       kill: Callable[[subprocess.Popen[str]], None],
                       timeout: float = 180.0) -> tuple[subprocess.Popen[str], int, str]:
    """Start ``cmd``, ``kill`` it once some (not all) cells are done; return the process, the
    cells done at the kill and its stderr."""
    proc = subprocess.Popen(cmd, env=child_env(), start_new_session=new_session,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: done_cells(store) > 0 or proc.poll() is not None, timeout,
             "the first cells to be written")
    at_kill = done_cells(store)
    kill(proc)
    _, err = proc.communicate(timeout=timeout)
    if not 0 < at_kill < total:
        raise AssertionError(f"the kill must land mid-run: {at_kill} of {total} cells were done")
    return proc, at_kill, err


def sigkill_worker(ws: Workspace) -> Outcome:
    """SIGKILL one worker of a 2-worker LocalCluster after the first result; dask re-runs its
    tasks. No task may be consumed twice."""
    from distributed import get_client

    from dpbench.config.suite import parse_suite
    from dpbench.engine.runner import run_suite

    store = ws.root / "sigkill_worker.zarr"
    killed: list[int] = []
    keys: list[str] = []

    def kill_one(res: TaskResult) -> None:
        keys.append(res.key)
        if not killed:
            victim = sorted(get_client().run(os.getpid).values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    with local_cluster(2) as address:
        summary = run_suite(parse_suite(FAULT_SUITE), store, scheduler=address, progress=False,
                            on_result=kill_one)
    notes = [f"killed worker pid {killed[0]}" if killed else "no worker was killed"]
    dup = len(keys) - len(set(keys))
    return _finish("SIGKILL a worker", ws, store, status_summary(store), notes,
                   ok=bool(killed) and summary.complete, duplicated=dup)


def sigkill_client(ws: Workspace) -> Outcome:
    """SIGKILL `dpbench run` (with its LocalCluster) mid-run, then run the same command again."""
    store = ws.root / "sigkill_client.zarr"
    cmd = cli_command(ws.suite_file, store, "--workers", "1")
    _, at_kill, _ = _kill_when_started(cmd, store, ws.total, new_session=True,
                                       kill=lambda p: os.killpg(p.pid, signal.SIGKILL))
    status = status_summary(store)
    rerun = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=300)
    notes = [f"{at_kill} cells done at the kill", f"resume exit code {rerun.returncode}"]
    return _finish("SIGKILL the client + resume", ws, store, status, notes,
                   ok=rerun.returncode == 0)


def kill_scheduler(ws: Workspace) -> Outcome:
    """SIGKILL an external `dask scheduler` mid-run: `dpbench run` must exit 3 saying so; a rerun
    against a new scheduler and workers completes the sweep."""
    store = ws.root / "kill_scheduler.zarr"
    with external_cluster(ws.root / "cluster1") as cluster:
        cmd = cli_command(ws.suite_file, store, "--scheduler", cluster.address)
        proc, at_kill, err = _kill_when_started(cmd, store, ws.total, new_session=False,
                                                kill=lambda p: cluster.kill_scheduler())
    mid = compare(ws.reference, store)
    status = status_summary(store)
    notes = [f"{at_kill} cells done at the kill", f"exit code {proc.returncode}"]
    ok = (proc.returncode == 3 and "lost the scheduler" in err and mid.differing == 0
          and not mid.failed)
    with external_cluster(ws.root / "cluster2") as cluster:
        rerun = subprocess.run(cli_command(ws.suite_file, store, "--scheduler", cluster.address),
                               env=child_env(), capture_output=True, text=True, timeout=300)
    notes.append(f"resume exit code {rerun.returncode}")
    return _finish("kill the scheduler + resume", ws, store, status, notes,
                   ok=ok and rerun.returncode == 0)


def _faulty_then_resumed(ws: Workspace, kind: str, name: str, message: str) -> Outcome:
    """Run with ``kind`` faults on 2 workers: exactly the faulty cells fail with ``message``, the
    others equal the reference; then resume without the fault and compare."""
    from dpbench.config.suite import parse_suite
    from dpbench.engine.runner import run_suite

    store = ws.root / f"{kind}.zarr"
    suite = parse_suite(FAULT_SUITE)
    with fault(kind):
        first = run_suite(suite, store, workers=2, progress=False)
    mid = compare(ws.reference, store)
    expected = 2  # lb_lin at n = FAULT_N, both seeds
    ok = (first.failed == expected and len(mid.failed) == expected and mid.differing == 0
          and all(message in m for m in mid.failed) and mid.lost == expected)
    status = status_summary(store)
    notes = [f"{len(mid.failed)} cells failed in the faulty run (expected {expected})"]
    if not ok:
        notes.append(f"messages: {sorted(set(mid.failed))}")
    with fault(None):
        run_suite(suite, store, workers=0, progress=False)
    return _finish(name, ws, store, status, notes, ok=ok)


def hanging_cell(ws: Workspace) -> Outcome:
    """Cells that sleep for an hour without checkpoint(): killed at the hard limit."""
    return _faulty_then_resumed(ws, "hang", "hanging cell (hard time limit)", HUNG_MESSAGE)


def memory_hungry_cell(ws: Workspace) -> Outcome:
    """Cells that allocate 4 GiB under a 256 MB limit: MemoryError, the worker survives."""
    return _faulty_then_resumed(ws, "memory", "memory-hungry cell (memory limit)", MEMORY_MESSAGE)


SCENARIOS: dict[str, Callable[[Workspace], Outcome]] = {
    "sigkill-worker": sigkill_worker, "sigkill-client": sigkill_client,
    "kill-scheduler": kill_scheduler, "hang": hanging_cell, "memory": memory_hungry_cell,
}


if __name__ == "__main__":  # `dpbench` command line with the fault mechanism registered
    # Register the class of the importable module, not of __main__: workers unpickle it by name.
    from dpbench.cli.main import main
    from tests.support import failures as testing_failures

    testing_failures.register()
    sys.exit(main(sys.argv[1:]))


def default_sigint() -> None:
    """``preexec_fn`` of a child that must see Ctrl-C: a shell starts its background jobs with
    SIGINT ignored and children inherit that, so a test run in the background would otherwise
    send SIGINT to a process that ignores it (and dpbench rightly keeps an inherited ignore)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop_processes(procs: list[subprocess.Popen[Any]], grace_s: float = 30.0) -> None:
    """SIGTERM to every process still running (in the order given), then SIGKILL to each that
    has not exited within ``grace_s``."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
