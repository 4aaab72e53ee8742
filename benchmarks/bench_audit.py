"""Audit throughput per shipped mechanism: releases per second through its batch path vs ``run``.

For every mechanism label of ``suites/audit.yaml``'s designated instances (the audits whose
name starts with ``designated_``), at that instance (its problem, n, p, ε, δ and pinned canary,
the pair the audit builds):

* **batch**: ``algorithm.release_batch`` (the vectorised ``run_batch``, or ``run_many``, or the
  ``run`` loop when the mechanism has neither: what the audit calls), releases per second on
  one side, timed over batches of growing size until one takes ``--seconds``;
* **loop**: ``algorithm.release`` in a plain Python loop with one generator, as an audit of a
  mechanism without a batch path runs it, timed the same way;

both in this process, single-threaded BLAS, after a warm-up call (first-call costs, numba
compilation, caches excluded). Also, with ``--point LABEL``, one audit point of that label end to
end at the default budget (60 s of worker time) through ``dpbench audit``'s engine inline,
reporting the confirmation runs it reached.

Run: ``python benchmarks/bench_audit.py [--seconds 1.0] [--only LABEL ...] [--point LABEL]``.
Prints a Markdown table (label, instance, path, batch releases/s, loop releases/s, ratio).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from dpbench.audit.engine import plan_audits
from dpbench.audit.runs import point_pair
from dpbench.config.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "suites" / "audit.yaml"


def _rate(fn, seconds: float, start: int = 16, cap: int = 1 << 22) -> float:
    """Releases per second of ``fn(size)``: sizes grow fourfold until one call takes
    ``seconds`` (or reaches ``cap``)."""
    size = start
    while True:
        t = time.perf_counter()
        fn(size)
        took = time.perf_counter() - t
        if took >= seconds or size >= cap:
            return size / took
        size *= 4


def measure(pt, seconds: float) -> dict:
    algorithm = pt.algorithm(0)
    problem = pt.problem()
    c = pt.configs[0]
    pair = point_pair(pt, 0)
    eps, delta = float(c.epsilon), float(c.delta)
    rng = np.random.default_rng(0)
    kind = ("run_batch" if type(algorithm)._has_batch_path() else
            "run_many" if type(algorithm)._has_fast_path() else "run")

    def batch(size: int) -> None:
        algorithm.release_batch(pair.d0, problem, epsilon=eps, delta=delta, rng=rng, size=size)

    def loop(size: int) -> None:
        for _ in range(size):
            algorithm.release(pair.d0, problem, epsilon=eps, delta=delta, rng=rng)

    batch(4)
    loop(2)
    return {"label": pt.algorithm_label, "instance": f"{pt.problem_label}, {c.describe()}",
            "path": kind, "batch": _rate(batch, seconds), "loop": _rate(loop, seconds, start=4)}


def audit_point(label: str) -> str:
    from dpbench.audit.engine import run_audits
    from dpbench.audit.report import audit_section
    from dpbench.store.cube import Store

    suite = load_suite(str(SUITE))
    keep = [a for a in suite.audits if a.name.startswith("designated_")
            and any(x.label == label for x in a.algorithms)]
    if not keep:
        raise SystemExit(f"no designated instance of {label!r} in {SUITE}")
    import dataclasses

    a = keep[0]
    a = dataclasses.replace(a, algorithms=tuple(x for x in a.algorithms if x.label == label))
    suite = dataclasses.replace(suite, audits=(a,))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run_audits(suite, Path(tmp) / "a.zarr", workers=0, progress=False)
        wall = time.perf_counter() - t
        row = audit_section(Store.open(Path(tmp) / "a.zarr"), a.name).rows[0]
    return (f"audit point {label}: {row.runs_completed} confirmation runs per side, "
            f"{row.selection_runs} selection runs, ε_lb {row.epsilon_lb:.3f}, "
            f"{row.seconds:.1f} s of batches, {wall:.1f} s wall (inline)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="target seconds per timed call")
    ap.add_argument("--only", nargs="*", default=None, help="mechanism labels to measure")
    ap.add_argument("--point", default=None, help="also audit this label's instance end to end")
    args = ap.parse_args(argv)
    plan = plan_audits(load_suite(str(SUITE)))
    seen: set[str] = set()
    rows = []
    with threadpool_limits(1):
        for pt in plan.points:
            if not pt.audit.startswith("designated_") or pt.algorithm_label in seen:
                continue
            if args.only and pt.algorithm_label not in args.only:
                continue
            seen.add(pt.algorithm_label)
            rows.append(measure(pt, args.seconds))
            r = rows[-1]
            print(f"# {r['label']}: {r['path']} {r['batch']:.3g}/s, run loop {r['loop']:.3g}/s",
                  file=sys.stderr, flush=True)
    print("| mechanism | instance | path | batch releases/s | run loop releases/s | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['label']}` | {r['instance']} | {r['path']} | {r['batch']:.3g} | "
              f"{r['loop']:.3g} | {r['batch'] / r['loop']:.3g} |")
    if args.point:
        print()
        print(audit_point(args.point))
    return 0


if __name__ == "__main__":
    sys.exit(main())
