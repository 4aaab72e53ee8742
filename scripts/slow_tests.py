"""Regenerate ``tests/slow_tests.txt``: the tests the fast development loop leaves out.

The fast loop (``pytest -m "not slow"``, README) must stay near two minutes on 2 cores. A test is
listed when its setup, call and teardown took at least ``--threshold`` seconds in a measured run
of the fast loop; ``tests/conftest.py`` marks every listed test ``slow`` (it still runs in the
default, whole suite)::

    python -m pytest -q -n 2 -m "not slow" tests --durations=0 > durations.log
    python scripts/slow_tests.py durations.log --merge > tests/slow_tests.txt

``--merge`` keeps the tests already listed (a measurement of the fast loop no longer sees them).
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

LIST = Path(__file__).resolve().parents[1] / "tests" / "slow_tests.txt"
_ROW = re.compile(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)")


def measured(log: Path) -> dict[str, float]:
    """Seconds per test node id (setup, call and teardown summed) in a ``--durations=0`` log."""
    per: dict[str, float] = collections.defaultdict(float)
    for line in log.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            per[m.group(2)] += float(m.group(1))
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--threshold", type=float, default=1.0)
    ap.add_argument("--merge", action="store_true")
    args = ap.parse_args()
    slow = {n for n, s in measured(args.log).items() if s >= args.threshold}
    if args.merge and LIST.exists():
        slow |= {line.strip() for line in LIST.read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.startswith("#")}
    print(f"# Tests left out of the fast loop (-m \"not slow\"): each took >= {args.threshold:g} s "
          "on 2 cores.\n# Regenerate with scripts/slow_tests.py (its docstring); the whole "
          "suite runs them all.")
    for node in sorted(slow):
        print(node)


if __name__ == "__main__":
    main()
