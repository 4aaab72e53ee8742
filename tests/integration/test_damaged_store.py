"""Damaged and hostile stores through the read commands (issue 33, the damages that hung, filled
the memory or printed control sequences): each command exits 0 or 2 with a message, no
traceback, within seconds, and leaves the store as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr

from dpbench.core.schema import FAILED

pytestmark = pytest.mark.slow
SUITE = textwrap.dedent("""\
    name: damaged
    root_seed: 3
    seeds: 2
    experiments:
      - name: e
        problems: [{problem: lb_quad}]
        algorithms: [{algorithm: output_perturbation}]
        grid: {n: [10, 20, 40], p: [2], epsilon: [1.0]}
    """)
LIMIT_S = 30.0
COMMANDS: list[tuple[str, ...]] = [
    ("status", "{store}"), ("check", "{store}"), ("report", "{store}", "--output", "{out}/r.html"),
    ("export", "{store}", "--output", "{out}/t.csv"), ("diff", "{store}", "{store}"),
    ("plan", "{suite}", "--calibrate", "{store}"),
]


def _chunk(store: Path, var: str) -> Path:
    return next(p for p in sorted((store / "e" / var).rglob("*")) if p.is_file()
                and p.name != "zarr.json")


def _symlink(target: str, var: str) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        chunk = _chunk(store, var)
        chunk.unlink()
        chunk.symlink_to(target)
    return damage


def _fifo(relative: Callable[[Path], Path]) -> Callable[[Path], None]:
    def damage(store: Path) -> None:
        path = relative(store)
        path.unlink()
        os.mkfifo(path)
    return damage


def _huge_metadata(store: Path) -> None:
    with open(store / "e" / "zarr.json", "r+b") as fh:   # sparse: no disk used
        fh.truncate(100 * 2**20)


def _deep_json(store: Path) -> None:
    (store / "zarr.json").write_text('{"attributes": ' + "[" * 2000 + "]" * 2000 + "}")


DAMAGES: dict[str, Callable[[Path], None]] = {
    "chunk -> /dev/zero": _symlink("/dev/zero", "excess_risk"),
    "chunk -> /dev/urandom": _symlink("/dev/urandom", "status"),
    "chunk -> /etc/passwd": _symlink("/etc/passwd", "excess_risk"),
    "status chunk is a FIFO": _fifo(lambda s: _chunk(s, "status")),
    "group zarr.json is a FIFO": _fifo(lambda s: s / "e" / "zarr.json"),
    "root zarr.json is a FIFO": _fifo(lambda s: s / "zarr.json"),
    "group zarr.json of 100 MB": _huge_metadata,
    "root zarr.json nested 2000 deep": _deep_json,
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pristine")
    (d / "s.yaml").write_text(SUITE)
    subprocess.run([sys.executable, "-m", "dpbench", "run", str(d / "s.yaml"), "--store",
                    str(d / "s.zarr"), "--quiet"], check=True, capture_output=True)
    return d


def _listing(store: Path) -> list[tuple[str, int, int]]:
    out = []
    for root, dirs, files in os.walk(store, followlinks=False):
        for name in (*dirs, *files):
            st = os.lstat(os.path.join(root, name))
            out.append((os.path.relpath(os.path.join(root, name), store), st.st_mode,
                        st.st_size))
    return sorted(out)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_store_gets_exit_0_or_2_from_every_read_command(
        damage: str, pristine: Path, tmp_path: Path) -> None:
    import shutil

    store = tmp_path / "s.zarr"
    shutil.copytree(pristine / "s.zarr", store, symlinks=True)
    DAMAGES[damage](store)
    before = _listing(store)
    out = tmp_path / "out"
    out.mkdir()
    for command in COMMANDS:
        args = [a.format(store=store, out=out, suite=pristine / "s.yaml") for a in command]
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "dpbench", *args], capture_output=True,
                              text=True, timeout=120)
        took = time.monotonic() - t0
        assert proc.returncode in (0, 2), (damage, args[0], proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (damage, args[0], proc.stderr[-2000:])
        assert took < LIMIT_S, (damage, args[0], took)
        assert _listing(store) == before, (damage, args[0], "the store changed")
    assert not any(p.name.endswith(".partial") for p in out.iterdir())


def test_a_symlink_loop_as_the_store_is_refused(pristine: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop.zarr"
    loop.symlink_to(loop)
    for command in (("run", str(pristine / "s.yaml"), "--store", str(loop)),
                    ("status", str(loop))):
        proc = subprocess.run([sys.executable, "-m", "dpbench", *command], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_stored_text_reaches_the_terminal_escaped_and_cut(pristine: Path,
                                                         tmp_path: Path) -> None:
    import shutil

    store = tmp_path / "s.zarr"
    shutil.copytree(pristine / "s.zarr", store)
    g = zarr.open_group(str(store / "e"), mode="r+")
    status = np.asarray(g["status"][...])
    status[0, 0, 0, 0, 0, 0, 0] = FAILED
    g["status"][...] = status
    errors = np.asarray(g["error"][...], dtype=object)
    errors[0, 0, 0, 0, 0, 0, 0] = "boom\x1b]0;TITLE\x07\x1b[2J" + "x" * 10_000
    g["error"][...] = errors
    proc = subprocess.run([sys.executable, "-m", "dpbench", "status", str(store)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "boom\\x1b]0;TITLE\\x07\\x1b[2J" in proc.stdout
    assert "(10018 characters)" in proc.stdout


def test_the_reliability_table_lists_every_damage() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text()
    table = doc[doc.index("## Damaged stores"):]
    table = table[:table.index("\n## ", 5)]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| damage")}
    assert rows == set(DAMAGES) | {"store path is a symlink loop", "control sequences in a "
                                   "stored error"}, rows
