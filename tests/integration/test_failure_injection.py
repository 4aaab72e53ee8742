"""Failure injection: hard per-cell time limit, memory limit and loss of the scheduler.

Each scenario (shared with ``scripts/inject_failures.py``, see ``tests/support/failures.py``)
checks that the failure is recorded and visible in ``dpbench status``, that every other cell equals
an uninterrupted run bit for bit, and that resuming gives the uninterrupted cube with no lost or
duplicated cells. SIGKILL of a worker and of the client are covered by test_crash_recovery.py.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from dpbench.config.suite import load_suite, parse_suite
from dpbench.core.errors import SuiteError
from dpbench.engine import isolation
from dpbench.engine.cells import needs_isolation, run_task
from dpbench.engine.isolation import Killed, grace_s, reset_child, run_isolated
from dpbench.engine.plan import expand, pack
from tests.support import failures as tf


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tf.Workspace]:
    yield tf.Workspace(tmp_path_factory.mktemp("faults")).prepare()


# --- the isolation primitive ---------------------------------------------------------------------

def _items(behaviour: str) -> Callable[[int, Callable[[], None]], object]:
    """Item 1 misbehaves (``hang`` or ``die``); the others return their index and pid."""
    def compute(i: int, heartbeat: Callable[[], None]) -> object:
        if i == 1 and behaviour == "hang":
            time.sleep(3600)
        if i == 1 and behaviour == "die":
            os._exit(9)
        return i, os.getpid()

    return compute


def test_a_hung_item_is_killed_and_the_rest_run_in_a_fresh_child() -> None:
    t0 = time.monotonic()
    out = run_isolated(_items, "hang", 4, 0.2, None)
    assert time.monotonic() - t0 < 0.2 + grace_s(0.2) + 10
    assert out[0][0] == 0 and out[2][0] == 2 and out[3][0] == 3
    assert isinstance(out[1], Killed) and "time limit of 0.2 s (killed)" in out[1].message
    assert out[0][1] != out[2][1] == out[3][1] != os.getpid()  # a fresh child after the kill


def test_an_item_whose_process_dies_is_failed_and_the_rest_continue() -> None:
    out = run_isolated(_items, "die", 3, None, 64)
    assert isinstance(out[1], Killed)
    assert "died (exit code 9)" in out[1].message and "memory limit of 64 MB" in out[1].message
    assert [out[0][0], out[2][0]] == [0, 2]


def _import_attribute(module: str) -> Callable[[int, Callable[[], None]], object]:
    def compute(i: int, heartbeat: Callable[[], None]) -> object:
        return importlib.import_module(module).VALUE

    return compute


#: A module whose body, in the test's own process, blocks until the test releases it: the child
#: is forked while another thread is in the middle of importing it.
_SLOW_MODULE = """
import os, sys
probe = getattr(sys, "_dpbench_import_probe", None)
if probe is not None and os.getpid() == probe[0]:
    probe[1].set()
    probe[2].wait(60)
