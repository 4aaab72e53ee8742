"""Network faults while a run is in flight on a multi-node cluster (scripts/cluster-local.sh;
docs/clusters.md, 'Multi-node', 'Network faults').

Each test builds a cluster of three nodes of its own (another name prefix and state directory,
so that tests may run in parallel and killing a node's processes cannot disturb the tests that
use the shared cluster), starts a plain ``dask scheduler`` on its login node and ``dask worker
--nworkers 2 --nthreads 1`` on each node, and runs a suite of :data:`CELLS` cells of about
:data:`NAP_S` each (tests/support/napping.py: one cell per task) from a client on the login
node. Once the run has stored :data:`FAULT_AFTER` cells, the fault is applied:

* ``cut``: node1's veth set down for :data:`CUT_S` (longer than the scheduler's worker-ttl and
  the comm timeouts set below), then up again;
* ``kill``: every process of node1 (its network namespace's) killed with SIGKILL;
* ``netem``: 100 ms delay and 5 % loss on node1's veth (skipped where the kernel has no netem);
* ``gone``: node1's veth set down until the run has ended: the run finishes on the others.

Every run must exit 0 with 0 failed cells and the cube of an undisturbed (inline) run, every cell
computed exactly once into the store (the run log's ``cells_computed`` equals the cells, in a
single run), and the run log and the printed lines must say which workers were lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dpbench.config.suite import parse_suite
from dpbench.engine.runner import run_suite
from dpbench.store.cube import ROOT_KEY
from tests.integration.test_multinode import SCRIPT, SHARED, VENV_BIN, requires_cluster
from tests.support import napping
from tests.support.cubes import assert_cubes_identical
from tests.support.failures import REPO_ROOT, done_cells, stop_processes

pytestmark = [pytest.mark.slow, requires_cluster]

#: 1200 cells of 0.1 s on 6 single-threaded workers: about 20 s of sleep, 25-30 s a run.
CELLS = 1200
NAP_S = 0.1
WORKERS_PER_NODE = 2
NODES = ("node1", "node2", "node3")
#: The fault is applied once this many cells are stored (about a quarter of the run).
FAULT_AFTER = 300
#: Short timeouts, so that a cut node is given up in seconds (distributed's defaults: worker-ttl
#: 5 minutes, connect 30 s, tcp 30 s).
TIMEOUTS = {
    "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": "4s",
    "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3s",
    "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP": "11s",  # its least: 10 keepalive probes + 1
}
#: How long ``cut`` keeps the link down: above worker-ttl + the tcp timeout.
CUT_S = 14.0
#: A run that takes longer has hung (the undisturbed one takes about 30 s).
RUN_TIMEOUT_S = 240.0


@dataclass
class FaultCluster:
    """A cluster-local.sh cluster of its own with a dask scheduler and workers on it."""

    prefix: str
    state: Path
    work: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **TIMEOUTS, "DPBENCH_CLUSTER_DIR": str(self.state),
                "DPBENCH_CLUSTER_PREFIX": self.prefix,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                            os.environ.get("PYTHONPATH")])),
                "OPENBLAS_NUM_THREADS": "1"}

    def veth(self, node: str) -> str:
        return f"{self.prefix}v-{node}"

    def netns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def script(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout, cwd=REPO_ROOT)

    def spawn(self, node: str, *cmd: str, log: str, **env: str) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([str(SCRIPT), "exec", node, *cmd], cwd=REPO_ROOT,
                             env={**self.env, **env}, stdout=subprocess.DEVNULL,
                             stderr=(self.work / log).open("wb"))
        self.procs.append(p)
        return p

    @property
    def sched_file(self) -> Path:
        return self.work / "scheduler.json"

    def start_dask(self) -> None:
        dask = str(VENV_BIN / "dask")
        self.spawn("login", dask, "scheduler", "--scheduler-file", str(self.sched_file),
                   "--port", "0", "--no-dashboard", log="scheduler.log")
        deadline = time.monotonic() + 60
        while not self.sched_file.exists():
            assert time.monotonic() < deadline, self.logs()
            time.sleep(0.2)
        for node in NODES:
            self.spawn(node, dask, "worker", "--scheduler-file", str(self.sched_file),
                       "--nworkers", str(WORKERS_PER_NODE), "--nthreads", "1", "--no-dashboard",
                       log=f"worker-{node}.log", **{napping.NAP_ENV: str(NAP_S)})
        probe = ("import sys; from distributed import Client; "
                 "c = Client(scheduler_file=sys.argv[1], timeout=10); "
                 "c.wait_for_workers(int(sys.argv[2]), timeout=90); c.close()")
        r = self.script("exec", "login", sys.executable, "-c", probe, str(self.sched_file),
                        str(WORKERS_PER_NODE * len(NODES)))
        assert r.returncode == 0, r.stderr[-2000:] + self.logs()

    def logs(self) -> str:
        return "".join(f"\n--- {p.name}\n" + p.read_text(errors="replace")[-1500:]
                       for p in sorted(self.work.glob("*.log")))

    def stop(self) -> None:
        stop_processes(list(reversed(self.procs)))
        r = self.script("stop")
        assert r.returncode == 0, r.stderr


#: One prefix (and state directory) per test: the clusters of parallel tests never meet.
_PREFIXES = {"undisturbed": "dpfa", "cut": "dpfb", "kill": "dpfc", "netem": "dpfd",
             "gone": "dpfe"}


@pytest.fixture
def work() -> Iterator[Path]:
    d = SHARED / f"faults-{uuid.uuid4().hex[:10]}"
    d.mkdir(parents=True)
    (d / "naps.yaml").write_text(napping.suite_text(CELLS))
    yield d
    import shutil

    shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def _cluster(name: str, work: Path) -> Iterator[FaultCluster]:
    prefix = _PREFIXES[name]
    c = FaultCluster(prefix, Path(f"/run/dpbench-cluster-{prefix}"), work)
    r = c.script("start", "--nodes", str(len(NODES)))
    try:
        if r.returncode == 3:
            pytest.skip(f"cluster-local.sh cannot run here: {r.stderr.strip()[-300:]}")
        assert r.returncode == 0, r.stderr[-2000:]
        c.start_dask()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite computed inline (no sleep in this process): the undisturbed cube."""
    napping.register()
    os.environ.pop(napping.NAP_ENV, None)
    ref = tmp_path_factory.mktemp("ref") / "ref.zarr"
    run_suite(parse_suite(napping.suite_text(CELLS)), ref, workers=0, progress=False)
    return ref


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    fault_at_s: float
    run: dict


