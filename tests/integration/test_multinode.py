"""A real multi-node cluster on this machine (scripts/cluster-local.sh: node and login network,
UTS and mount namespaces on a bridge, slurmctld and one slurmd per node): a suite run by a
client on the login node through cluster/slurm-multinode.yaml, or through a plain ``dask
scheduler`` with ``dask worker`` on two nodes (``--scheduler`` and ``--scheduler-file``), gives
the cube LocalCluster gives, computed on at least two nodes (the run log's ``hosts``), and the
queue is empty afterwards; ``cluster-local.sh stop`` leaves nothing behind. Skipped when the
cluster is not up (``.ci/run`` starts it where the kernel allows; docs/clusters.md,
'Multi-node')."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpbench.config.suite import parse_suite
from dpbench.engine.runner import run_suite
from dpbench.store.cube import ROOT_KEY
from tests.support.cubes import TINY_SUITE, assert_cubes_identical
from tests.support.failures import stop_processes

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cluster-local.sh"
PROFILE = ROOT / "cluster" / "slurm-multinode.yaml"
STATE = Path(os.environ.get("DPBENCH_CLUSTER_DIR", "/run/dpbench-cluster"))
#: Shared by every node (the nodes' /tmp is private, so pytest's tmp_path is not).
SHARED = Path("/var/tmp/dpbench-multinode-tests")
NODES = ("node1", "node2", "node3")
GROUPS = ["approx", "pure"]
VENV_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


def _on(node: str, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), "exec", node, *cmd], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def _cluster_up() -> bool:
    if not (STATE / "nodes").is_file() or shutil.which("nsenter") is None:
        return False
    try:
        out = _on("login", "timeout", "5", "sinfo", "-h", "-p", "multi", "-N", "-o", "%T")
    except (OSError, subprocess.TimeoutExpired):
        return False
    up = [s for s in out.stdout.split() if s.startswith(("idle", "mixed", "alloc"))]
    return out.returncode == 0 and len(up) >= 2


requires_cluster = pytest.mark.skipif(
    not _cluster_up(), reason="no multi-node cluster (scripts/cluster-local.sh start)")


@pytest.fixture
def shared() -> Iterator[Path]:
    d = SHARED / uuid.uuid4().hex[:12]
    d.mkdir(parents=True)
    (d / "tiny.yaml").write_text(TINY_SUITE)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ref = tmp_path_factory.mktemp("ref") / "ref.zarr"
    run_suite(parse_suite(TINY_SUITE), ref, workers=0, progress=False)
    return ref


def _run_on_login(d: Path, store: Path, *source: str, timeout: float = 600
                  ) -> subprocess.CompletedProcess[str]:
    return _on("login", str(VENV_BIN / "dpbench"), "run", str(d / "tiny.yaml"), "--store",
               str(store), *source, "--quiet", timeout=timeout)


def _last_run(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())["attributes"][ROOT_KEY]["runs"][-1]


def _queue() -> list[str]:
    out = _on("login", "timeout", "10", "squeue", "-h", "-p", "multi", "-o", "%i")
    return out.stdout.split()


def _check(r: subprocess.CompletedProcess[str], ref: Path, store: Path, min_hosts: int) -> None:
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert " 0 failed" in r.stdout, r.stdout[-1000:]
    assert_cubes_identical(ref, store, GROUPS)
    hosts = _last_run(store)["hosts"]
    assert set(hosts) <= set(NODES), hosts  # the nodes' hostnames, not the login's or this one's
    assert len(hosts) >= min_hosts, hosts


@requires_cluster
def test_the_filled_in_slurm_profile_computes_on_several_nodes(shared: Path,
                                                               reference: Path) -> None:
    pytest.importorskip("dask_jobqueue")
    store = shared / "slurm.zarr"
    r = _run_on_login(shared, store, "--cluster", str(PROFILE))
    _check(r, reference, store, min_hosts=2)
    assert "SLURMCluster" in r.stdout
    deadline = time.time() + 60
    while (jobs := _queue()) and time.time() < deadline:
        time.sleep(0.5)
    assert jobs == []


@pytest.fixture
def scheduler(shared: Path) -> Iterator[tuple[str, Path]]:
    """``dask scheduler`` on the login node (its scheduler file on the shared file system) and a
    ``dask worker`` on node1 and node2, as a user starts them: no --host or --interface."""
    sched_file = shared / "scheduler.json"
    dask = str(VENV_BIN / "dask")
    procs = [subprocess.Popen([str(SCRIPT), "exec", "login", dask, "scheduler",
                               "--scheduler-file", str(sched_file), "--port", "0",
                               "--no-dashboard"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=(shared / "scheduler.log").open("w"))]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        for node in ("node1", "node2"):
            procs.append(subprocess.Popen(
                [str(SCRIPT), "exec", node, dask, "worker", address, "--nthreads", "1",
                 "--no-dashboard"], cwd=ROOT, stdout=subprocess.DEVNULL,
                stderr=(shared / f"worker-{node}.log").open("w")))
        _wait_workers(shared, address, 2)
        yield address, sched_file
    finally:
        stop_processes(list(reversed(procs)))


def _wait_workers(shared: Path, address: str, n: int) -> None:
    probe = ("import sys; from distributed import Client; c = Client(sys.argv[1], timeout=10); "
             "c.wait_for_workers(int(sys.argv[2]), timeout=60); c.close()")
    r = _on("login", sys.executable, "-c", probe, address, str(n), timeout=90)
    assert r.returncode == 0, r.stderr[-2000:] + "".join(
        p.read_text()[-1000:] for p in shared.glob("*.log"))


@requires_cluster
def test_a_plain_dask_scheduler_and_workers_on_two_nodes(
        shared: Path, reference: Path, scheduler: tuple[str, Path]) -> None:
    """The address the scheduler advertises is the login node's (its hostname resolves to it),
    the workers' are their nodes'; ``--scheduler`` and ``--scheduler-file`` both give the cube."""
    address, sched_file = scheduler
    assert address.startswith("tcp://192.0.2.1:"), address
    for name, source in (("addr", ("--scheduler", address)),
                         ("file", ("--scheduler-file", str(sched_file)))):
        store = shared / f"{name}.zarr"
        r = _run_on_login(shared, store, *source, timeout=300)
        _check(r, reference, store, min_hosts=1)
        seen = set(_last_run(store)["hosts"])
        assert seen <= {"node1", "node2"}, seen


# --- stop leaves nothing behind ------------------------------------------------------------------

_PREFIX = "dpt"  # another cluster beside the one the other tests use


def _leftovers(state: Path) -> list[str]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    left = [f"netns {line.split()[0]}" for line in netns.splitlines()
            if line.startswith(f"{_PREFIX}-")]
    left += [f"link {line.split(':')[1].strip()}" for line in links.splitlines()
             if line.split(":")[1].strip().startswith(_PREFIX)]
    return left + ([f"state {state}"] if state.exists() else [])


def test_stop_leaves_no_namespace_link_daemon_or_state(tmp_path: Path) -> None:
    """A one-node cluster of its own (prefix dpt, its own state directory): it comes up, then
    stop removes its namespaces, veths, bridge, daemons and state, and leaves the root
    namespace's /etc/slurm/slurm.conf as it was."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2")
    state = Path("/run") / f"dpbench-cluster-test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DPBENCH_CLUSTER_DIR": str(state), "DPBENCH_CLUSTER_PREFIX": _PREFIX}
    conf = Path("/etc/slurm/slurm.conf")
    before = hashlib.sha256(conf.read_bytes()).hexdigest() if conf.exists() else None
    assert _leftovers(state) == [], "a previous run left these"
    r = subprocess.run([str(SCRIPT), "start", "--nodes", "1"], capture_output=True, text=True,
                       env=env, timeout=120)
    try:
        if r.returncode == 3:
            pytest.skip(f"cluster-local.sh cannot run here: {r.stderr.strip()[-300:]}")
        assert r.returncode == 0, r.stderr[-2000:]
        pids = [int(p.read_text()) for p in (state / "pids").iterdir()]
        assert len(pids) >= 5  # munged, slurmctld, slurmd, two holders
        assert all(_alive(p) for p in pids)
        assert any(line.startswith(f"{_PREFIX}-node1") for line in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines())
    finally:
        s = subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, env=env,
                           timeout=120)
    assert s.returncode == 0, s.stderr
    assert _leftovers(state) == []
    assert not any(_alive(p) for p in pids)
    after = hashlib.sha256(conf.read_bytes()).hexdigest() if conf.exists() else None
    assert after == before


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


