"""Shared fixtures and the ``slow`` marking: the statistical harness checks, and the tests listed
in ``slow_tests.txt`` (measured: see ``scripts/slow_tests.py``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.cubes import TINY_SUITE

#: The statistical checks of dpbench.testing: thousands of mechanism runs per test.
_STATISTICAL_CHECKS = ("check_empirical_privacy", "check_epsilon_limit", "check_rate_smoke")


#: Tests measured at a second or more on 2 cores: left out of the fast loop, which stays near two
#: minutes (README).
_MEASURED_SLOW = frozenset(
    line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text(
        encoding="utf-8").splitlines() if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every harness case of a statistical check, and every test of ``slow_tests.txt``, is
    ``slow``: outside the fast development loop (``-m "not slow"``), still in the default run."""
    for item in items:
        if any(name in item.nodeid for name in _STATISTICAL_CHECKS) or \
                item.nodeid in _MEASURED_SLOW:
            item.add_marker(pytest.mark.slow)


#: Seconds of worker time the harness's privacy audit gets in this repository's own tests (a
#: plugin author's check_algorithm gets dpbench audit's default, 60 s): the generic checks run on
#: every registered mechanism, and the suite must stay within its time (a test that measures
#: the default's power sets its own budget with dpbench.testing.audit_budget).
HARNESS_AUDIT_BUDGET_S = 4.0


@pytest.fixture(autouse=True)
def _harness_audit_budget() -> object:
    from dpbench.testing import audit_budget

    with audit_budget(HARNESS_AUDIT_BUDGET_S):
        yield


@pytest.fixture
def tiny_suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(TINY_SUITE))
    return path
