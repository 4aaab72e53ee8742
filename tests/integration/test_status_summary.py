"""``dpbench status`` from the run's status summary (store/paths.SUMMARY_KEY): the same table as
counting the status arrays, without zarr; never used once a writer has begun, nor where the
arrays hold more than counts (failure messages, audits)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpbench.cli.main import main
from dpbench.config.records import suite_record
from dpbench.config.suite import load_suite
from dpbench.engine.runner import run_suite
from dpbench.store.cube import ROOT_KEY, Store
from dpbench.store.paths import SUMMARY_KEY
from dpbench.store.summary import summarised


def _status(store: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["status", str(store)]) == 0
    return capsys.readouterr().out


def _set_summary(store: Path, rows: object) -> None:
    """Replace the summary's rows, keeping its digest of the status files."""
    s = Store.open(store, mode="r+")
    meta = dict(s.root.attrs[ROOT_KEY])
    meta[SUMMARY_KEY] = None if rows is None else {**meta[SUMMARY_KEY], "rows": rows}
    s.root.attrs[ROOT_KEY] = meta


def test_the_summary_is_the_status_arrays_counted(tiny_suite_file: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    suite = load_suite(tiny_suite_file)
    store = tmp_path / "s.zarr"
    run_suite(suite, store, workers=0, progress=False)
    found = summarised(store)
    assert found is not None
    rows, _ = found
    assert rows == [list(r) for r in Store.open(store).status_rows()]
    assert sum(r[3] for r in rows) > 0 and sum(r[5] for r in rows) > 0  # done and n/a cells
    fast = _status(store, capsys)
    _set_summary(store, None)  # as a killed run leaves it: the arrays are counted
    assert summarised(store) is None
    assert _status(store, capsys) == fast


def test_a_writer_or_a_changed_status_file_voids_the_summary(
        tiny_suite_file: Path, tmp_path: Path) -> None:
    suite = load_suite(tiny_suite_file)
    store = tmp_path / "s.zarr"
    run_suite(suite, store, workers=0, progress=False)
    assert summarised(store) is not None
    # a run (or an audit, or a growth) begins, then is killed
    Store.prepare(Path(store), suite_record(suite))
    assert summarised(store) is None
    run_suite(suite, store, workers=0, progress=False)  # the resume writes it again
    assert summarised(store) is not None
    # a status chunk deleted by hand (to have its cells computed again): counted, and resumed
    chunk = next(p for p in sorted((store / "approx" / "status").rglob("*"))
                 if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    assert summarised(store) is None
    assert run_suite(suite, store, workers=0, progress=False).computed > 0
    assert summarised(store) is not None


def test_failures_audits_and_malformed_summaries_are_counted_from_the_arrays(
        tiny_suite_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    run_suite(load_suite(tiny_suite_file), store, workers=0, progress=False)
    rows, _ = summarised(store)  # type: ignore[misc]
    failed = [list(r) for r in rows]
    failed[0][4] = 1  # status would list the failure messages: they are in the arrays
    for bad in (failed, "rows", [["approx", "a", 1, 1, 0, 0]],
                [["approx", "a", 1, 1, 0, 0, -1]], [["approx", "a", 1.5, 1, 0, 0, 0]]):
        _set_summary(store, bad)
        assert summarised(store) is None, bad
    _set_summary(store, rows)
    assert summarised(store) is not None
    (store / "audit").mkdir()  # audits: their batch counts are in their arrays
    assert summarised(store) is None


def test_status_of_a_finished_store_imports_no_zarr(tiny_suite_file: Path,
                                                    tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    run_suite(load_suite(tiny_suite_file), store, workers=0, progress=False)
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from dpbench.cli.main import main; "
         f"code = main(['status', {str(store)!r}]); "
         "print(code, [m for m in ('zarr', 'xarray', 'numba') if m in sys.modules])"],
        capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout
    assert "dpbench store" in out.stdout


def _snapshot(path: Path) -> dict[str, str]:
    import hashlib

    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


EXPECT = """
    expect:
      - {id: Q-n, algorithm: nonprivate, problem: lb_quad, axis: n, slope: -1, source: test}
"""


def test_the_resume_of_a_finished_store_writes_nothing(tiny_suite_file: Path,
                                                       tmp_path: Path) -> None:
    """Nothing to compute and nothing to refresh: the resume is read-only (no run-log entry,
    no lock file) and reports the store's counts."""
    suite = load_suite(tiny_suite_file)
    store = tmp_path / "s.zarr"
    first = run_suite(suite, store, workers=0, progress=False)
    before = _snapshot(store)
    again = run_suite(suite, store, workers=0, progress=False)
    assert again.backend == "none (nothing to compute)" and again.computed == 0
    assert again.counts == first.counts and again.complete
    assert _snapshot(store) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr", "tiny.yaml"]


def test_a_resume_that_would_refresh_the_theory_opens_the_store(tiny_suite_file: Path,
                                                                tmp_path: Path) -> None:
    """An expected rate added to a finished store's suite changes no cell: the resume computes
    nothing, but refreshes the theory the report compares with, and logs the run."""
    suite = load_suite(tiny_suite_file)
    store = tmp_path / "s.zarr"
    run_suite(suite, store, workers=0, progress=False)
    text = tiny_suite_file.read_text()
    grid_end = text.index("  - name: pure")
    expecting = tiny_suite_file.with_name("expecting.yaml")
    expecting.write_text(text[:grid_end] + EXPECT.lstrip("\n") + text[grid_end:])
    runs = len(Store.open(store).root.attrs[ROOT_KEY]["runs"])
    summary = run_suite(load_suite(expecting), store, workers=0, progress=False)
    assert summary.computed == 0
    s = Store.open(store)
    assert [e["id"] for e in s.root["approx"].attrs["expectations"]] == ["Q-n"]
    assert len(s.root.attrs[ROOT_KEY]["runs"]) == runs + 1
    # now up to date: the next resume is read-only again
    before = _snapshot(store)
    run_suite(load_suite(expecting), store, workers=0, progress=False)
    assert _snapshot(store) == before


def test_experiment_names_in_a_summary_never_lead_outside_the_store(
        tiny_suite_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The names in a summary are data: one that is not a plain directory name (here a path to
    a directory beside the store) is never walked; status counts the arrays instead."""
    store = tmp_path / "s.zarr"
    run_suite(load_suite(tiny_suite_file), store, workers=0, progress=False)
    rows, _ = summarised(store)  # type: ignore[misc]
    fast = _status(store, capsys)
    (tmp_path / "outside" / "status").mkdir(parents=True)
    for name in ("../outside", "/etc", ".", "a/b"):
        _set_summary(store, [[name, *rows[0][1:]], *rows[1:]])
        assert summarised(store) is None, name
        assert _status(store, capsys) == fast