def _run(c: FaultCluster, store: Path, fault: object = None) -> Outcome:
    """The suite run by a client on the login node; ``fault(c)`` applied once
    :data:`FAULT_AFTER` cells are stored (it returns when the fault is over)."""
    cmd = [str(SCRIPT), "exec", "login", sys.executable, "-m", "tests.support.napping", "run",
           str(c.work / "naps.yaml"), "--store", str(store), "--scheduler-file",
           str(c.sched_file)]
    t0 = time.monotonic()
    out, err = (c.work / "client.out").open("w+"), (c.work / "client.err").open("w+")
    p = subprocess.Popen(cmd, cwd=REPO_ROOT, env=c.env, stdout=out, stderr=err, text=True)
    fault_at = float("nan")
    try:
        if fault is not None:
            while done_cells(store) < FAULT_AFTER:
                assert p.poll() is None, "the run ended before the fault"
                assert time.monotonic() - t0 < RUN_TIMEOUT_S
                time.sleep(0.1)
            fault_at = time.monotonic() - t0
            fault(c, p)  # type: ignore[operator]
        p.wait(timeout=max(1.0, RUN_TIMEOUT_S - (time.monotonic() - t0)))
    except BaseException:
        p.send_signal(signal.SIGKILL)
        p.wait()
        raise
    seconds = time.monotonic() - t0
    out.seek(0)
    err.seek(0)
    run = json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"]
    assert len(run) == 1, run
    return Outcome(p.returncode, out.read(), err.read(), seconds, fault_at, run[-1])


def _check(o: Outcome, ref: Path, store: Path, c: FaultCluster) -> None:
    assert o.rc == 0, o.stdout[-2000:] + o.stderr[-3000:] + c.logs()
    assert " 0 failed" in o.stdout, o.stdout[-1000:]
    assert_cubes_identical(ref, store, ["e"])
    # Every cell computed into the store exactly once: one run, as many cells as the suite.
    assert o.run["cells_computed"] == CELLS and o.run["cells_failed"] == 0, o.run
    assert done_cells(store) == CELLS


def _report(name: str, o: Outcome) -> None:
    w = o.run.get("workers", {})
    print(f"\n[faults] {name}: {o.seconds:.1f} s, fault at {o.fault_at_s:.1f} s, "
          f"hosts {json.dumps(o.run.get('hosts'))}, workers {json.dumps(w)}\n"
          f"backend: {o.run['backend']}\n{o.stderr[-1500:]}")


def test_undisturbed(work: Path, reference: Path) -> None:
    with _cluster("undisturbed", work) as c:
        store = work / "s.zarr"
        o = _run(c, store)
        _report("undisturbed", o)
        _check(o, reference, store, c)
        assert set(o.run["hosts"]) == set(NODES)


def _cut(c: FaultCluster, p: subprocess.Popen[str]) -> None:
    """node1's link down for :data:`CUT_S`, then up; then fresh workers on node1, as a site's
    supervisor (or an adaptive cluster's new job) starts them: the cut ones have exited (a
    worker the scheduler removed closes itself once it hears so). Not during the cut: a nanny
    that cannot reach its scheduler within the connect timeout gives up ("Nanny failed to
    start")."""
    _link(c, "node1", "down")
    try:
        time.sleep(CUT_S)
    finally:
        _link(c, "node1", "up")
    c.spawn("node1", str(VENV_BIN / "dask"), "worker", "--scheduler-file", str(c.sched_file),
            "--nworkers", str(WORKERS_PER_NODE), "--nthreads", "1", "--no-dashboard",
            log="worker-node1-again.log", **{napping.NAP_ENV: str(NAP_S)})


