"""A read-only or full disk is bad input: exit 2, a message naming the option, nothing written.

Real file systems, no mocks of the disk: each test mounts a tiny tmpfs under ``tmp_path`` (a few
KiB to fill it; ``ro`` or ``remount,ro`` for a read-only one) and unmounts it afterwards, so it
needs root (we run as root, where ``chmod`` cannot make a directory unwritable); without root or
``mount`` the tests are skipped. Every refused command is run through the CLI's ``main`` and must
exit 2 with the fragment in its message, print no traceback, and leave the mount exactly as it
was (names, sizes and modification times). A disk that fills up while an *existing* store is
written is the resumable fault of docs/reliability.md ('Disk faults'): exit 3, the cells written
before are kept, and the same command resumes once there is space.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpbench.cli.main import main
from dpbench.config.records import suite_record
from dpbench.store.cube import Store
from dpbench.store.lock import lock_path

SUITE = """
name: disk
root_seed: 1
seeds: 2
experiments:
  - name: e
    problems: [{problem: lb_quad}]
    algorithms: [{algorithm: output_perturbation}]
    grid: {n: [10, 20], p: [2], epsilon: [1.0]}
"""
#: A second experiment: the suite grown after its store was made (pending cells to write).
SECOND = """
  - name: f
    problems: [{problem: lb_quad}]
    algorithms: [{algorithm: output_perturbation}]
    grid: {n: [10, 20, 40, 80], p: [2, 3], epsilon: [0.5, 1.0, 2.0]}
"""
AUDIT = """
name: diskaudit
root_seed: 1
audit: {runs: 200, selection_runs: 200}
audits:
  - name: a
    algorithms: [{algorithm: output_perturbation}]
    problems: [{problem: lb_quad}]
    canaries: [sphere]
    grid: {n: [10], p: [2], epsilon: [1.0], delta: [0.0]}
