"""Committed reports cannot go stale silently (docs/analysis.md, "Committed reports").

Every report under ``reports/`` written by ``dpbench report`` records what it was built with
(``built_with``: the analysis rules' version, the suite's source file and hash, the version of
every mechanism and problem). This test fails when the code no longer matches: a registered
plugin's version changed since the report was built (its cube would now come out differently),
the analysis rules changed (its verdicts might), or the suite file changed after its report (its
declared rates or grid might). The remedy is to re-run the suite and regenerate the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dpbench.analysis import ANALYSIS_VERSION
from dpbench.core.registry import get_algorithm, get_problem
from dpbench.core.seeding import stable_hash
from dpbench.report.build import read_built_with

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted(p for p in (ROOT / "reports").glob("*.md")
                 if p.read_text(encoding="utf-8").startswith("# dpbench report:"))


def test_there_are_committed_reports() -> None:
    assert len(REPORTS) >= 8, [p.name for p in REPORTS]


def stale_reasons(record: dict, root: Path = ROOT) -> list[str]:
    """Why a report built with ``record`` no longer matches the code and the suite files."""
    reasons = []
    if record.get("analysis") != ANALYSIS_VERSION:
        reasons.append(f"analysis rules version {record.get('analysis')} (now {ANALYSIS_VERSION})")
    for kind, lookup in (("algorithms", get_algorithm), ("problems", get_problem)):
        for name, version in record.get(kind, {}).items():
            try:
                now = lookup(name).version
            except Exception as exc:  # an unregistered plugin cannot be checked: stale
                reasons.append(f"{kind[:-1]} {name!r} is not registered ({exc})")
                continue
            if str(now) != str(version):
                reasons.append(f"{kind[:-1]} {name} version {version} (now {now})")
    suite = root / record.get("suite_source", "")
    if not suite.is_file():
        reasons.append(f"suite file {record.get('suite_source')!r} not found")
    elif stable_hash(suite.read_text(encoding="utf-8")) != record.get("suite_hash"):
        reasons.append(f"{record.get('suite_source')} changed after the report was built")
    return reasons


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.stem)
def test_committed_report_matches_the_code(report: Path) -> None:
    record = read_built_with(report.read_text(encoding="utf-8"))
    assert record is not None, f"{report.name} records no built_with: regenerate it"
    html = report.with_suffix(".html")
    assert read_built_with(html.read_text(encoding="utf-8")) == record, (
        f"{html.name} and {report.name} were built from different stores or code")
    reasons = stale_reasons(record)
    assert not reasons, (f"{report.name} is stale: {'; '.join(reasons)}. Re-run its suite and "
                         "regenerate the report (dpbench run SUITE --store S --report)")


def test_a_bumped_version_makes_a_report_stale() -> None:
    # The check itself can fail: a record with an older mechanism version, an older analysis,
    # or a suite whose text changed is reported stale, each with its reason.
    record = {"analysis": ANALYSIS_VERSION, "suite_source": "suites/quickstart.yaml",
              "suite_hash": stable_hash((ROOT / "suites/quickstart.yaml").read_text("utf-8")),
              "algorithms": {"noisy_sgd": str(get_algorithm("noisy_sgd").version)},
              "problems": {"lb_lin": str(get_problem("lb_lin").version)}}
    assert stale_reasons(record) == []
    old = {**record, "algorithms": {"noisy_sgd": "3"}}
    assert stale_reasons(old) == ["algorithm noisy_sgd version 3 (now "
                                  f"{get_algorithm('noisy_sgd').version})"]
    assert "analysis rules version 1" in stale_reasons({**record, "analysis": 1})[0]
    assert "changed after" in stale_reasons({**record, "suite_hash": "0" * 64})[0]
