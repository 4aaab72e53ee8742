"""Client memory vs suite size: peak RSS of planning a run and streaming its tasks.

``dpbench run`` validates the suite, plans every experiment (:func:`dpbench.engine.plan.plan_suite`:
one pass over the grid that instantiates every configuration and keeps compact per-chunk arrays)
and then builds the tasks one at a time as the backend's submission window frees up. This
benchmark measures the peak resident memory of exactly that client-side work — the plan, then
every task built in submission order and dropped once "submitted", with a window of 64 tasks
held — in a fresh process per size, for a trivial suite (the non-private reference on LB-Quad,
10 seeds per cell) of 10⁴, 10⁵ and 10⁶ cells (the default ``max_cells``), and prints the ratio to
the smallest. The target (issue 16) is a ratio ≤ 1.5 at 10⁶.

Run: ``python benchmarks/bench_client_memory.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

#: (cells, seeds per grid point): the issue's three sizes at 10 seeds, then the worst case for the
#: per-chunk arrays, 10⁶ and 10⁷ cells of one seed each (10⁶ and 10⁷ chunks; issue 33: ≤ 300 MB).
SIZES = ((10_000, 10), (100_000, 10), (1_000_000, 10), (1_000_000, 1), (10_000_000, 1))

CHILD = r"""
import collections, json, resource, sys, time
from dpbench.config.suite import parse_suite
from dpbench.engine.plan import plan_suite
cells, seeds = int(sys.argv[1]), int(sys.argv[2])
points = cells // seeds
n_values = min(points, 1000)
eps = [round(0.1 * (i + 1), 3) for i in range(points // n_values)]
text = f'''
name: mem
seeds: {seeds}
max_cells: {cells}
experiments:
  - name: e
    problems: [{{problem: lb_quad}}]
    algorithms: [{{algorithm: nonprivate_erm}}]
    grid: {{n: {list(range(2, 2 + n_values))}, p: [2], epsilon: {eps}}}
'''
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
suite = parse_suite(text)
plan = plan_suite(suite)
window = collections.deque(maxlen=64)  # the tasks a backend holds in flight
n_tasks = 0
for task in plan.tasks():
    window.append(task)
    n_tasks += 1
assert sum(len(c.seeds) for t in window for c in t.chunks) <= plan.n_cells == suite.n_cells
print(json.dumps({"cells": suite.n_cells, "tasks": n_tasks, "seconds": time.perf_counter() - t0,
                  "base_mb": base / 1024,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(cells: int, seeds: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(cells), str(seeds)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = [(seeds, measure(c, seeds)) for c, seeds in SIZES]
    first = rows[0][1]["peak_mb"]
    for seeds, r in rows:
        print(f"{r['cells']:>9,} cells x {seeds:>2} seeds: {r['tasks']:>7,} tasks, planning {r['seconds']:.1f} s, "
              f"client peak RSS {r['peak_mb']:.0f} MB (after imports {r['base_mb']:.0f} MB), "
              f"{r['peak_mb'] / first:.2f}x the {rows[0][1]['cells']:,}-cell figure")


if __name__ == "__main__":
    main()
