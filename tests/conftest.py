"""Shared fixtures and the ``slow`` marking of the statistical harness checks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.cubes import TINY_SUITE

#: The statistical checks of dpbench.testing: thousands of mechanism runs per test.
_STATISTICAL_CHECKS = ("check_empirical_privacy", "check_epsilon_limit", "check_rate_smoke")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every harness case of a statistical check is ``slow``: outside the fast development loop
    (``-m "not slow"``), still in the default run."""
    for item in items:
        if any(name in item.nodeid for name in _STATISTICAL_CHECKS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def tiny_suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(TINY_SUITE))
    return path
