"""Client memory vs suite size: peak RSS of planning a run (validate, expand, pack).

Before it submits anything, ``dpbench run`` validates the suite, expands every experiment into
chunks and packs them into tasks (:mod:`dpbench.engine.plan`). This benchmark measures the peak
resident memory of exactly that, in a fresh process per size, for a trivial suite (the
non-private reference on LB-Quad, 10 seeds per cell) of 10⁴, 10⁵ and 10⁶ cells (the default
``max_cells``), and prints the ratio to the smallest. Issue 16's target is a ratio ≤ 1.5 at 10⁶
(streaming expansion under the submission window); the planner builds the whole task list up
front today, so the figure shows how far it is.

Run: ``python benchmarks/bench_client_memory.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

SIZES = (10_000, 100_000, 1_000_000)
SEEDS = 10

CHILD = r"""
import json, resource, sys, time
from dpbench.config.suite import parse_suite
from dpbench.engine.plan import expand, pack
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
chunks = [c for e in suite.experiments for c in expand(suite, e)[0]]
tasks = pack(chunks)
print(json.dumps({"cells": suite.n_cells, "tasks": len(tasks), "seconds": time.perf_counter() - t0,
                  "base_mb": base / 1024,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(cells: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(cells), str(SEEDS)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = [measure(c) for c in SIZES]
    first = rows[0]["peak_mb"]
    for r in rows:
        print(f"{r['cells']:>9,} cells: {r['tasks']:>7,} tasks, planning {r['seconds']:.1f} s, "
              f"client peak RSS {r['peak_mb']:.0f} MB (after imports {r['base_mb']:.0f} MB), "
              f"{r['peak_mb'] / first:.2f}x the {rows[0]['cells']:,}-cell figure")


if __name__ == "__main__":
    main()
