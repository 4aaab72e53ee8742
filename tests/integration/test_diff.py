"""``dpbench diff A B`` end to end on small stores run inline (``--workers 0``).

None of these tests can be flaky: the suites fix their root seed and seeds, every cell is
deterministic (its data and mechanism streams depend only on its identity), so two runs of a
suite are bit-identical, and the Monte Carlo sign flips of large families are seeded from the
family's identity (the families here are small enough to be enumerated exactly anyway). Each
assertion therefore holds on every run or on none.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import zarr

from dpbench.algorithms.output_perturbation import OutputPerturbation
from dpbench.cli.main import main
from dpbench.core import registry
from dpbench.report.diff import diff_stores

SUITE = """
name: versions
root_seed: 3
seeds: 6
experiments:
  - name: pure
    problems:
      - problem: lb_quad
      - problem: logistic
        params: {ridge: 0.5}
    algorithms:
      - label: outpert
        algorithm: output_perturbation
      - label: regout
        algorithm: regularized_output_perturbation
      - label: ref
        algorithm: nonprivate_erm
    grid:
      n: [16, 32, 64]
      p: [2]
      epsilon: [1.0]
"""
#: The two families a worse ``outpert`` must flag, and nothing else.
OUTPERT = {("pure", "outpert", "lb_quad"), ("pure", "outpert", "logistic")}


class NoisierOutputPerturbation(OutputPerturbation):
    """Output perturbation with 1.2× the noise scale: a planted regression of the code behind
    the same name and parameters (so the same random stream: B's noise is A's, scaled)."""

    version: ClassVar[str] = "1-noisier"

    def sensitivity(self, n: int, L: float, Delta: float) -> float:
        return 1.2 * super().sensitivity(n, L, Delta)


def _run(tmp: Path, name: str, suite: str = SUITE) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(suite)
    store = tmp / f"{name}.zarr"
    assert main(["run", str(path), "--store", str(store), "--workers", "0", "--quiet"]) == 0
    return store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A; the same suite run again; A with outpert's excess × 1.2 written into a copy; and the
    suite run with :class:`NoisierOutputPerturbation` installed as ``output_perturbation``."""
    tmp = tmp_path_factory.mktemp("diff")
    out = {"a": _run(tmp, "a"), "same": _run(tmp, "same")}
    planted = tmp / "planted.zarr"
    shutil.copytree(out["a"], planted)
    group = zarr.open_group(str(planted), mode="r+")["pure"]
    values = group["excess_risk"][...]
    labels = [str(v) for v in group["algorithm"][...]]
    values[labels.index("outpert")] *= 1.2
    group["excess_risk"][...] = values
    out["planted"] = planted
    registry.register("algorithms", NoisierOutputPerturbation)
    try:
        out["noisier"] = _run(tmp, "noisier")
    finally:
        registry.register("algorithms", OutputPerturbation)
    return out


def _flagged(a: Path, b: Path) -> dict[tuple[str, str, str], str]:
    result, _ = diff_stores(a, b, alpha=0.05, min_change=0.05)
    return {f.key: f.verdict for f in result.flagged}


