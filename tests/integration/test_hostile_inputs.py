"""Devices, FIFOs, duplicate keys and narrow terminals as inputs (issue 33): every one gets a
message and exit 2 (or works), within seconds and a bounded memory, never a hang, a
MemoryError or a UnicodeEncodeError."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpbench.core.files import NotReadable, read_regular

ROOT = Path(__file__).resolve().parents[2]

#: Runs a command and prints its peak resident memory (KiB) on the last line: the wrapper is a
#: fresh process, so the children it waited for are that command alone.
_MEASURED = ("import resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:])\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
             "sys.exit(r.returncode)\n")

#: Each input must be refused (or accepted) within this many seconds and this much memory.
LIMIT_S, LIMIT_MB = 5.0, 200


def dpbench(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            ) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr without the memory line, peak MB) of ``dpbench args``."""
    out = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "dpbench",
                          *args], capture_output=True, encoding="utf-8", errors="replace",
                         timeout=60,
                         env={**os.environ, **(env or {})}, cwd=cwd)
    *lines, peak = out.stderr.rstrip("\n").split("\n")
    return out.returncode, out.stdout, "\n".join(lines), int(peak) / 1024


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "suite.yaml"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("args", [
    ("validate", "/dev/zero"), ("validate", "/dev/urandom"), ("plan", "/dev/zero"),
    ("profile", "/dev/zero"),
    ("run", "suites/quickstart.yaml", "--cluster", "/dev/zero", "--store", "{tmp}/s.zarr"),
])
def test_a_device_is_refused_without_reading_it(args: tuple[str, ...], tmp_path: Path) -> None:
    args = tuple(a.format(tmp=tmp_path) for a in args)
    import time

    t0 = time.perf_counter()
    code, _, err, peak = dpbench(*args, cwd=ROOT)
    assert code == 2, err
    assert "is a device, not a regular file" in err and "Traceback" not in err
    assert time.perf_counter() - t0 < LIMIT_S + 5 and peak < LIMIT_MB, (peak, err)
    assert not (tmp_path / "s.zarr").exists()


def test_a_fifo_suite_is_refused_without_blocking(fifo: Path) -> None:
    code, _, err, peak = dpbench("validate", str(fifo))   # no writer: a read would block forever
    assert code == 2 and "FIFO (named pipe), not a regular file" in err, err
    assert peak < LIMIT_MB


def test_duplicate_keys_are_an_error_naming_both_lines(tmp_path: Path) -> None:
    suite = tmp_path / "dup.yaml"
    suite.write_text(textwrap.dedent("""\
        name: dup
        root_seed: 1
        seeds: 2
        experiments:
          - name: e
            problems: [{problem: lb_lin}]
            algorithms: [{algorithm: output_perturbation}]
            grid: {n: [10], p: [2], epsilon: [1.0]}
        root_seed: 2
        """))
    code, _, err, _ = dpbench("validate", str(suite))
    assert code == 2, err
    assert "duplicate key 'root_seed' at line 9 (first at line 2)" in err


def test_merged_keys_may_still_be_overridden(tmp_path: Path) -> None:
    suite = tmp_path / "merge.yaml"
    suite.write_text(textwrap.dedent("""\
        name: merge
        root_seed: 1
        seeds: 2
        grid: &g {n: [10], p: [2], epsilon: [1.0]}
        experiments:
          - name: e
            problems: [{problem: lb_lin}]
            algorithms: [{algorithm: output_perturbation}]
            grid: {<<: *g, epsilon: [2.0]}
        """))
    code, _, err, _ = dpbench("validate", str(suite))
    assert "duplicate key" not in err


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_output_works_on_any_stdout_encoding(encoding: str, tmp_path: Path) -> None:
    env = {"PYTHONIOENCODING": encoding, "LC_ALL": "C", "LANG": "C"}
    for args in (("validate", "suites/quickstart.yaml"), ("list",)):
        code, out, err, _ = dpbench(*args, env=env, cwd=ROOT)
        assert code == 0 and "Traceback" not in err and "UnicodeEncodeError" not in err, err
        assert out
    store = tmp_path / "s.zarr"
    suite = tmp_path / "tiny.yaml"
    suite.write_text(textwrap.dedent("""\
        name: tiny
        description: ε-DP, δ and θ̂ in every line
        root_seed: 1
        seeds: 2
        experiments:
          - name: e
            problems: [{problem: lb_quad}]
            algorithms: [{algorithm: output_perturbation}]
            grid: {n: [10, 20], p: [2], epsilon: [1.0]}
        """))
    code, _, err, _ = dpbench("run", str(suite), "--store", str(store), "--workers", "0",
                              env=env)
    assert code == 0, err
    for args in (("validate", str(suite)), ("status", str(store)),
                 ("diff", str(store), str(store)), ("check", str(store))):
        code, out, err, _ = dpbench(*args, env=env)
        assert code == 0 and "Traceback" not in err, (args, err)


def test_read_regular_refuses_what_is_not_a_bounded_regular_file(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 10)
    assert read_regular(small, 10, "file") == b"x" * 10
    with pytest.raises(NotReadable, match="larger than 9 bytes"):
        read_regular(small, 9, "file")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotReadable, match="FIFO"):
        read_regular(tmp_path / "fifo", 10, "file")
    with pytest.raises(NotReadable, match="device"):
        read_regular("/dev/zero", 10, "file")
    with pytest.raises(OSError):
        read_regular(tmp_path / "missing", 10, "file")