VALUE = 42
"""


def test_a_fork_while_another_thread_imports_does_not_hang_the_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dask worker deserialises its next task (importing plugin modules) while a task forks
    its compute child; the child must not inherit a module import lock held by a thread it does
    not have (it would block unpickling its first request until the time limit killed it). The
    import here never finishes before the fork, so the fork stops waiting for it (after a
    shortened wait) and the child repairs what it inherited."""
    monkeypatch.setattr(isolation, "FORK_IMPORT_WAIT_S", 0.2)
    name = "dpbench_fork_import_probe"
    (tmp_path / f"{name}.py").write_text(_SLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    started, release = threading.Event(), threading.Event()
    monkeypatch.setattr(sys, "_dpbench_import_probe", (os.getpid(), started, release),
                        raising=False)
    reset_child()  # the next isolated call forks now, during the import
    importer = threading.Thread(target=importlib.import_module, args=(name,))
    importer.start()
    try:
        assert started.wait(30)
        out = run_isolated(_import_attribute, name, 2, 5.0, None)
        assert out == [42, 42], out
    finally:
        release.set()
        importer.join(30)
        reset_child()
        sys.modules.pop(name, None)


class _CompiledLikeLoader(importlib.abc.Loader):
    """Loads a module the way a single-phase compiled (Cython) extension does: its whole body
    runs while the module is created, before the import system marks it as initialising, and
    the module object is kept in a static from the start, so creating it again returns that
    object as it is. A child forked in the middle of creating it gets the half-made module."""

    def __init__(self, started: threading.Event, release: threading.Event) -> None:
        self.started, self.release = started, release
        self.static: types.ModuleType | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if self.static is None:
            self.static = types.ModuleType(spec.name)
            self.started.set()
            self.release.wait(60)
            self.static.VALUE = 42
        return self.static

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, loader: importlib.abc.Loader) -> None:
        self.name, self.loader = name, loader

    def find_spec(self, fullname: str, path: object, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_loader(fullname, self.loader)


def test_a_fork_waits_for_an_import_another_thread_is_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork of a compute child waits until no other thread is importing, including a
    compiled module still being created (not yet marked as initialising): a child forked then
    would find the half-made module again on import (``scipy.special`` failed this way under a
    LocalCluster)."""
    name = "dpbench_compiled_like_probe"
    started, release = threading.Event(), threading.Event()
    monkeypatch.setattr(sys, "meta_path",
                        [_Finder(name, _CompiledLikeLoader(started, release)), *sys.meta_path])
    reset_child()
    importer = threading.Thread(target=importlib.import_module, args=(name,))
    importer.start()
    try:
        assert started.wait(30)
        threading.Timer(0.3, release.set).start()
        t0 = time.monotonic()
        out = run_isolated(_import_attribute, name, 2, 5.0, None)
        assert out == [42, 42], out
        assert time.monotonic() - t0 >= 0.25  # it waited for the import
    finally:
        release.set()
        importer.join(30)
        reset_child()
        sys.modules.pop(name, None)


def test_isolated_cells_equal_in_process_cells_bit_for_bit(tiny_suite_file: Path) -> None:
    suite = load_suite(tiny_suite_file)
    for exp in suite.experiments:
        planned = pack(expand(suite, exp)[0])
        tasks = [dataclasses.replace(t, chunks=tuple(dataclasses.replace(c, timeout_s=None)
                                                     for c in t.chunks)) for t in planned]
        limited = [dataclasses.replace(t, chunks=tuple(dataclasses.replace(c, timeout_s=60.0)
                                                       for c in t.chunks)) for t in tasks]
        assert needs_isolation(planned[0], None)  # the default per-cell limit isolates
        assert not needs_isolation(tasks[0], None) and needs_isolation(limited[0], None)
        assert needs_isolation(tasks[0], 500.0)
        plain = [run_task(t) for t in tasks]
        reset_child()  # the next child inherits the kernels numba compiled for the plain run
        hard = [run_task(t, memory_mb=2000.0) for t in limited]
        for a, b in zip(plain, hard):
            for ca, cb in zip(a.chunks, b.chunks):
                assert np.array_equal(ca.status, cb.status) and ca.errors == cb.errors
                for var, va in ca.values.items():
                    if var != "wall_time_s":
                        assert np.array_equal(va.view(np.uint64), cb.values[var].view(np.uint64))


@pytest.mark.parametrize("value", [0, -5, "lots", True])
def test_cell_memory_mb_is_validated(value: object) -> None:
    text = tf.FAULT_SUITE.replace(f"cell_memory_mb: {tf.MEMORY_MB}", f"cell_memory_mb: {value!r}")
    tf.register()
    with pytest.raises(SuiteError, match="cell_memory_mb: must be a number of megabytes in"):
        parse_suite(text)


def test_unknown_top_level_field_lists_cell_memory_mb() -> None:
    with pytest.raises(SuiteError, match="allowed: .*cell_memory_mb"):
        parse_suite(tf.FAULT_SUITE.replace("cell_memory_mb", "cell_memory"))


# --- whole runs ----------------------------------------------------------------------------------

def _assert_passed(outcome: tf.Outcome, shown: str) -> None:
    assert outcome.passed, outcome.line()
    assert shown in outcome.status, outcome.line()


@pytest.mark.slow
def test_hanging_cells_are_killed_and_the_sweep_goes_on(workspace: tf.Workspace) -> None:
    _assert_passed(tf.hanging_cell(workspace), tf.HUNG_MESSAGE)


@pytest.mark.slow
def test_memory_hungry_cells_fail_without_taking_the_worker_down(
        workspace: tf.Workspace) -> None:
    _assert_passed(tf.memory_hungry_cell(workspace), tf.MEMORY_MESSAGE)


@pytest.mark.slow
def test_losing_the_scheduler_exits_3_and_a_rerun_completes(workspace: tf.Workspace) -> None:
    outcome = tf.kill_scheduler(workspace)
    _assert_passed(outcome, "last run interrupted: SchedulerLost: lost the scheduler")
    assert "exit code 3" in outcome.notes and "resume exit code 0" in outcome.notes


def test_a_deadline_beyond_what_poll_accepts_is_waited_for_in_slices() -> None:
    """An audit batch of 50 000 runs under the default per-cell limit may take 2·50 000·3600 s:
    far more than poll() accepts (~24 days); the items still complete normally."""
    out = run_isolated(_items, "none", 3, 3.6e8, None)
    assert [o[0] for o in out] == [0, 1, 2]
