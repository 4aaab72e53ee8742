"""Report benchmarks.

1. Rate-fit cost per curve: :func:`dpbench.analysis.fit_curve` on a synthetic 7-point × 20-seed
   curve with 2000 bootstrap resamples, many repetitions (target ≤ 50 ms per curve).
2. A report of ≥ 100 figures through :func:`dpbench.report.build_report` (target < 30 s): a
   suite of cheap cells (the non-private reference and output perturbation on LB-Quad and ridge
   logistic variants, n × ε grids in three experiments of different p) is run first, its time
   reported separately; then the report is built and its figures, size and time are reported.

Run: ``python benchmarks/bench_report.py [--repeats 200] [--seeds 10] [--workers N] [--keep DIR]``.
Each figure is printed on a line of its own.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from dpbench.analysis import fit_curve
from dpbench.config.suite import parse_suite
from dpbench.core.ratecard import RateCard
from dpbench.engine.runner import run_suite
from dpbench.report import build_report

FIT_TARGET_MS = 50.0
REPORT_TARGET_S = 30.0
MIN_FIGURES = 100

PROBLEMS = """
      - problem: lb_quad
      - label: lb_quad_r05
        problem: lb_quad
        params: {radius: 0.5, data_norm: 0.5}
      - label: lb_quad_r2
        problem: lb_quad
        params: {radius: 2.0}
      - label: logistic_r01
        problem: logistic
        params: {ridge: 0.1, population_sample: 1000}
      - label: logistic_r03
        problem: logistic
        params: {ridge: 0.3, population_sample: 1000}
      - label: logistic_r1
        problem: logistic
        params: {ridge: 1.0, population_sample: 1000}"""

EXPERIMENT = """
  - name: pure_p{p}
    problems:{problems}
    algorithms:
      - label: nonprivate
        algorithm: nonprivate_erm
      - label: output_perturbation
        algorithm: output_perturbation
    grid:
      n: [32, 64, 128, 256]
      p: [{p}]
      epsilon: [0.5, 1.0, 2.0, 4.0]
"""


def bench_fit(repeats: int) -> list[float]:
    """Seconds per fit_curve call on a 7-point × 20-seed curve with 2000 resamples."""
    rng = np.random.default_rng(1)
    x = [32.0 * 2 ** k for k in range(7)]
    samples = [rng.gamma(4.0, 1.0 / (4.0 * xi), size=20) for xi in x]   # mean ∝ 1/n
    card = RateCard(expression="L*D*p/(n*epsilon)", exponents={"n": -1, "p": 1, "epsilon": -1},
                    citation="synthetic")
    consts = {"L": 1.0, "D": 2.0, "Delta": 1.0, "beta": 1.0}
    fixed = {"p": 5, "epsilon": 1.0, "delta": 0.0}
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        fit_curve("bench", "alg", "prob", "n", fixed, x, samples, card=card, constants=consts,
                  n_resamples=2000, rng=i)
        times.append(time.perf_counter() - t0)
    return times


def suite_text(seeds: int) -> str:
    experiments = "".join(EXPERIMENT.format(p=p, problems=PROBLEMS) for p in (2, 5, 10))
    return f"name: bench_report\nroot_seed: 5\nseeds: {seeds}\nexperiments:{experiments}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200, help="fit_curve repetitions")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per grid point of the suite")
    ap.add_argument("--workers", type=int, default=None,
                    help="workers for the suite run (default: one per core; 0 = inline)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the store and report here")
    args = ap.parse_args()

    times = bench_fit(args.repeats)
    ms = 1000 * statistics.median(times)
    print(f"fit_curve (7 points x 20 seeds, 2000 resamples): median {ms:.2f} ms/curve, "
          f"p90 {1000 * float(np.quantile(times, 0.9)):.2f} ms over {args.repeats} repeats "
          f"(target <= {FIT_TARGET_MS:g} ms: {'OK' if ms <= FIT_TARGET_MS else 'MISSED'})")

    with tempfile.TemporaryDirectory(prefix="dpbench-bench-report-") as tmp:
        root = args.keep or Path(tmp)
        store, html = root / "bench_report.zarr", root / "bench_report.html"
        suite = parse_suite(suite_text(args.seeds), "bench_report.yaml")
        t0 = time.perf_counter()
        summary = run_suite(suite, store, workers=args.workers, progress=False)
        print(f"suite run: {summary.computed} cells in {time.perf_counter() - t0:.1f} s "
              f"({summary.backend}; not part of the report time)")
        t0 = time.perf_counter()
        html_path, md_path = build_report(store, html)
        seconds = time.perf_counter() - t0
        text = html_path.read_text(encoding="utf-8")
        n_fig = len(re.findall(r"<img ", text))
        n_rows = text.count('<span class="verdict verdict-') - 4   # minus the Methods legend
        ok = n_fig >= MIN_FIGURES and seconds < REPORT_TARGET_S
        print(f"report: {n_fig} figures, {n_rows} rate-card rows built in {seconds:.1f} s "
              f"(target >= {MIN_FIGURES} figures in < {REPORT_TARGET_S:g} s: "
              f"{'OK' if ok else 'MISSED'})")
        print(f"report per figure: {1000 * seconds / max(n_fig, 1):.0f} ms")
        print(f"report HTML size: {html_path.stat().st_size / 1e6:.2f} MB "
              f"({html_path.stat().st_size / max(n_fig, 1) / 1e3:.1f} kB per figure); "
              f"Markdown summary: {md_path.stat().st_size / 1e3:.1f} kB")


if __name__ == "__main__":
    main()
