"""docs/bst14.md's accountant table is what the code computes (scripts/accountant_table.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("accountant_table",
                                                  ROOT / "scripts" / "accountant_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_has_every_case_and_its_header() -> None:
    table = _script()
    lines = table.documented((ROOT / "docs" / "bst14.md").read_text(encoding="utf-8"))
    assert lines[0] == table.HEADER
    assert len(lines) == 2 + len(table.CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case", range(9))
def test_every_printed_number_matches_the_code(case: int) -> None:
    # Each row recomputed by the functions the ledger and the calibration use (the n = 10⁴
    # rows compose T = 10⁸ steps: about a minute each).
    table = _script()
    lines = table.documented((ROOT / "docs" / "bst14.md").read_text(encoding="utf-8"))
    assert lines[2 + case] == table.row(*table.CASES[case])