_CSV = "a,b,label\n" + "".join(f"{i % 3}.5,{i}.25,{i % 2}\n" for i in range(12))


@requires_cluster
def test_a_data_file_only_on_the_client_is_refused_before_the_store(
        shared: Path, scheduler: tuple[str, Path]) -> None:
    """A data file in the login node's private /tmp: the client reads it, the workers on node1
    and node2 cannot; the run is refused with exit 2 naming the file and the workers' hosts, and
    no store is created (before: every cell failed on the workers)."""
    address, _ = scheduler
    where = f"/tmp/dpb-data-{shared.name}"
    made = _on("login", "mkdir", "-p", where, timeout=30)
    assert made.returncode == 0, made.stderr
    subprocess.run([str(SCRIPT), "exec", "login", "sh", "-c", f"cat > {where}/d.csv"],
                   input=_CSV, text=True, check=True, cwd=ROOT, timeout=30)
    (shared / "data.yaml").write_text(f"""\
name: data
root_seed: 1
seeds: 2
experiments:
  - name: d
    problems: [{{problem: real_logistic, params: {{dataset: "csv:{where}/d.csv"}}}}]
    algorithms: [{{algorithm: nonprivate_erm}}]
    grid: {{n: [6], p: [2], epsilon: [1.0]}}
""")
    store = shared / "data.zarr"
    r = _on("login", str(VENV_BIN / "dpbench"), "run", str(shared / "data.yaml"), "--store",
            str(store), "--scheduler", address, "--quiet", timeout=120)
    assert r.returncode == 2, r.stdout[-1000:] + r.stderr[-2000:]
    assert f"{where}/d.csv on node1, node2" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not store.exists()
