"""``dpbench diff A B``: did the code that wrote store B make any mechanism worse than the code
that wrote store A, on the same data?

Exit codes (usable in CI): 0 no regression; 1 at least one regression (a Holm-significant family
whose pooled relative change exceeds ``--min-change``, B worse); 2 bad input — a missing store, a
path that is not a store, stores whose cells cannot be paired (different root seed or problem
definitions, or nothing done in both), a bad option — and then nothing is written.

``dpbench compare A B``, the command's former name, is a deprecated alias kept for one minor
version: the same options and behaviour, one line on stderr, not listed in ``dpbench --help``.

Heavy imports (xarray, scipy, the analysis and its settings) happen inside :func:`run`: building
the parser for another command must stay cheap.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from ..analysis.diff import FamilyChange, StoreDiff

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2
#: At most this many rows of grid points and slopes are printed per table (the HTML has all).
MAX_ROWS = 40
#: The command, and its deprecated old name.
NAME, DEPRECATED_NAME = "diff", "compare"
#: What the deprecated name prints to stderr before it runs the command.
DEPRECATION = "dpbench compare is deprecated: use dpbench diff"


class _Setting:
    """An option's default taken from the analysis settings
    (:data:`dpbench.analysis.settings.DEFAULT`) only when it is needed — shown by ``--help``, or
    resolved by :func:`run` — since importing them loads the analysis."""

    def __init__(self, field: str) -> None:
        self.field = field

    def value(self) -> float:
        from ..analysis.settings import DEFAULT

        return float(getattr(DEFAULT, self.field))

    def __str__(self) -> str:
        return f"{self.value():g}"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``diff``, and its hidden deprecated alias ``compare``, on the subcommands ``sub``
    of the ``dpbench`` parser."""
    d = sub.add_parser(
        NAME, help="diff store B against store A on paired cells (same data); exit 1 when a "
                   "mechanism got significantly worse (docs/analysis.md)")
    _add_options(d)
    # No help=: argparse lists only the subcommands that have one.
    old = sub.add_parser(DEPRECATED_NAME, description=f"Deprecated: use dpbench {NAME} (the same "
                         "command under its old name, removed after one minor version).")
    _add_options(old)
    return d


def _add_options(c: argparse.ArgumentParser) -> None:
    c.add_argument("a", metavar="A", help="the baseline store")
    c.add_argument("b", metavar="B", help="the candidate store (changes are B − A)")
    c.add_argument("--alpha", type=float, default=_Setting("diff_alpha"),
                   help="family-wise error rate of the flags, Holm-corrected over every "
                        "(experiment, mechanism, problem) family (default %(default)s)")
    c.add_argument("--min-change", type=float, default=_Setting("diff_min_change"),
                   metavar="FRACTION",
                   help="smallest pooled relative change flagged, as a fraction (default "
                        "%(default)s; 0.1 = 10%%): tiny numerical changes can be significant "
                        "without mattering")
    c.add_argument("--output", default=None, metavar="PATH.html",
                   help="also write an HTML report (and the Markdown summary next to it, same "
                        "stem)")
    c.add_argument("--overwrite", action="store_true",
                   help="replace output files that dpbench did not write (refused otherwise)")
    c.add_argument("--only", action="append", default=None, metavar="KEY=VALUE[,VALUE]",
                   help="diff a slice: KEY is experiment, algorithm or problem (as for "
                        "dpbench run --only; checked against A)")


def _check_options(args: argparse.Namespace) -> Path | None:
    """Resolve the defaults from the settings, refuse bad options and an output that may not be
    written, before any work (exit 2)."""
    from ..analysis.diff import check_thresholds
    from ..core.errors import UserInputError

    for name in ("alpha", "min_change"):
        value = getattr(args, name)
        if isinstance(value, _Setting):
            setattr(args, name, value.value())
    check_thresholds(args.alpha, args.min_change)
    if args.output is None:
        return None
    from ..report.build import check_output

    target = Path(args.output)
    if target.suffix.lower() == ".md":
        raise UserInputError(f"--output {args.output!r} must be the HTML file (.html); the "
                             "Markdown summary is written next to it")
    check_output(target, args.overwrite, "--output")
    return target


