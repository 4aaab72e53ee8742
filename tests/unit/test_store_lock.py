"""The store's writer lock (dpbench.store.lock): one writer, stale locks, nothing executed."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpbench.core.errors import StoreError
from dpbench.store.lock import STALE_AFTER_S, StoreLock, StoreLocked, lock_path, read_holder


def test_lock_file_records_the_holder_and_is_removed_on_release(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    with StoreLock(store, "dpbench run x") as lock:
        assert lock.lock == tmp_path / "s.zarr.lock"  # beside the store: zarr never lists it
        doc = json.loads(lock.lock.read_text())
        assert doc["host"] == socket.gethostname() and doc["pid"] == os.getpid()
        assert doc["command"] == "dpbench run x" and doc["token"] == lock.holder.token
    assert not lock_path(store).exists()
    assert not store.exists()  # the lock alone creates no store


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    with StoreLock(store, "dpbench run first"):
        with pytest.raises(StoreLocked, match=r"being written by dpbench run first \(host .*pid "
                                              rf"{os.getpid()}"):
            StoreLock(store, "dpbench run second").acquire()
        with pytest.raises(StoreLocked):  # a live holder is never broken
            StoreLock(store, "x", break_stale=True).acquire()
    assert isinstance(StoreLocked("x"), StoreError)  # exit 2 in the CLI


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant(store: Path, **kw: object) -> None:
    doc = {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": "", "started": time.time(),
           "heartbeat": time.time(), "command": "dpbench run old", "token": "t0"}
    doc.update(kw)
    lock_path(store).write_text(json.dumps(doc))


def test_a_dead_holder_on_this_host_is_broken_with_a_warning(tmp_path: Path) -> None:
    """A killed run's lock (this host, process gone) is provably stale: the next run resumes."""
    store = tmp_path / "s.zarr"
    _plant(store, pid=_dead_pid())
    with pytest.warns(UserWarning, match="broke the lock of .*no longer runs"):
        with StoreLock(store) as lock:
            assert lock.broken is not None and lock.broken.token == "t0"
            assert read_holder(lock_path(store)).token == lock.holder.token


def test_another_hosts_holder_is_stale_only_after_its_heartbeat_stops(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    _plant(store, host="elsewhere", heartbeat=time.time())
    with pytest.raises(StoreLocked, match="being written"):
        StoreLock(store, break_stale=True).acquire()
    _plant(store, host="elsewhere", heartbeat=time.time() - STALE_AFTER_S - 5)
    with pytest.raises(StoreLocked, match="stale .*heartbeat is .* old.*--break-lock"):
        StoreLock(store).acquire()
    assert read_holder(lock_path(store)).token == "t0"  # untouched without the flag
    with StoreLock(store, break_stale=True) as lock:
        assert lock.broken is not None and lock.broken.token == "t0"


@pytest.mark.parametrize("content", ["not json", json.dumps({"host": "h"}), "x" * 70000,
                                     json.dumps({"host": "h", "pid": "__import__('os')",
                                                 "started": 0, "heartbeat": 0, "token": "t"})])
def test_a_lock_file_that_is_not_ours_is_refused_never_evaluated(tmp_path: Path,
                                                                 content: str) -> None:
    store = tmp_path / "s.zarr"
    lock_path(store).write_text(content)
    with pytest.raises(StoreLocked, match="not a dpbench lock"):
        StoreLock(store, break_stale=True).acquire()
    assert lock_path(store).read_text() == content


def test_the_heartbeat_is_refreshed(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    with StoreLock(store, heartbeat_s=0.05):
        first = read_holder(lock_path(store)).heartbeat
        time.sleep(0.3)
        assert read_holder(lock_path(store)).heartbeat > first


def test_a_file_path_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        StoreLock(f).acquire()


def _contend(store: str, barrier: mp.synchronize.Barrier, out: mp.Queue) -> None:  # type: ignore[name-defined]
    barrier.wait()
    try:
        lock = StoreLock(store).acquire()
    except StoreLocked:
        out.put("refused")
        return
    time.sleep(0.2)
    out.put("won")
    lock.release()


def test_twenty_races_have_exactly_one_winner(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    for i in range(20):
        store = str(tmp_path / f"s{i}.zarr")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_contend, args=(store, barrier, out)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(20)
        results = sorted(out.get(timeout=5) for _ in procs)
        assert results == ["refused", "refused", "won"], (i, results)
        assert not lock_path(store).exists() and not Path(store).exists()
