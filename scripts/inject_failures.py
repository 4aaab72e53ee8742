#!/usr/bin/env python
"""Failure injection anyone can run: ``python scripts/inject_failures.py [--keep DIR]``.

Runs a small suite uninterrupted, then each failure scenario — SIGKILL a worker, SIGKILL the client
and resume, kill the dask scheduler and resume, a hanging cell (hard per-cell time limit), a
memory-hungry cell (per-cell memory limit) — compares each final cube with the uninterrupted one
and prints one line per scenario: PASS/FAIL, cells lost / differing / duplicated, and what
``dpbench status`` showed. Exit code 0 when every scenario passes, 1 otherwise. The scenarios live
in ``tests/support/failures.py`` (shared with tests/integration/test_failure_injection.py).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from tests.support import failures as tf  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", metavar="DIR", default=None,
                    help="work in DIR and keep the stores (default: a temporary directory)")
    ap.add_argument("--only", nargs="+", choices=sorted(tf.SCENARIOS), default=None,
                    help="run only these scenarios")
    args = ap.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # expected connection errors
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="dpbench-faults-"))
    try:
        t0 = time.perf_counter()
        ws = tf.Workspace(root).prepare()
        print(f"uninterrupted run: {ws.total} cells in {time.perf_counter() - t0:.1f} s "
              f"({ws.reference})", flush=True)
        failed = 0
        for name, scenario in tf.SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            t0 = time.perf_counter()
            try:
                line = scenario(ws).line()
            except Exception as exc:  # a scenario that cannot even finish is a failure
                line = f"FAIL  {name}: {type(exc).__name__}: {exc}"
            failed += line.startswith("FAIL")
            print(f"{line} [{time.perf_counter() - t0:.1f} s]", flush=True)
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # the guard matters: dask's worker processes re-import __main__
    sys.exit(main())