def _family_table(title: str, families: list[FamilyChange]) -> Table:
    from rich.table import Table

    from ..report.diff import pct

    t = Table(title=title)
    for col in ("experiment", "mechanism", "problem", "verdict", "rel. change", "points",
                "pairs", "p", "p (Holm)", "definition changed"):
        t.add_column(col, justify="right" if col in ("rel. change", "points", "pairs", "p",
                                                     "p (Holm)") else "left")
    styles = {"regression": "bold red", "improvement": "bold green"}
    for f in families:
        verdict = f"[{styles[f.verdict]}]{f.verdict}[/]" if f.verdict in styles else f.verdict
        t.add_row(f.experiment, f.algorithm, f.problem, verdict, pct(f.relative_change),
                  f"{f.points_used}/{f.points}", str(f.pairs), _p(f.p_value), _p(f.p_holm),
                  "; ".join(f.definition_changes) or "—")
    return t


def _p(value: float) -> str:
    return f"{value:.2g}" if math.isfinite(value) else "—"


def _tables(result: StoreDiff) -> list[Table]:
    """The flagged families, every family, and for the flagged ones their grid points and
    slopes (first :data:`MAX_ROWS` rows each)."""
    from rich.table import Table

    from ..report.diff import pct, pct_ci
    from ..report.figures import estimate_text, fixed_text, num, slope_text

    tables = []
    flagged = result.flagged
    if flagged:
        tables.append(_family_table("flagged families (B vs A)", flagged))
    tables.append(_family_table("all families (B vs A)", result.families))
    keys = {f.key for f in flagged}
    points = [p for p in result.points if (p.experiment, p.algorithm, p.problem) in keys]
    if points:
        t = Table(title=f"grid points of the flagged families (change B − A with its "
                        f"{result.level:.0%} t interval; relative change with its delta-method "
                        "interval)")
        for col in ("experiment", "mechanism", "problem", "point", "pairs", "mean A", "mean B",
                    "change", "rel. change"):
            t.add_column(col)
        for p in points[:MAX_ROWS]:
            t.add_row(p.experiment, p.algorithm, p.problem, fixed_text(p.point), str(p.pairs),
                      num(p.mean_a, 4), num(p.mean_b, 4),
                      estimate_text(p.change, p.change_low, p.change_high, "num"),
                      f"{pct(p.relative)} {pct_ci(p.relative_low, p.relative_high)}".strip())
        tables.append(t)
    slopes = [s for s in result.slopes if (s.experiment, s.algorithm, s.problem) in keys]
    if slopes:
        t = Table(title=f"slopes of the flagged families ({result.level:.0%} bootstrap CI)")
        for col in ("experiment", "mechanism", "problem", "axis", "fixed", "slope A", "slope B",
                    "B − A"):
            t.add_column(col)
        for s in slopes[:MAX_ROWS]:
            t.add_row(s.experiment, s.algorithm, s.problem, s.axis, fixed_text(s.fixed),
                      estimate_text(s.a.slope, s.a.slope_low, s.a.slope_high),
                      estimate_text(s.b.slope, s.b.slope_low, s.b.slope_high),
                      slope_text(s.change))
        tables.append(t)
    return tables


def run(args: argparse.Namespace) -> int:
    """``dpbench diff``: print the diff, write the report if asked; the exit code."""
    target = _check_options(args)
    from ..config.slice import Slice
    from ..report.diff import diff_context, diff_stores, render_diff, unmatched_lines
    from .status import print_tables

    result, prov = diff_stores(args.a, args.b, alpha=args.alpha, min_change=args.min_change,
                               only=Slice.parse(args.only))
    print_tables(*_tables(result))
    for e in result.experiments:
        for label, diff in e.definition_changes.items():
            print(f"definition changed [{e.name}] {label}: {'; '.join(diff)}")
    for line in unmatched_lines(result):
        print(f"not compared: {line}")
    if target is not None:
        html, md = render_diff(diff_context(result, prov), target, overwrite=args.overwrite)
        print(f"report: {html} (summary: {md})")
    print(result.summary())
    return EXIT_REGRESSION if result.regressions else EXIT_OK


def run_deprecated(args: argparse.Namespace) -> int:
    """``dpbench compare``: :func:`run`, after one line on stderr saying to use ``dpbench diff``."""
    print(DEPRECATION, file=sys.stderr)
    return run(args)