"""


@contextlib.contextmanager
def _tmpfs(where: Path, size: str, ro: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (read-only with ``ro``), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount/umount command")
    where.mkdir(parents=True)
    opts = f"size={size}" + (",ro" if ro else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
                       check=False, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip() or r.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False, capture_output=True)


def _remount_ro(where: Path) -> None:
    r = subprocess.run(["mount", "-o", "remount,ro", str(where)], check=False,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")


def _fill(where: Path, leave: int = 0) -> None:
    """Fill the file system of ``where`` up to ``leave`` free bytes with the file ``filler``."""
    st = os.statvfs(where)
    size = max(st.f_bavail * st.f_frsize - leave, 0)
    try:
        with open(where / "filler", "ab") as fh:
            fh.write(b"\0" * size)
    except OSError:  # tmpfs metadata took a page: the disk is full, as wanted
        pass
    assert os.statvfs(where).f_bavail * os.statvfs(where).f_frsize <= leave


def _listing(d: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(d))] = (st.st_size if p.is_file() else -1, st.st_mtime_ns)
    return out


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _argv(command: str, suite: Path, store: Path, *extra: str) -> list[str]:
    return [command, str(suite), "--store", str(store), "--workers", "0", "--quiet", *extra]


def _refused(code: int, err: str, *fragments: str) -> None:
    assert code == 2, (code, err)
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in err, err


@pytest.fixture
def suites(tmp_path: Path) -> dict[str, Path]:
    return {"run": _write(tmp_path / "suite.yaml", SUITE),
            "audit": _write(tmp_path / "audit.yaml", AUDIT)}


@pytest.fixture
def store(tmp_path: Path, suites: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> Path:
    """A complete store on the ordinary disk, for the report tests."""
    path = tmp_path / "s.zarr"
    assert _cli(_argv("run", suites["run"], path), capsys)[0] == 0
    return path


# --- a read-only file system ----------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "audit"])
@pytest.mark.parametrize("sub", ["", "new/dir/"], ids=["in-root", "new-subdir"])
def test_store_on_a_read_only_file_system_is_refused(command: str, sub: str, tmp_path: Path,
                                                      suites: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with _tmpfs(tmp_path / "ro", "256k") as m:
        (m / "kept.txt").write_text("already here")
        _remount_ro(m)
        before = _listing(m)
        code, err = _cli(_argv(command, suites[command], m / f"{sub}s.zarr"), capsys)
        _refused(code, err, "--store: cannot write to", "read-only file system")
        assert _listing(m) == before


def test_resuming_a_store_on_a_read_only_file_system_is_refused(
        tmp_path: Path, suites: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """A resume with cells to write is refused; one that finds the store finished writes
    nothing, so it needs no write access and says so."""
    grown = _write(tmp_path / "grown.yaml", SUITE + SECOND)
    with _tmpfs(tmp_path / "ro", "1m") as m:
        assert _cli(_argv("run", suites["run"], m / "s.zarr"), capsys)[0] == 0
        _remount_ro(m)
        before = _listing(m)
        code, err = _cli(_argv("run", grown, m / "s.zarr"), capsys)
        _refused(code, err, "--store: cannot write to", "read-only file system")
        assert _listing(m) == before
        capsys.readouterr()
        assert main(_argv("run", suites["run"], m / "s.zarr")) == 0
        assert "nothing to compute" in capsys.readouterr().out
        assert _listing(m) == before


@pytest.mark.parametrize("sub", ["", "new/"], ids=["in-root", "new-subdir"])
def test_report_into_a_read_only_directory_is_refused(sub: str, tmp_path: Path, store: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with _tmpfs(tmp_path / "ro", "256k", ro=True) as m:
        before = _listing(m)
        code, err = _cli(["report", str(store), "--output", str(m / f"{sub}r.html")], capsys)
        _refused(code, err, "--output: cannot write to", "read-only file system")
        assert _listing(m) == before


def test_run_report_into_a_read_only_directory_is_refused_before_the_run(
        tmp_path: Path, suites: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    with _tmpfs(tmp_path / "ro", "256k", ro=True) as m:
        before = _listing(tmp_path)
        code, err = _cli(_argv("run", suites["run"], tmp_path / "s.zarr", "--report",
                               str(m / "r.html")), capsys)
        _refused(code, err, "--report: cannot write to", "read-only file system")
        assert _listing(tmp_path) == before  # no store either


# --- a full disk ------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "audit"])
def test_new_store_on_a_disk_that_fills_up_is_removed(command: str, tmp_path: Path,
                                                       suites: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Room for the lock file and a few store files, not for the whole new store: the half-created
    store and its lock are removed (old behaviour: a traceback, exit 1, a half store left)."""
    with _tmpfs(tmp_path / "full", "64k") as m:
        (m / "kept.txt").write_text("already here")
        before = _listing(m)
        code, err = _cli(_argv(command, suites[command], m / "s.zarr"), capsys)
        _refused(code, err, "--store: cannot create the store", "no space left on device")
        assert _listing(m) == before
        assert not lock_path(m / "s.zarr").exists()


