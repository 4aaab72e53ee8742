"""The ``dpbench`` command line: run, audit, validate, list, status, report, check, profile,
new-plugin, export, diff (and its deprecated old name, compare), plan.

Exit codes: 0 success; 1 a run finished with failed cells, or ``check`` found an expected rate that
does not hold, or ``audit`` found a privacy violation of an ``expect: private`` point or missed a
zoo member (``expect: violation``), or ``diff`` found a regression; 2 bad input (suite, profile,
store path, options, a read-only or full disk for a new store or a report) — in that case nothing
was written; 3 a run lost its dask
scheduler or filled its store's disk (what was computed is kept; rerun to resume); 130 and 143
interrupted by Ctrl-C or SIGTERM (rerun to resume); 141 the reader of the output went away.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..core.errors import UserInputError
from ..engine.backends.base import BACKENDS
from . import diff, export

EXIT_OK, EXIT_FAILED_CELLS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 3
#: Ctrl-C (SIGINT) and SIGTERM (what a batch system sends at walltime, and ``timeout``): the
#: shell's 128 + signal number. The run is recorded as interrupted and resumes with the same
#: command (docs/reliability.md, 'Signals').
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
#: The reader of the output went away (``dpbench status | head``): 128 + SIGPIPE, as a process
#: the signal ended, without a traceback.
EXIT_SIGPIPE = 141


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that clean-up (closing the cluster, recording
    the interruption in the store's run log, releasing the writer lock) runs as for Ctrl-C."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated(f"signal {signum} (SIGTERM)")
#: What an interrupted command says to do next.
_RESUME = {"run": "; run the same command again to resume",
           "audit": "; run the same command again to resume"}

#: Sentinel of ``run --report`` without a path: ``reports/<suite name>.html``.
DEFAULT_REPORT = "<default>"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse already exits 2; keep its message short
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_run_options(r: argparse.ArgumentParser, restart_help: str) -> None:
    """The suite, store and cluster options shared by ``run`` and ``audit``."""
    r.add_argument("suite", help="suite YAML file")
    r.add_argument("--store", required=True, help="zarr store directory (created or resumed)")
    r.add_argument("--backend", default="dask", choices=BACKENDS,
                   help="where cells run: dask (the default: forked workers, then a "
                        "LocalCluster once the work is worth its start; or a profile or a "
                        "scheduler), forked (forked workers only, Linux), processes (a spawned "
                        "process pool, no dask) or inline (this process); docs/architecture.md")
    r.add_argument("--workers", type=int, default=None,
                   help="worker processes of the embedded default or the process pool (default: "
                        "one per core; 0 = inline, no dask)")
    r.add_argument("--scheduler", default=None, help="address of a running dask scheduler")
    r.add_argument("--scheduler-file", default=None, metavar="FILE",
                   help="scheduler file (JSON) written by dask scheduler --scheduler-file; "
                        "precedence: --scheduler, --scheduler-file, DASK_SCHEDULER_ADDRESS, "
                        "--cluster, LocalCluster (docs/clusters.md)")
    r.add_argument("--cluster", default=None, metavar="PROFILE.yaml", help="cluster profile file")
    r.add_argument("--restart", action="store_true", help=restart_help)
    r.add_argument("--break-lock", action="store_true",
                   help="break the store's writer lock when it is stale (its holder no longer "
                        "runs); a live holder is never broken (docs/reliability.md)")
    r.add_argument("--no-retry-failed", action="store_true",
                   help="on resume, leave failed cells as they are")
    r.add_argument("--quiet", action="store_true", help="no progress bar or tables")
    r.add_argument("--report", nargs="?", const=DEFAULT_REPORT, default=None, metavar="PATH",
                   help="build the HTML report after the run (default path: "
                        "reports/<suite name>.html); a run with failed cells reports the done ones")


def _add_only(parser: argparse.ArgumentParser) -> None:
    """``--only``: a slice of the suite or store (:mod:`dpbench.config.slice`)."""
    parser.add_argument("--only", action="append", default=None, metavar="KEY=VALUE[,VALUE]",
                        help="restrict to a slice: KEY is experiment, algorithm (a label or a "
                             "registered name) or problem; repeat for several keys (all must "
                             "hold); values of one key are alternatives")


def _slice(args: argparse.Namespace) -> Any:
    from ..config.slice import Slice

    return Slice.parse(getattr(args, "only", None))


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dpbench", description="Benchmark differentially private convex optimisation "
                "against the rates its papers prove.")
    p.add_argument("--version", action="version", version=f"dpbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_commands(sub)
    # The usage lists the commands but not the deprecated alias (which has no help entry).
    sub.metavar = "{" + ",".join(c for c in sub.choices if c != diff.DEPRECATED_NAME) + "}"
    return p


def _add_commands(sub: Any) -> None:
    """The subcommands (``run`` and ``audit`` share :func:`_add_run_options`)."""
    r = sub.add_parser("run", help="run or resume a suite into a zarr store")
    _add_run_options(r, "discard an existing store whose suite changed and start over")
    _add_only(r)

    au = sub.add_parser("audit", help="run or resume a suite's privacy audits (audits:) into a "
                                      "zarr store; exit 1 on a privacy violation or a missed "
                                      "zoo member")
    _add_run_options(au, "discard the audits of the store whose definition changed")

    v = sub.add_parser("validate", help="check a suite without running anything")
    v.add_argument("suite")

    pl = sub.add_parser("plan", help="what running a suite would cost: cells, CPU time "
                                     "(calibrated from earlier runs), memory per worker, store "
                                     "size, and the jobs of a cluster profile")
    pl.add_argument("suite")
    pl.add_argument("--store", default=None,
                    help="the store the suite would run into: only its pending cells are "
                         "counted, and its recorded runs calibrate the estimate")
    pl.add_argument("--calibrate", action="append", default=None, metavar="STORE",
                    help="a store of earlier runs (a pilot with few seeds is enough) whose "
                         "measured costs calibrate the estimate; repeatable")
    pl.add_argument("--workers", type=int, default=None,
                    help="workers to divide the CPU time by (default: one per core)")
    pl.add_argument("--cluster", default=None, metavar="PROFILE.yaml",
                    help="also show the jobs and walltime this cluster profile would need")
    _add_only(pl)

    ls = sub.add_parser("list", help="registered algorithms and problems")
    ls.add_argument("kind", nargs="?", choices=("algorithms", "problems"), default=None)
    ls.add_argument("--broken", action="store_true",
                    help="also list the deliberately broken mechanisms of the audit's zoo")

    s = sub.add_parser("status", help="progress of a store")
    s.add_argument("store")
    _add_only(s)
    s.add_argument("--failures", type=int, default=5, help="show up to N failure messages")

    rep = sub.add_parser("report", help="write the HTML report and Markdown summary of a store")
    rep.add_argument("store", help="a dpbench store (the zarr directory of dpbench run --store)")
    rep.add_argument("--output", default=None, metavar="PATH.html",
                     help="HTML file to write (default: reports/<suite name>.html); the Markdown "
                          "summary goes next to it with the same stem")
    rep.add_argument("--allow-incomplete", action="store_true",
                     help="report a store with pending or failed cells (the report lists them)")
    rep.add_argument("--overwrite", action="store_true",
                     help="replace output files that dpbench did not write (refused otherwise)")
    _add_only(rep)

    chk = sub.add_parser("check", help="check the suite's expected rates (expect:) against the "
                                       "fitted slopes; exit 1 unless every one agrees")
    chk.add_argument("store", help="a dpbench store")
    chk.add_argument("--allow-incomplete", action="store_true",
                     help="check a store with pending or failed cells")
    _add_only(chk)

    pr = sub.add_parser("profile", help="validate a cluster profile and show what it would start "
                                        "(job script / Kubernetes manifest) without starting it")
    pr.add_argument("profile", metavar="PROFILE.yaml", help="cluster profile file")

    np_ = sub.add_parser("new-plugin", help="scaffold an out-of-tree mechanism plugin package")
    np_.add_argument("name", help="algorithm name: lowercase letters, digits, underscores "
                                  "(also the import package and entry-point name)")
    np_.add_argument("--directory", default=None, metavar="DIR",
                     help="where to write the package (default: ./NAME with dashes); must not "
                          "exist or be empty")
    export.add_parser(sub)
    diff.add_parser(sub)


def _cmd_run(args: argparse.Namespace) -> int:
    from ..config.suite import load_suite
    from ..config.theory import check_derived
    from ..engine.runner import run_suite

    suite = load_suite(args.suite)
    check_derived(suite)
    only = _slice(args)
    _check_report_dir(args.report)
    if args.restart and not _restart_confirmed(args.store, suite):
        return EXIT_USAGE
    summary = run_suite(suite, args.store, scheduler=args.scheduler,
                        scheduler_file=args.scheduler_file, profile=args.cluster,
                        workers=args.workers, backend=args.backend, restart=args.restart,
                        retry_failed=not args.no_retry_failed, progress=not args.quiet,
                        break_lock=args.break_lock, only=only)
    if not args.quiet:
        from .status import print_tables, results_table  # zarr, rich: after the run

        print_tables(*(results_table(args.store, name) for name in summary.counts))
    total = {k: sum(getattr(c, k) for c in summary.counts.values())
             for k in ("total", "done", "failed", "not_applicable", "pending")}
    print(f"store: {summary.store}")
    for name, added in summary.grown.items():
        print(f"grew experiment {name!r} in place: {added}")
    if suite.audits:
        print(f"note: the suite's {len(suite.audits)} audit(s) are not run by dpbench run; "
              "use dpbench audit")
    print(f"backend: {summary.backend}; {summary.computed} cells computed in "
          f"{summary.seconds:.1f} s; totals: {total['done']} done, {total['failed']} failed, "
          f"{total['not_applicable']} not applicable, {total['pending']} pending "
          f"of {total['total']}")
    if args.report is not None:
        # After a run the report is always wanted, failures included: it lists what is missing.
        _write_report(args.store, None if args.report == DEFAULT_REPORT else args.report,
                      allow_incomplete=True, option="--report")
    return EXIT_OK if total["failed"] == 0 and total["pending"] == 0 else EXIT_FAILED_CELLS


def _restart_confirmed(store: str, suite: Any) -> bool:
    """``run --restart`` of a store whose suite did not change discards its results for
    nothing: ask on a terminal, say so otherwise (a script asked for it)."""
    from ..store.cube import Store

    done = Store.unchanged_done_cells(
        Path(store), {e.name: e.fingerprint(suite.root_seed) for e in suite.experiments})
    if not done:
        return True
    question = (f"--restart: the store {store!r} holds this suite unchanged, with {done} computed "
                "cells; discard them and compute everything again?")
    if sys.stdin is not None and sys.stdin.isatty():
        if input(f"{question} [y/N] ").strip().lower() in ("y", "yes"):
            return True
        print("dpbench run: nothing discarded (run without --restart to resume; only additions "
              "to a suite resume in place)", file=sys.stderr)
        return False
    print(f"dpbench run: note: {question.split('; ')[0]}; --restart discards them",
          file=sys.stderr)
    return True


def _cmd_validate(args: argparse.Namespace) -> int:
    from ..config.suite import load_suite
    from ..config.theory import check_derived

    suite = load_suite(args.suite)
    check_derived(suite)
    print(f"{args.suite}: OK — suite {suite.name!r}, {len(suite.experiments)} experiment(s), "
          f"{suite.n_cells} cells")
    if suite.experiments:
        est = suite.estimates()
        print(f"  size: {est['cells']:,.0f} cells (max_cells {suite.max_cells:,}); work ≈ "
              f"{est['work']:.3g} gradient evaluations (Algorithm.cost), roughly "
              f"{est['work'] / 5e6 / 60:.2g} CPU minutes at 5·10⁶ per second (the quickstart's "
              f"rate; samplers are slower); cube values ≈ {est['store_bytes'] / 2**20:.3g} MiB "
              "uncompressed")
        from ..engine.plan import PLAN_BYTES_PER_CHUNK

        rows = sum(math.prod(e.shape[:-1]) for e in suite.experiments)
        print(f"  client memory for the plan: at most {rows * PLAN_BYTES_PER_CHUNK / 2**20:,.0f} "
              f"MiB ({rows:,} chunks of {PLAN_BYTES_PER_CHUNK} bytes at its peak)")
    for e in suite.experiments:
        shape = " x ".join(f"{d}={s}" for d, s in zip(e.dims, e.shape))
        print(f"  {e.name}: {shape}")
    if suite.audits:
        from ..config.audit import n_audit_points

        print(f"  {len(suite.audits)} audit(s), {n_audit_points(suite.audits)} audit points "
              f"(before applicability), alpha = {suite.audit.alpha:g} over the run")
        for a in suite.audits:
            shape = " x ".join(f"{d}={s}" for d, s in zip(a.point_dims, a.point_shape))
            budget = (f"{a.runs} confirmation runs per side (pinned)" if a.runs is not None
                      else f"a budget of {a.budget_s:g} s of worker time per point")
            print(f"  audit {a.name} (expect {a.expect}): {shape}; {budget}")
        print("  note: dpbench run ignores the audits and dpbench audit ignores the experiments")
    return EXIT_OK


def _cmd_plan(args: argparse.Namespace) -> int:
    import os

    from ..config.slice import suite_masks
    from ..config.suite import load_suite
    from ..engine.estimate import calibration, estimate, profile_lines, summary_lines
    from ..engine.plan import plan_suite
    from ..store.cube import Store, check_store_path

    suite = load_suite(args.suite)
    only = _slice(args)
    profile = None
    if args.cluster is not None:
        from ..engine.backends.cluster_class import load_profile

        profile = load_profile(args.cluster)
    if args.workers is not None and args.workers < 1:
        raise UserInputError(f"--workers: must be an integer >= 1, got {args.workers}")
    masks = suite_masks(only, suite) if only else {}
    # every store opened once: a path that is not a store is bad input, named
    stores = [Store.open(path) for path in args.calibrate or []]
    notes = []
    resuming = args.store is not None and check_store_path(Path(args.store))
    if resuming:
        store = Store.open(args.store)
        stores.append(store)
        for e in suite.experiments:
            if store.holds(e.name, e.fingerprint(suite.root_seed)):
                left = store.pending_mask(e.name)
                masks[e.name] = left & masks[e.name] if e.name in masks else left
            elif e.name in store.experiments():
                notes.append(f"experiment {e.name!r} differs from the store's: counted whole")
    scales, used = calibration(stores)
    workers = args.workers or os.cpu_count() or 1
    est = estimate(suite, plan_suite(suite, masks or None), scales, used, workers)
    print(f"{args.suite}: suite {suite.name!r}"
          + (f", slice {only.describe()}" if only else "")
          + (f", resuming {args.store}" if resuming else ""))
    if suite.experiments or not suite.audits:
        for line in summary_lines(est, workers):
            print(f"  {line}")
    for note in notes:
        print(f"  note: {note}")
    if suite.audits:
        print(f"  {_audit_plan_line(suite, workers)}")
    if profile is not None and suite.experiments:
        for line in profile_lines(est, profile):
            print(f"  {line}")
    return EXIT_OK


def _audit_plan_line(suite: Any, workers: int) -> str:
    """What ``dpbench plan`` says of a suite's audits: their points, and the time their budgets
    buy (a budget is worker time, spent on all workers; pinned run counts are not estimated)."""
    from ..audit.engine import plan_audits

    plan = plan_audits(suite)
    budgeted = [pt for pt in plan.points if pt.runs is None]
    seconds = sum(pt.budget_s for pt in budgeted)
    configs = sum(len(pt.configs) for pt in plan.points)
    pinned = len(plan.points) - len(budgeted)
    parts = [f"audits: {len(suite.audits)} ({plan.n_points} applicable points searching "
             f"{configs} configurations, {len(plan.not_applicable)} not applicable)"]
    if budgeted:
        parts.append(f"budgets {seconds:,.0f} s of worker time, about "
                     f"{seconds / max(workers, 1):,.0f} s on {workers} worker(s)")
    if pinned:
        parts.append(f"{pinned} point(s) with pinned runs, not estimated")
    return "; ".join(parts)


def _cmd_audit(args: argparse.Namespace) -> int:
    from ..audit.engine import run_audits
    from ..audit.report import audit_table, summary_lines
    from ..config.suite import load_suite
    from .status import print_tables

    suite = load_suite(args.suite)
    _check_report_dir(args.report)
    summary = run_audits(suite, args.store, scheduler=args.scheduler,
                         scheduler_file=args.scheduler_file, profile=args.cluster,
                         workers=args.workers, backend=args.backend, restart=args.restart,
                         retry_failed=not args.no_retry_failed, progress=not args.quiet,
                         break_lock=args.break_lock)
    if not args.quiet:
        print_tables(audit_table(summary.results))
    for line in summary_lines(summary):
        print(line)
    if args.report is not None:
        _write_report(args.store, None if args.report == DEFAULT_REPORT else args.report,
                      allow_incomplete=True, option="--report")
    return EXIT_OK if summary.ok else EXIT_FAILED_CELLS


def _cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..core import registry
    from .status import print_tables

    tables = []
    if args.kind in (None, "algorithms"):
        t = Table(title="algorithms")
        for col in ("name", "privacy", "requires", "parameters", "citation"):
            t.add_column(col)
        for name, cls in sorted(registry.available("algorithms").items()):
            params = ", ".join(f"{k}={v.default!r}" for k, v in cls.params.items())
            t.add_row(name, cls.privacy, ", ".join(cls.requires), params, cls.citation)
        tables.append(t)
        if args.broken:
            b = Table(title="deliberately broken mechanisms (audit power only; docs/audit.md)")
            for col in ("name", "claims", "the bug"):
                b.add_column(col)
            regular = registry.available("algorithms")
            for name, cls in sorted(registry.available("algorithms", include_broken=True).items()):
                if name not in regular:
                    b.add_row(name, cls.privacy, str(getattr(cls, "broken", "")))
            tables.append(b)
    if args.kind in (None, "problems"):
        t = Table(title="problems")
        for col in ("name", "L", "Delta", "beta", "diameter", "data_norm", "population",
                    "parameters", "citation"):
            t.add_column(col)
        for name, cls in sorted(registry.available("problems").items()):
            try:
                c = cls().constants()
                consts = [f"{c['L']:g}", f"{c['Delta']:g}", f"{c['beta']:g}", f"{c['D']:g}",
                          f"{c['data_norm']:g}" if "data_norm" in c else "—"]
            except Exception as exc:  # a plugin whose defaults cannot be built still gets listed
                consts = [f"({type(exc).__name__})"] * 5
            params = ", ".join(f"{k}={v.default!r}" for k, v in cls.params.items())
            t.add_row(name, *consts, "yes" if cls.has_population else "no", params, cls.citation)
        tables.append(t)
    print_tables(*tables)
    return EXIT_OK


def _cmd_status(args: argparse.Namespace) -> int:
    from ..core.schema import MAX_ERROR_CHARS
    from ..store.summary import summarised
    from .status import print_tables, rows_table, shown

    only = _slice(args)
    fast = None if only else summarised(args.store)
    if fast is not None:  # the run's summary: no zarr needed (docs/architecture.md)
        rows, meta = fast
        print_tables(rows_table(rows, args.store))
        _print_interrupted(meta.get("runs", []))
        return EXIT_OK
    from ..audit.store import audit_names, audit_status
    from ..store.cube import Store
    from .status import status_table

    store = Store.open(args.store)
    audits = audit_names(store)
    table = status_table(store, only)
    if table.row_count or not audits:
        print_tables(table)
    else:  # no empty experiment table above the audits
        print(f"dpbench store {args.store}: audits only")
    index = store.slice_index()
    for name in only.experiments(index):
        where = only.mask(store.root[name]["status"].shape, index[name])
        for coords, msg in store.failures(name, args.failures, where):
            at = ", ".join(f"{k}={shown(v)}" for k, v in coords.items())
            print(f"failed [{shown(name)}] {at}: {shown(msg, MAX_ERROR_CHARS)}")
    for name in audits:
        c = audit_status(store, name)
        print(f"audit {name}: {c['points']} points, {c['finished']} finished, "
              f"{c['not_applicable']} not applicable; {c['batches_done']} batches done, "
              f"{c['batches_failed']} failed")
    from ..store.cube import ROOT_KEY

    _print_interrupted(store.root.attrs.get(ROOT_KEY, {}).get("runs", []))
    return EXIT_OK


def _print_interrupted(runs: list[dict[str, Any]]) -> None:
    if runs and isinstance(runs[-1], dict) and runs[-1].get("interrupted"):
        print(f"last run interrupted: {runs[-1]['interrupted']}")


def _check_report_dir(report: str | None) -> None:
    """``run/audit --report``: refuse a read-only or full output directory before the run."""
    if report is not None:
        from ..store.writable import check_writable

        check_writable(Path("reports", "report.html") if report == DEFAULT_REPORT else
                       Path(report), "--report")


def _write_report(store: str, output: str | None, allow_incomplete: bool,
                  overwrite: bool = False, option: str = "--output", only: Any = None,
                  ) -> None:
    from ..analysis.expectations import summary_line
    from ..report import default_output
    from ..report.build import check_output, render_report, report_context
    from ..store.cube import Store

    opened = Store.open(store)
    target = Path(output) if output is not None else default_output(opened, only)
    check_output(target, overwrite, option)  # before any work: a refusal writes nothing
    context = report_context(opened, allow_incomplete=allow_incomplete, only=only)
    checks = [c for e in context["experiments"] for c in e.expectations]
    html, md = render_report(context, target, overwrite=overwrite, option=option)
    if checks:
        print(summary_line(checks))
    elif context["experiments"]:  # an audit-only store has no rates to declare
        print("no expected rates declared (expect:): the report shows rate-card verdicts only")
    print(f"report: {html} (summary: {md})")


def _cmd_report(args: argparse.Namespace) -> int:
    _write_report(args.store, args.output, args.allow_incomplete, args.overwrite,
                  only=_slice(args))
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from ..analysis.expectations import summary_line
    from ..report.build import store_expectations
    from ..report.figures import estimate_text, fixed_text
    from ..store.cube import Store

    only = _slice(args)
    checks = store_expectations(Store.open(args.store), allow_incomplete=args.allow_incomplete,
                                only=only)
    if not checks:
        print(f"{args.store}: " + (f"no expected rate (expect:) is about the slice "
                                   f"{only.describe()}" if only else
                                   "the suite declares no expected rates (expect:)")
              + "; nothing to check")
        return EXIT_OK
    print(summary_line(checks))
    print("agrees only when the whole 95% CI of the slope lies inside the band; resolution: the "
          "smallest slope error the row could have detected")
    for c in checks:
        e = c.expectation
        axis = e.axis if e.variable == "excess_risk" else f"{e.axis} ({e.variable})"
        print(f"\n{c.outcome:<12} {e.id}  [{c.experiment}] {e.algorithm} on {e.problem}, "
              f"slope in {axis} ({fixed_text(c.fixed)}), expected {e.slope:+.2f}"
              + (f" (paper), derived {c.derived:+.2f}" if math.isfinite(c.derived) else ""))
        if math.isfinite(c.tolerance):
            print(f"{'':13}fitted {estimate_text(c.slope, c.slope_low, c.slope_high)}; band "
                  f"{c.centre:+.2f} ± {c.tolerance:.2f} ({c.tolerance_source}); resolution "
                  f"±{c.resolution:.2f}; {c.points_used}/{c.points} points kept")
        if c.outcome != "agrees" or c.level_outcome:
            print(f"{'':13}{c.reason}")
    print()
    print(summary_line(checks))
    bad = [c for c in checks if c.outcome != "agrees"]
    return EXIT_OK if not bad else EXIT_FAILED_CELLS


def _cmd_profile(args: argparse.Namespace) -> int:
    from ..engine.backends.render import render_profile

    print(render_profile(args.profile))
    return EXIT_OK


def _cmd_new_plugin(args: argparse.Namespace) -> int:
    from .scaffold import scaffold_plugin

    root, files = scaffold_plugin(args.name, args.directory)
    print(f"created plugin package {root}/ with algorithm {args.name!r}:")
    for f in files:
        print(f"  {f}")
    where = root if root.is_absolute() or str(root).startswith(".") else f"./{root}"
    print(f"next: pip install -e {where} && dpbench list algorithms "
          "(guide: docs/writing-a-plugin.md)")
    return EXIT_OK


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: object = None, line: str | None = None) -> None:
    print(f"dpbench: {category.__name__}: {message}", file=sys.stderr)


def _disk_fault_message(args: argparse.Namespace, exc: OSError) -> str:
    """The message of a disk that filled up (or turned read-only) during a run or an audit of
    an existing store: what was written is kept, and the same command resumes (exit 3)."""
    import re

    from ..store.writable import disk_reason

    where = re.sub(r"\.[0-9a-f]{32}\.partial$", "", str(exc.filename)) if exc.filename else ""
    return (f"dpbench {args.command}: error: --store {args.store!r}: {disk_reason(exc)}"
            f"{f' while writing {where!r}' if where else ''}; the store keeps everything written "
            "before: free some space and run the same command again to resume")


def _replace_unencodable() -> None:
    """Print on any terminal: what the standard streams' encoding cannot show (ASCII, Latin-1)
    becomes ``?`` instead of a ``UnicodeEncodeError``."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    _replace_unencodable()
    args = _build_parser().parse_args(argv)
    handler = {"run": _cmd_run, "validate": _cmd_validate, "plan": _cmd_plan, "list": _cmd_list,
               "status": _cmd_status, "report": _cmd_report, "check": _cmd_check,
               "profile": _cmd_profile, "new-plugin": _cmd_new_plugin,
               "audit": _cmd_audit, "export": export.run,
               diff.NAME: diff.run, diff.DEPRECATED_NAME: diff.run_deprecated}[args.command]
    previous = None
    import signal
    import threading

    # SIGTERM ends every command like Ctrl-C: clean-up runs (no partial output, the run log
    # records it, the writer lock is released) and the exit code is 143.
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            return handler(args)
    except UserInputError as exc:
        print(f"dpbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"dpbench: interrupted{_RESUME.get(args.command, '')}", file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print(f"dpbench: terminated (SIGTERM){_RESUME.get(args.command, '')}", file=sys.stderr)
        return EXIT_SIGTERM
    except Exception as exc:
        from ..core.errors import SchedulerLost
        from ..store.writable import is_disk_error

        if args.command in ("run", "audit") and isinstance(exc, OSError) and is_disk_error(exc):
            print(_disk_fault_message(args, exc), file=sys.stderr)
            return EXIT_INTERRUPTED
        if isinstance(exc, RecursionError):  # JSON or YAML nested ~1000 deep: damaged data
            print(f"dpbench {args.command}: error: metadata nested too deeply to read (a damaged "
                  "store or input)", file=sys.stderr)
            return EXIT_USAGE
        if not isinstance(exc, SchedulerLost):
            raise
        print(f"dpbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def console_main() -> None:
    """The ``dpbench`` command (and ``python -m dpbench``): :func:`main`, then a fast exit.

    By the time :func:`main` returns, everything the command wrote is closed and flushed (stores
    are written synchronously, reports through closed files), so the interpreter's teardown of
    its modules, about 0.2 s once numpy, numba and zarr are loaded, is skipped: other threads are
    joined and atexit handlers run as at a normal exit, the standard streams are flushed, and the
    process ends. On an interpreter without these hooks it exits normally.
    """
    import atexit
    import os
    import threading

    try:
        code = main()
    except BrokenPipeError:
        # Whatever is still buffered has nowhere to go: point stdout at /dev/null so that the
        # flushes below (and the interpreter's) cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_SIGPIPE
    join, run_atexit = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs",
                                                                        None)
    if join is None or run_atexit is None:
        sys.exit(code)
    join()
    run_atexit()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    console_main()