def _link(c: FaultCluster, node: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", c.veth(node), state], check=True, timeout=10)


def _lost_on_node1(o: Outcome, lost: int) -> None:
    w = o.run.get("workers", {})
    assert w.get("lost") == lost, w
    assert {x["worker"].split("//")[1].split(":")[0] for x in w["lost_workers"]} == {
        "192.0.2.11"}, w
    assert o.stderr.count("[dpbench] lost worker tcp://192.0.2.11:") == lost, o.stderr[-3000:]
    assert "lost mid-run (on 192.0.2.11)" in o.run["backend"]


def test_cut_link(work: Path, reference: Path) -> None:
    """Cut for longer than worker-ttl: node1's workers are removed (their tasks rerun), exit
    when the link is back; new workers on node1 join and compute."""
    with _cluster("cut", work) as c:
        store = work / "s.zarr"
        o = _run(c, store, _cut)
        _report("cut", o)
        _check(o, reference, store, c)
        _lost_on_node1(o, WORKERS_PER_NODE)
        assert "no heartbeat for worker-ttl" in o.run["workers"]["lost_workers"][0]["why"]
        # The replacements join when their start-up (seconds on 2 busy cores) ends before the
        # run does (not always: 2 busy cores); the log counts no more than registered (one may
        # register after the run's end), and prints each one it counts.
        registered = (c.work / "worker-node1-again.log").read_text().count("Registered to:")
        joined = o.run["workers"]["joined_after_loss"]
        assert joined <= registered, (o.run["workers"], c.logs())
        assert o.stderr.count("[dpbench] worker tcp://192.0.2.11:") == joined


def _kill(c: FaultCluster, p: subprocess.Popen[str]) -> None:
    """SIGKILL to every process of node1's network namespace (dask workers and nannies, slurmd,
    the namespace holder): the node crashed."""
    pids = subprocess.run(["ip", "netns", "pids", c.netns("node1")], capture_output=True,
                          text=True, check=True).stdout.split()
    assert len(pids) >= 2 * WORKERS_PER_NODE, pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def test_kill_every_process_of_a_node(work: Path, reference: Path) -> None:
    with _cluster("kill", work) as c:
        store = work / "s.zarr"
        o = _run(c, store, _kill)
        _report("kill", o)
        _check(o, reference, store, c)
        _lost_on_node1(o, WORKERS_PER_NODE)
        assert "connection to the scheduler closed" in o.run["workers"]["lost_workers"][0]["why"]
        assert subprocess.run(["ip", "netns", "pids", c.netns("node1")], capture_output=True,
                              text=True).stdout.split() == []


def _gone(c: FaultCluster, p: subprocess.Popen[str]) -> None:
    """node1's link down for the rest of the run (restored once it has ended)."""
    _link(c, "node1", "down")
    try:
        p.wait(timeout=RUN_TIMEOUT_S)
    finally:
        _link(c, "node1", "up")


def test_a_node_that_never_comes_back(work: Path, reference: Path) -> None:
    with _cluster("gone", work) as c:
        store = work / "s.zarr"
        o = _run(c, store, _gone)
        _report("gone", o)
        _check(o, reference, store, c)
        _lost_on_node1(o, WORKERS_PER_NODE)
        assert o.run["workers"]["joined_after_loss"] == 0


def _netem_missing() -> str:
    """Why ``tc qdisc … netem`` cannot be used here ('' when it can): tried on the loopback of a
    throwaway network namespace (gone when the probe exits)."""
    try:
        r = subprocess.run(["unshare", "--net", "sh", "-c",
                            "ip link set lo up && tc qdisc add dev lo root netem delay 1ms"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot probe netem: {exc}"
    if r.returncode == 0:
        return ""
    return (f"the kernel has no netem qdisc ('tc qdisc add … netem': {r.stderr.strip()}; "
            "CONFIG_NET_SCH_NETEM)")


NETEM = "delay 100ms loss 5%"


def _netem(c: FaultCluster, p: subprocess.Popen[str]) -> None:
    """100 ms delay and 5 % loss on node1's veth for the rest of the run."""
    dev = c.veth("node1")
    subprocess.run(["tc", "qdisc", "add", "dev", dev, "root", "netem", *NETEM.split()],
                   check=True, timeout=10)
    try:
        p.wait(timeout=RUN_TIMEOUT_S)
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", dev, "root"], timeout=10)


def test_latency_and_loss(work: Path, reference: Path) -> None:
    """A slow, lossy link is not a lost node: the run completes (whether node1's workers are
    removed depends on whether a heartbeat misses worker-ttl; either is logged)."""
    missing = _netem_missing()
    if missing:
        pytest.skip(missing)
    with _cluster("netem", work) as c:
        store = work / "s.zarr"
        o = _run(c, store, _netem)
        _report("netem", o)
        _check(o, reference, store, c)
        w = o.run.get("workers", {})
        assert o.stderr.count("[dpbench] lost worker") == w.get("lost", 0)