def test_new_store_in_a_new_directory_on_a_full_disk_leaves_no_directory(
        tmp_path: Path, suites: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    with _tmpfs(tmp_path / "full", "64k") as m:
        before = _listing(m)
        code, err = _cli(_argv("run", suites["run"], m / "a" / "b" / "s.zarr"), capsys)
        _refused(code, err, "--store", "no space left on device")
        assert _listing(m) == before  # a/b made for the lock file are gone too


@pytest.mark.parametrize("command", ["run", "audit"])
def test_store_on_a_disk_without_a_free_block_is_refused(command: str, tmp_path: Path,
                                                          suites: dict[str, Path],
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    with _tmpfs(tmp_path / "full", "64k") as m:
        _fill(m)
        before = _listing(m)
        code, err = _cli(_argv(command, suites[command], m / "s.zarr"), capsys)
        _refused(code, err, "--store: cannot write to", "no space left on device")
        assert _listing(m) == before


def test_lock_file_on_a_full_disk_is_not_left_behind(tmp_path: Path, suites: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up between the check and the lock file (the check is skipped here): the
    lock file's write fails and the empty file is removed (old behaviour: an empty ``.lock``
    left behind, which the next run refused as 'not a dpbench lock')."""
    import dpbench.store.lock as lock_module

    monkeypatch.setattr(lock_module, "check_writable", lambda *a, **k: None)
    with _tmpfs(tmp_path / "full", "64k") as m:
        _fill(m)
        before = _listing(m)
        code, err = _cli(_argv("run", suites["run"], m / "s.zarr"), capsys)
        _refused(code, err, "--store: cannot write the lock file", "no space left on device")
        assert _listing(m) == before
        assert not lock_path(m / "s.zarr").exists()


@pytest.mark.parametrize("existing", [False, True], ids=["new-report", "replace-report"])
def test_report_onto_a_full_disk_leaves_no_partial_file(existing: bool, tmp_path: Path,
                                                        store: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """Room for part of the HTML only: no partial report, and a report written before is kept
    as it was (old behaviour: a traceback, exit 1, a truncated r.html)."""
    with _tmpfs(tmp_path / "full", "256k") as m:
        out = m / "r.html"
        if existing:
            assert _cli(["report", str(store), "--output", str(out)], capsys)[0] == 0
        _fill(m, leave=8192)
        before = _listing(m)
        code, err = _cli(["report", str(store), "--output", str(out)], capsys)
        _refused(code, err, "--output: cannot write", "no space left on device")
        assert _listing(m) == before
        assert not list(m.glob(".*.partial"))


def test_report_onto_a_disk_without_a_free_block_is_refused(tmp_path: Path, store: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    with _tmpfs(tmp_path / "full", "64k") as m:
        _fill(m)
        before = _listing(m)
        code, err = _cli(["report", str(store), "--output", str(m / "r.html")], capsys)
        _refused(code, err, "--output: cannot write to", "no space left on device")
        assert _listing(m) == before


# --- an existing store: the resumable fault -------------------------------------------------------
def test_full_disk_while_resuming_an_existing_store_keeps_its_cells(
        tmp_path: Path, suites: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The documented fault (docs/reliability.md, 'Disk faults'): the disk fills up while the cells
    of an existing store are written. Exit 3 with a message and no traceback (old behaviour: two
    chained tracebacks, exit 1); the cells done before are untouched, the lock is released and
    the same command resumes once there is space."""
    grown = _write(tmp_path / "grown.yaml", SUITE + SECOND)
    with _tmpfs(tmp_path / "full", "2m") as m:
        path = m / "s.zarr"
        assert _cli(_argv("run", suites["run"], path), capsys)[0] == 0
        from dpbench.config.suite import load_suite

        # f's cells pending, as after an interrupted run
        Store.prepare(Path(path), suite_record(load_suite(grown)))
        done_chunks = {k: v for k, v in _listing(path / "e").items()
                       if "/c/" in f"/{k}" and v[0] >= 0}
        assert done_chunks
        _fill(m, leave=16384)
        code, err = _cli(_argv("run", grown, path), capsys)
        assert code == 3, (code, err)
        assert "no space left on device" in err and "run the same command again" in err, err
        assert "Traceback" not in err, err
        assert not lock_path(path).exists()
        after = _listing(path / "e")
        assert {k: after[k] for k in done_chunks} == done_chunks
        s = Store.open(path)
        assert s.counts("e").done == s.counts("e").total
        assert s.counts("f").done < s.counts("f").total
        (m / "filler").unlink()
        code, err = _cli(_argv("run", grown, path), capsys)
        assert code == 0, err
        s = Store.open(path)
        assert s.counts("f").done == s.counts("f").total