def test_two_runs_of_a_suite_change_nothing(stores: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """(a) Nothing flagged, exit 0, every change exactly 0, every tested p-value 1."""
    assert main(["diff", str(stores["a"]), str(stores["same"])]) == 0
    assert "0 regression(s), 0 improvement(s)" in capsys.readouterr().out
    result, _ = diff_stores(stores["a"], stores["same"], alpha=0.05, min_change=0.05)
    assert not result.flagged and result.paired_cells == 90
    assert all(p.change == 0.0 and p.relative == 0.0 for p in result.points)
    assert all(f.relative_change == 0.0 for f in result.families)
    tested = [f for f in result.families if f.verdict != "no signal"]
    assert {f.algorithm for f in tested} == {"outpert", "regout"}
    assert all(f.p_value == 1.0 for f in tested)
    assert all(s.change == 0 for s in result.slopes if np.isfinite(s.change))


def test_a_planted_twenty_percent_is_a_regression(stores: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """(b) outpert × 1.2 in B: flagged on each problem as a regression, nothing else; exit 1."""
    assert main(["diff", str(stores["a"]), str(stores["planted"])]) == 1
    assert "2 regression(s), 0 improvement(s)" in capsys.readouterr().out
    assert _flagged(stores["a"], stores["planted"]) == dict.fromkeys(OUTPERT, "regression")
    result, _ = diff_stores(stores["a"], stores["planted"], alpha=0.05, min_change=0.05)
    assert all(f.relative_change == pytest.approx(0.2) for f in result.regressions)


def test_a_noisier_mechanism_run_for_real_is_a_regression(
        stores: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """(b) The change comes from running code with 1.2× the noise scale (excess grows ~1.2² on
    these smooth losses): flagged on each problem, nothing else, and its new version is named."""
    assert main(["diff", str(stores["a"]), str(stores["noisier"])]) == 1
    out = capsys.readouterr().out
    assert "definition changed [pure] outpert: version 1 → 1-noisier" in out
    assert _flagged(stores["a"], stores["noisier"]) == dict.fromkeys(OUTPERT, "regression")
    result, _ = diff_stores(stores["a"], stores["noisier"], alpha=0.05, min_change=0.05)
    for f in result.regressions:
        assert f.definition_changes == ["version 1 → 1-noisier"]
        assert 0.2 < f.relative_change < 0.5
    # the other mechanisms ran the same code on the same data: bit-identical
    assert all(p.change == 0.0 for p in result.points if p.algorithm != "outpert")


def test_swapping_the_stores_turns_the_regression_into_an_improvement(
        stores: dict[str, Path]) -> None:
    """(d) B ↔ A: the same families, now improvements (−1/6 = 1/1.2 − 1); exit 0."""
    assert main(["diff", str(stores["planted"]), str(stores["a"])]) == 0
    assert _flagged(stores["planted"], stores["a"]) == dict.fromkeys(OUTPERT, "improvement")


def test_the_report_names_the_flagged_families(stores: dict[str, Path], tmp_path: Path) -> None:
    """(e) --output writes the HTML page and the Markdown next to it; both name the flagged
    families; a second run replaces them, a file dpbench did not write is refused (exit 2)."""
    html = tmp_path / "out" / "cmp.html"
    args = ["diff", str(stores["a"]), str(stores["planted"]), "--output", str(html)]
    assert main(args) == 1
    md = html.with_suffix(".md")
    page, summary = html.read_text(), md.read_text()
    flagged = page[page.index('<section id="flagged">'):page.index('<section id="families">')]
    for problem in ("lb_quad", "logistic"):
        assert f"<td>pure</td><td>outpert</td><td>{problem}</td>" in flagged
    assert "regout" not in flagged and "+20.0%" in flagged
    assert "<style>" in page and 'name="generator" content="dpbench' in page
    flagged_md = summary[summary.index("## Flagged families"):summary.index("## All families")]
    assert "| pure | outpert | lb_quad | **regression** | +20.0% |" in flagged_md
    assert "| pure | outpert | logistic | **regression** | +20.0% |" in flagged_md
    assert main(args) == 1                        # dpbench's own files are replaced
    assert html.read_text() == page                # deterministic
    md.write_text("my notes\n")
    assert main(args) == 2 and md.read_text() == "my notes\n"
    assert main([*args, "--overwrite"]) == 1 and md.read_text() == summary


def test_unpairable_stores_exit_2_and_write_nothing(stores: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """(c) A different root seed, or another definition of a problem, means other data: exit 2
    naming what differs, and no report."""
    reseeded = _run(tmp_path, "reseeded", SUITE.replace("root_seed: 3", "root_seed: 4"))
    ridge = _run(tmp_path, "ridge", SUITE.replace("ridge: 0.5", "ridge: 0.25"))
    capsys.readouterr()
    html = tmp_path / "out" / "cmp.html"
    for other, why in ((reseeded, "root seed 3 (A) vs 4 (B)"),
                       (ridge, "problem 'logistic': ridge: 0.5 → 0.25")):
        assert main(["diff", str(stores["a"]), str(other), "--output", str(html)]) == 2
        err = capsys.readouterr().err
        assert "cannot be paired" in err and why in err
        assert not html.parent.exists()


def test_what_only_one_store_has_is_listed(stores: dict[str, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A grid value, a mechanism and an experiment in B only are listed, not compared; the
    common cells are paired and unchanged."""
    grown = SUITE.replace("n: [16, 32, 64]", "n: [16, 32, 64, 128]").replace(
        "      - label: ref\n", "      - label: outpert_gap\n        algorithm: output_perturbation"
        "\n        params: {solver_gap: 1e-6}\n      - label: ref\n")
    grown += SUITE.split("experiments:\n")[1].replace("name: pure", "name: extra")
    other = _run(tmp_path, "grown", grown)
    capsys.readouterr()
    assert main(["diff", str(stores["a"]), str(other)]) == 0
    out = capsys.readouterr().out
    for line in ("not compared: experiments only in B: extra",
                 "not compared: pure: n only in B: 128",
                 "not compared: pure: algorithm only in B: outpert_gap"):
        assert line in out
    result, _ = diff_stores(stores["a"], other, alpha=0.05, min_change=0.05)
    assert result.paired_cells == 90 and all(p.change == 0.0 for p in result.points)


@pytest.mark.parametrize("case", ["missing", "not a store", "alpha", "alpha text",
                                  "min-change", "markdown output"])
def test_bad_input_exits_2(stores: dict[str, Path], tmp_path: Path, case: str) -> None:
    a, b = str(stores["a"]), str(stores["same"])
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "file.txt").write_text("x")
    args: dict[str, list[Any]] = {
        "missing": [a, str(tmp_path / "nowhere.zarr")],
        "not a store": [str(tmp_path / "plain"), b],
        "alpha": [a, b, "--alpha", "1.5"],
        "alpha text": [a, b, "--alpha", "five"],
        "min-change": [a, b, "--min-change", "-0.1"],
        "markdown output": [a, b, "--output", str(tmp_path / "cmp.md")],
    }
    try:
        code = main(["diff", *args[case]])
    except SystemExit as exc:       # argparse refuses "five" itself
        code = exc.code
    assert code == 2
    assert not (tmp_path / "cmp.md").exists()


def test_a_slice_compares_only_its_families(stores: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``--only``: the planted regression outside the slice is not seen; inside it, it is."""
    assert main(["diff", str(stores["a"]), str(stores["planted"]), "--only",
                 "algorithm=regout"]) == 0
    assert "0 regression(s)" in capsys.readouterr().out
    assert main(["diff", str(stores["a"]), str(stores["planted"]), "--only",
                 "algorithm=outpert", "--only", "problem=lb_quad"]) == 1
    out = capsys.readouterr().out
    assert "1 regression(s)" in out
    assert main(["diff", str(stores["a"]), str(stores["planted"]), "--only",
                 "algorithm=nope"]) == 2


def test_compare_is_a_deprecated_alias_of_diff(stores: dict[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``dpbench compare`` (the old name) runs ``dpbench diff`` identically — same exit code,
    same output, same report — after one line on stderr; ``dpbench --help`` does not list it."""
    pages = []
    html = tmp_path / "cmp.html"
    for command in ("diff", "compare"):
        assert main([command, str(stores["a"]), str(stores["planted"]), "--output",
                     str(html)]) == 1
        out, err = capsys.readouterr()
        pages.append((out, html.read_bytes(), html.with_suffix(".md").read_bytes()))
        assert err == ("" if command == "diff"
                       else "dpbench compare is deprecated: use dpbench diff\n")
    assert pages[0] == pages[1]
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert "diff" in listing and "compare" not in listing
