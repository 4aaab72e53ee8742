"""Damaged and hostile stores through every command that reads a store (issue 33): each of the
damages of :mod:`tests.support.store_damage` (by category: chunk grids, shapes, data types,
dimension names, codecs, chunk data, file kinds, metadata documents, root and experiment
attributes, structure, stored text) gets exit 0 or 2 from ``status``, ``check``, ``report``,
``export``, ``diff``, ``plan --calibrate`` and ``run``: no traceback, within 30 s and 1 GiB each,
the store unchanged (``run`` excepted where it resumes), nothing written outside the outputs.

One process per category runs the commands in-process (a command per damage as its own process
would take ten times as long); the limits are checked per command (a timer, and the peak
resident memory sampled every 10 ms).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from dpbench.core.schema import FAILED
from tests.support.store_damage import DAMAGES, make_pristine

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pristine(tmp_path_factory.mktemp("pristine")).parent


@pytest.mark.parametrize("category", list(DAMAGES))
def test_every_damage_gets_exit_0_or_2_from_every_command(category: str, pristine: Path,
                                                          tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.support.store_damage", category,
                           str(pristine / "s.zarr"), str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {r["damage"] for r in rows} == set(DAMAGES[category])
    bad = [f"{r['damage']} / {r['command']}: {', '.join(r['problems'])}: {r['stderr'][-600:]}"
           for r in rows if r["problems"]]
    assert not bad, "\n".join(bad)


def test_damaged_metadata_is_named_in_the_message(pristine: Path, tmp_path: Path) -> None:
    """The message says which file and which field (not only that something is wrong)."""
    import shutil

    store = tmp_path / "s.zarr"
    shutil.copytree(pristine / "s.zarr", store)
    meta = store / "e" / "status" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["chunk_grid"]["configuration"]["chunk_shape"][2] = 0
    meta.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "dpbench", "report", str(store), "--output",
                           str(tmp_path / "r.html")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "'e/status/zarr.json'" in proc.stderr and "chunk shape" in proc.stderr, proc.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_symlink_loop_as_the_store_is_refused(pristine: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop.zarr"
    loop.symlink_to(loop)
    for command in (("run", str(pristine / "suite.yaml"), "--store", str(loop)),
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
    """docs/reliability.md, "Damaged stores": one row per category naming each of its damages."""
    doc = (ROOT / "docs" / "reliability.md").read_text()
    table = doc[doc.index("## Damaged stores"):]
    table = table[:table.index("\n## ", 5)]
    rows = {line.split("|")[1].strip(): line.split("|")[2] for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| category")}
    assert set(rows) == set(DAMAGES) | {"store path", "stored text on a terminal"}, set(rows)
    for category, damages in DAMAGES.items():
        missing = [d for d in damages if f"`{d}`" not in rows[category]]
        assert not missing, (category, missing)
