"""A store is data, not code: edited rate cards and names cannot hang, execute or escape, and the
report never silently replaces a file it did not write (docs/reliability.md, 'Stores are data')."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zarr

from dpbench.cli.main import main
from dpbench.config.suite import load_suite
from dpbench.core.ratecard import RateCard
from dpbench.engine.runner import run_suite
from dpbench.report.build import safe_file_stem
from dpbench.store.cube import ROOT_KEY


@pytest.fixture
def store(tiny_suite_file: Path, tmp_path: Path) -> Path:
    path = tmp_path / "s.zarr"
    run_suite(load_suite(tiny_suite_file), path, workers=0, progress=False)
    return path


def _edit_card(store: Path, expression: str) -> None:
    root = zarr.open_group(str(store), mode="r+")
    for name, g in root.groups():
        algos = dict(g.attrs.get("algorithms", {}))
        for label, info in algos.items():
            if info.get("rate_card"):
                algos[label] = {**info, "rate_card": {**info["rate_card"],
                                                      "expression": expression}}
        g.attrs["algorithms"] = algos


def _cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpbench", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


@pytest.mark.slow
def test_an_exponent_tower_in_a_stored_rate_card_does_not_hang(store: Path,
                                                                tmp_path: Path) -> None:
    _edit_card(store, "p/(n*epsilon) + 0*9**9**9")
    t0 = time.perf_counter()
    for args in (["report", str(store), "--output", str(tmp_path / "r.html")],
                 ["check", str(store)]):
        r = _cli(args, tmp_path)
        assert r.returncode in (0, 1), r.stderr
        assert "Traceback" not in r.stderr
    assert time.perf_counter() - t0 < 120


@pytest.mark.slow
def test_code_in_a_stored_rate_card_is_refused_not_run(store: Path, tmp_path: Path) -> None:
    _edit_card(store, "__import__('os').system('touch PWNED') + n")
    r = _cli(["report", str(store), "--output", str(tmp_path / "r.html")], tmp_path)
    assert r.returncode == 2 and "not a valid rate card" in r.stderr, r.stderr
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("expression", ["9" * 3000, "+".join(["n"] * 500), "log(" * 60 + "n"
                                        + ")" * 60, "1e13*n", "n.real", "[n]", "lambda: 1",
                                        "log(n, 2)", "minimum(n)"])
def test_the_rate_grammar_is_bounded(expression: str) -> None:
    with pytest.raises(ValueError):
        RateCard(expression=expression, exponents={}, citation="")


@pytest.mark.parametrize("name,expected", [
    ("quickstart", "quickstart"), ("../../evil", "s"), ("/etc/passwd", "s"), ("a/b", "s"),
    ("..", "s"), (".hidden", "s"), ("CON", "s"), ("nul.txt", "s"), ("x" * 101, "s"), (5, "s"),
    ("a..b", "s"), ("ok-name_1.v2", "ok-name_1.v2")])
def test_safe_file_stem(name: object, expected: str) -> None:
    assert safe_file_stem(name, "s") == expected


@pytest.mark.slow
@pytest.mark.parametrize("name,expected", [("../../evil", "s"), ("quickstart", "quickstart")])
def test_a_stored_suite_name_becomes_a_path_only_when_safe(store: Path, tmp_path: Path,
                                                           name: str, expected: str) -> None:
    root = zarr.open_group(str(store), mode="r+")
    root.attrs[ROOT_KEY] = {**dict(root.attrs[ROOT_KEY]), "suite_name": name}
    work = tmp_path / "a" / "work"
    work.mkdir(parents=True)
    cwd = Path.cwd()
    os.chdir(work)
    try:
        assert main(["report", str(store)]) == 0
    finally:
        os.chdir(cwd)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.*")
                     if p.is_file() and "s.zarr" not in p.parts and p.suffix in (".html", ".md"))
    assert written == [f"a/work/reports/{expected}.html", f"a/work/reports/{expected}.md"]


@pytest.mark.slow
def test_the_report_does_not_replace_a_file_it_did_not_write(store: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    assert main(["report", str(store), "--output", str(mine)]) == 2
    assert "was not written by dpbench" in capsys.readouterr().err
    assert mine.read_text() == "my notes" and not mine.with_suffix(".md").exists()
    md = tmp_path / "other.md"
    md.write_text("# my summary")
    assert main(["report", str(store), "--output", str(tmp_path / "other.html")]) == 2
    assert md.read_text() == "# my summary" and not (tmp_path / "other.html").exists()
    # its own report is replaced freely; a foreign file with --overwrite
    ours = tmp_path / "r.html"
    assert main(["report", str(store), "--output", str(ours)]) == 0
    assert main(["report", str(store), "--output", str(ours)]) == 0
    assert main(["report", str(store), "--output", str(mine), "--overwrite"]) == 0
    assert "dpbench" in mine.read_text()[:2048]
