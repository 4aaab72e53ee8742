"""Build a store's report: one self-contained HTML file and a Markdown summary next to it.

The report is computed from the cube only (:mod:`dpbench.analysis` does the statistics) and is
deterministic: the same cube gives the same bytes (seeded bootstrap, figures drawn under a fixed
``rc_context`` and saved without a software stamp, no build time in the output).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from jinja2 import (
    ChoiceLoader,
    Environment,
    FunctionLoader,
    PackageLoader,
    StrictUndefined,
    select_autoescape,
)

from .._version import __version__
from ..analysis import (
    VERDICT_TEXT,
    CollapseCheck,
    Comparison,
    Crossover,
    EpsilonConvergence,
    ExpectationCheck,
    RateFit,
    check_expectations,
    fit_rates,
    sweep_axes,
)
from ..analysis.expectations import summary_line
from ..analysis.experiment import analyse
from ..analysis.settings import ANALYSIS_VERSION, DEFAULT
from ..analysis.spent import NON_PRIVATE, PrivacySpent
from ..config.slice import Slice
from ..core.errors import UserInputError
from ..core.schema import DONE, FAILED, NOT_APPLICABLE, REPORT_VARIABLES
from ..store.cube import ROOT_KEY, Store
from ..store.summary import Counts
from ..store.writable import check_writable, write_all_or_nothing
from . import sections
from .figures import (
    DPI,
    PALETTE,
    Curve,
    Panel,
    RatePanel,
    axis_symbol,
    data_uri,
    duration_text,
    estimate_text,
    fixed_text,
    has_signal,
    num,
    png_bytes,
    slope_text,
)
from .overview import (
    ProblemLeaders,
    combo_note,
    cost_panels,
    overlay_panels,
    problem_leaders,
)


# --- view models ------------------------------------------------------------------------------

@dataclass
class FitRow:
    """A row of the executive rate-card table."""

    fit: RateFit
    exponent: float | None

    @property
    def points(self) -> str:
        return f"{int(self.fit.used.sum())}/{len(self.fit.x)}"

    @property
    def verdict_text(self) -> str:
        return VERDICT_TEXT[self.fit.verdict]


@dataclass
class CardInfo:
    """An algorithm variant's rate card, as stored in the cube."""

    label: str
    algorithm: str
    privacy: str
    params: str
    expression: str
    exponents: list[tuple[str, float]]
    citation: str
    regime: str
    notes: str


@dataclass
class ProblemInfo:
    label: str
    problem: str
    params: str
    constants: str
    citation: str


@dataclass
class FigureEntry:
    title: str
    uri: str
    alt: str
    caption: list[str]
    width: int = 720
    height: int = 420
    anchor: str = ""


@dataclass
class PairSummary:
    """Holm-significant paired comparisons of two algorithms on one problem."""

    problem: str
    a: str
    b: str
    tested: int
    a_better: list[str]
    b_better: list[str]


@dataclass
class CellGroup:
    """Cells of one status sharing one message."""

    status: str
    message: str
    count: int
    algorithms: list[str]
    problems: list[str]

    @property
    def first_line(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else "(no message)"

    @property
    def multiline(self) -> bool:
        return len(self.message.strip().splitlines()) > 1


@dataclass
class ExperimentSection:
    name: str
    description: str
    shape: str
    normalisation: str
    counts: Counts
    problems: list[ProblemInfo]
    cards: list[CardInfo]
    references: list[str]
    rows: list[FitRow]
    figures: list[FigureEntry] = field(default_factory=list)
    figure_notes: list[str] = field(default_factory=list)
    n_comparisons: int = 0
    pairs: list[PairSummary] = field(default_factory=list)
    significant: list[Comparison] = field(default_factory=list)
    crossovers: list[Crossover] = field(default_factory=list)
    collapse: list[CollapseCheck] = field(default_factory=list)
    convergence: list[EpsilonConvergence] = field(default_factory=list)
    cells: list[CellGroup] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    expectations: list[ExpectationCheck] = field(default_factory=list)
    overlays: list[FigureEntry] = field(default_factory=list)
    overlay_notes: list[str] = field(default_factory=list)
    costs: list[FigureEntry] = field(default_factory=list)
    cost_notes: list[str] = field(default_factory=list)
    leaders: list[ProblemLeaders] = field(default_factory=list)
    privacy: list[PrivacySpent] = field(default_factory=list)

    @property
    def incomplete(self) -> bool:
        return self.counts.pending + self.counts.failed > 0

    @property
    def outcomes(self) -> dict[str, int]:
        """How many declared expected rates agree, disagree, are inconclusive or missing."""
        return {o: sum(c.outcome == o for c in self.expectations)
                for o in ("agrees", "disagrees", "inconclusive", "missing")}


# --- helpers ----------------------------------------------------------------------------------

def _mapping_text(d: dict[str, Any] | None) -> str:
    """``k=v, ...``; a parameter left at its public default (``null``) reads ``k=default``."""
    return ", ".join(f"{k}={_value_text(v)}" for k, v in (d or {}).items())


def _value_text(value: Any) -> str:
    if value is None:
        return "default"
    return num(value, 6) if isinstance(value, float) else str(value)


def _algorithm_info(ds: xr.Dataset, label: str) -> dict[str, Any]:
    return dict(ds.attrs.get("algorithms", {}).get(label, {}))


def _exponent(ds: xr.Dataset, label: str, axis: str) -> float | None:
    card = _algorithm_info(ds, label).get("rate_card") or {}
    value = card.get("exponents", {}).get(axis)
    return float(value) if value is not None else None


def _cards(ds: xr.Dataset) -> tuple[list[CardInfo], list[str]]:
    """Rate cards of the algorithms that have one, and the labels of those without."""
    cards, refs = [], []
    for label in (str(a) for a in ds.algorithm.values):
        info = _algorithm_info(ds, label)
        card = info.get("rate_card")
        if not card:
            refs.append(f"{label} ({info.get('algorithm', '?')}, "
                        f"privacy {info.get('privacy', '?')})")
            continue
        exps = [(str(k), float(v)) for k, v in card.get("exponents", {}).items()]
        cards.append(CardInfo(label, str(info.get("algorithm", "")), str(info.get("privacy", "")),
                              _mapping_text(info.get("params")), card.get("expression", ""), exps,
                              card.get("citation", ""), card.get("regime", ""),
                              card.get("notes", "")))
    return cards, refs


def _problems(ds: xr.Dataset) -> list[ProblemInfo]:
    out = []
    for label in (str(p) for p in ds.problem.values):
        info = ds.attrs.get("problems", {}).get(label, {})
        out.append(ProblemInfo(label, str(info.get("problem", "")),
                               _mapping_text(info.get("params")),
                               _mapping_text(info.get("constants")),
                               str(info.get("citation", ""))))
    return out


def _shape_text(ds: xr.Dataset) -> str:
    return " × ".join(f"{axis_symbol(d)}={ds.sizes[d]}" for d in ds.excess_risk.dims)


def _seed_points(ds: xr.Dataset, fit: RateFit) -> tuple[np.ndarray, np.ndarray]:
    """Axis values and excess risks of the done seeds along a fit's curve."""
    sub = ds.sel({"algorithm": fit.algorithm, "problem": fit.problem, **fit.fixed})
    er = sub.excess_risk.transpose(fit.axis, "seed").values
    done = sub.status.transpose(fit.axis, "seed").values == DONE
    x = np.broadcast_to(np.asarray(ds[fit.axis].values, dtype=float)[:, None], er.shape)
    return x[done], er[done]


def _not_drawn_reason(ds: xr.Dataset, fit: RateFit) -> str:
    why = (f"{fit.algorithm} — mean excess ≤ 0 or below the optimisation floor (round-off of "
           "the certified optimum) at every point")
    if _algorithm_info(ds, fit.algorithm).get("privacy") == NON_PRIVATE:
        why += "; it is the non-private reference"
    return why


# --- figures ----------------------------------------------------------------------------------

def _panel_groups(fits: Sequence[RateFit], problems: Sequence[str], axes: Sequence[str],
                  ) -> list[tuple[str, str, list[dict[str, Any]], list[RateFit]]]:
    """(problem, axis, fixed combinations in cube order, fits) for every problem × swept axis."""
    out = []
    for prob, axis in itertools.product(problems, axes):
        group = [f for f in fits if f.problem == prob and f.axis == axis]
        combos: list[dict[str, Any]] = []
        for f in group:
            if f.fixed not in combos:
                combos.append(f.fixed)
        if group:
            out.append((prob, axis, combos, group))
    return out


def _panels(ds: xr.Dataset, fits: Sequence[RateFit], axes: list[str]
            ) -> tuple[list[RatePanel], list[str]]:
    """The panels to draw, and notes on (problem, axis) pairs with combinations left undrawn."""
    algs = [str(a) for a in ds.algorithm.values]
    normalisation = str(ds.attrs.get("normalisation", "average scale"))
    panels, notes = [], []
    for prob, axis, combos, group in _panel_groups(fits, [str(p) for p in ds.problem.values],
                                                   axes):
        note = combo_note(axis, combos) if len(combos) > DEFAULT.max_combos else ""
        empty: list[str] = []
        reasons: list[str] = []
        for fixed in (combos[:1] if note else combos):
            curves, not_drawn = [], []
            for f in (g for g in group if g.fixed == fixed):
                if not has_signal(f):
                    not_drawn.append(_not_drawn_reason(ds, f))
                    continue
                sx, sy = _seed_points(ds, f)
                curves.append(Curve(f, sx, sy, PALETTE[algs.index(f.algorithm) % len(PALETTE)],
                                    _exponent(ds, f.algorithm, axis)))
            if curves:
                panels.append(RatePanel(str(ds.attrs.get("experiment", "")), prob, axis, fixed,
                                        curves, normalisation, not_drawn, note))
            else:
                empty.append(fixed_text(fixed))
                reasons += [r for r in not_drawn if r not in reasons]
        if empty:
            notes.append(f"{prob} vs {axis_symbol(axis)}: nothing to draw at "
                         f"{'; '.join(empty)} — " + "; ".join(reasons)
                         + " (algorithms not applicable to the problem have no curve at all)")
    return panels, notes


def _figure_entry(panel: Panel, anchor: str = "") -> FigureEntry:
    """A panel drawn and embedded as a PNG, with its alt text and caption."""
    fig = panel.figure()
    width, height = (round(v * DPI) for v in fig.get_size_inches())
    return FigureEntry(panel.title(), data_uri(png_bytes(fig)), panel.alt(), panel.caption(),
                       width, height, anchor)


# --- comparisons and cells ----------------------------------------------------------------------

def _pair_summaries(comparisons: Sequence[Comparison], varying: Sequence[str],
                    ) -> list[PairSummary]:
    """Per (problem, a, b): how many points were tested and where each one was better (points
    named by the ``varying`` axes only; "all points" when one was better everywhere)."""
    pairs: dict[tuple[str, str, str], PairSummary] = {}
    for c in comparisons:
        key = (c.problem, c.a, c.b)
        s = pairs.setdefault(key, PairSummary(c.problem, c.a, c.b, 0, [], []))
        s.tested += 1
        where = fixed_text({k: v for k, v in c.point.items() if k in varying}) or "the grid point"
        if c.better == c.a:
            s.a_better.append(where)
        elif c.better == c.b:
            s.b_better.append(where)
    for s in pairs.values():
        for better in (s.a_better, s.b_better):
            if s.tested > 1 and len(better) == s.tested:
                better[:] = [f"all {s.tested} points"]
    return list(pairs.values())


def _cell_groups(ds: xr.Dataset) -> list[CellGroup]:
    """Failed and not-applicable cells grouped by identical message (cube order)."""
    st, err = ds.status.values, ds.error.values
    algs, probs = [str(a) for a in ds.algorithm.values], [str(p) for p in ds.problem.values]
    out = []
    for code, name in ((FAILED, "failed"), (NOT_APPLICABLE, "not applicable")):
        idx = np.nonzero(st == code)
        groups: dict[str, tuple[int, set[int], set[int]]] = {}
        for ai, pi, msg in zip(idx[0], idx[1], err[idx]):
            count, a_set, p_set = groups.get(str(msg), (0, set(), set()))
            a_set.add(int(ai))
            p_set.add(int(pi))
            groups[str(msg)] = (count + 1, a_set, p_set)
        for msg, (count, a_set, p_set) in groups.items():
            out.append(CellGroup(name, msg, count, [algs[i] for i in sorted(a_set)],
                                 [probs[i] for i in sorted(p_set)]))
    return out


def _missing(name: str, counts: Counts, fits: Iterable[RateFit]) -> list[str]:
    if counts.pending + counts.failed == 0:
        return []
    out = [f"{name}: {counts.pending} pending and {counts.failed} failed of {counts.total} cells; "
           "fits, figures and comparisons use the done cells only."]
    for f in fits:
        if f.missing:
            out.append(f"{f.algorithm} on {f.problem} vs {axis_symbol(f.axis)} "
                       f"({fixed_text(f.fixed)}): missing " + "; ".join(f.missing))
    return out


# --- experiments ------------------------------------------------------------------------------

def _open_slice(store: Store, name: str, only: Slice | None,
                variables: Sequence[str] = REPORT_VARIABLES) -> xr.Dataset:
    """An experiment's cube (its ``variables``), cut to the slice ``only``'s algorithms and
    problems, loaded (:meth:`~dpbench.store.cube.Store.cube`)."""
    return store.cube(name, variables,
                      only.positions(store.slice_index()[name]) if only else None)


def _counts(store: Store, name: str, only: Slice | None) -> Counts:
    if not only:
        return store.counts(name)
    status = store.status(name)
    return Counts.of(status[only.mask(status.shape, store.slice_index()[name])])


def _names(store: Store, only: Slice | None) -> list[str]:
    """The store's experiments in the slice ``only`` (checked: a value matching nothing is bad
    input)."""
    if not only:
        return store.experiments()
    index = store.slice_index()
    only.check(index)
    return only.experiments(index)


def _fit_options(n_resamples: int) -> dict[str, Any]:
    """The settings the report's rate fits run with, passed explicitly (the Methods section
    states them: :func:`_methods`)."""
    return {"tolerance": DEFAULT.tolerance, "level": DEFAULT.level, "n_resamples": n_resamples,
            "cap_fraction": DEFAULT.cap_fraction, "floor_factor": DEFAULT.floor_factor,
            "seed": DEFAULT.seed}


def experiment_fits(store: Store, name: str, *, n_resamples: int = DEFAULT.n_resamples,
                    allow_incomplete: bool = False, only: Slice | None = None,
                    ) -> tuple[xr.Dataset, list[RateFit]]:
    """An experiment's cube (the variables the report reads; the slice ``only``) and its
    rate fits, with the report's analysis settings (the Methods section states them)."""
    ds = _open_slice(store, name, only)
    fits = fit_rates(ds, allow_incomplete=allow_incomplete, **_fit_options(n_resamples))
    return ds, fits


def expectation_checks(store: Store, name: str, ds: xr.Dataset, fits: Sequence[RateFit], *,
                       n_resamples: int = DEFAULT.n_resamples, allow_incomplete: bool = False,
                       only: Slice | None = None) -> list[ExpectationCheck]:
    """An experiment's declared expectations checked: those naming another cube variable
    (``variable:``, e.g. ``population_excess_risk`` or ``func_queries``) get fits of that variable
    along their axes, with the report's analysis settings."""
    declared = ds.attrs.get("expectations", [])
    if only:  # the expectations about the slice's algorithms and problems
        present = ({str(v) for v in ds.algorithm.values}, {str(v) for v in ds.problem.values})
        declared = [e for e in declared
                    if str(e["algorithm"]) in present[0] and str(e["problem"]) in present[1]]
    extra: list[RateFit] = []
    wanted = sorted({str(e.get("variable", "excess_risk")) for e in declared} - {"excess_risk"})
    if wanted:
        stored = set(store.root[name].array_keys())
        for var in (v for v in wanted if v in stored):
            sub = _open_slice(store, name, only, (*REPORT_VARIABLES, var))
            axes = sorted({str(e["axis"]) for e in declared
                           if str(e.get("variable", "excess_risk")) == var})
            extra += fit_rates(sub, axes=axes, variable=var, allow_incomplete=allow_incomplete,
                               **_fit_options(n_resamples))
    return check_expectations([*fits, *extra], declared, name)


def store_expectations(store: Store, *, n_resamples: int = DEFAULT.n_resamples,
                       allow_incomplete: bool = False,
                       only: Slice | None = None) -> list[ExpectationCheck]:
    """Every experiment's declared expected rates checked against its fits (``dpbench check``);
    with a slice ``only``, those about its slice."""
    names = _names(store, only)
    if not allow_incomplete:
        _check_complete(store, names, only)
    out: list[ExpectationCheck] = []
    for name in names:
        ds, fits = experiment_fits(store, name, n_resamples=n_resamples,
                                   allow_incomplete=allow_incomplete, only=only)
        out.extend(expectation_checks(store, name, ds, fits, n_resamples=n_resamples,
                                      allow_incomplete=allow_incomplete, only=only))
    return out


def experiment_section(store: Store, name: str, *, n_resamples: int = DEFAULT.n_resamples,
                       allow_incomplete: bool = False,
                       only: Slice | None = None) -> ExperimentSection:
    """Everything the report shows about one experiment (fits, figures, comparisons, cells, the
    privacy spent; of the slice ``only``)."""
    ds, fits = experiment_fits(store, name, n_resamples=n_resamples,
                               allow_incomplete=allow_incomplete, only=only)
    found = analyse(ds, fits, n_resamples=n_resamples)
    expectations = expectation_checks(store, name, ds, fits, n_resamples=n_resamples,
                                      allow_incomplete=allow_incomplete, only=only)
    cards, refs = _cards(ds)
    carded = {c.label for c in cards}
    counts = _counts(store, name, only)
    sec = ExperimentSection(
        name=name, description=str(ds.attrs.get("description", "")).strip(),
        shape=_shape_text(ds), normalisation=str(ds.attrs.get("normalisation", "")),
        counts=counts, problems=_problems(ds), cards=cards, references=refs,
        rows=[FitRow(f, _exponent(ds, f.algorithm, f.axis)) for f in fits if f.algorithm in carded],
        n_comparisons=len(found.comparisons),
        pairs=_pair_summaries(found.comparisons, found.axes),
        significant=[c for c in found.comparisons if c.better],
        crossovers=found.crossovers, collapse=found.collapse, convergence=found.convergence,
        cells=_cell_groups(ds), missing=_missing(name, counts, fits), privacy=found.privacy,
        expectations=expectations)
    panels, sec.figure_notes = _panels(ds, fits, found.axes)
    sec.figures = [_figure_entry(p) for p in panels]
    overlays, sec.overlay_notes = overlay_panels(ds, fits, level=DEFAULT.level)
    sec.overlays = [_figure_entry(p, f"overlay-{name}-{p.problem}") for p in overlays]
    costs, sec.cost_notes = cost_panels(ds)
    sec.costs = [_figure_entry(p, f"cost-{name}-{p.axis}") for p in costs]
    sec.leaders = problem_leaders(ds)
    return sec


def _check_complete(store: Store, names: Sequence[str] | None = None,
                    only: Slice | None = None) -> None:
    """UserInputError naming the incomplete experiments (the report needs complete cubes; with
    a slice ``only``, complete slices)."""
    bad = []
    for name in store.experiments() if names is None else names:
        c = _counts(store, name, only)
        if c.pending or c.failed:
            bad.append(f"{name}: {c.pending} pending, {c.failed} failed of {c.total} cells")
    if bad:
        raise UserInputError(
            f"store {str(store.path)!r} is incomplete ({'; '.join(bad)}); resume the run "
            "(dpbench run resumes and retries failed cells) or pass --allow-incomplete "
            "(allow_incomplete=True) to report the done cells and list what is missing")


# --- provenance -------------------------------------------------------------------------------

def _environments(store: Store) -> list[dict[str, Any]]:
    """Package versions and machine recorded per experiment, identical records merged."""
    out: list[dict[str, Any]] = []
    for name in store.experiments():
        attrs = store.root[name].attrs
        rec = {"packages": dict(attrs.get("packages", {})),
               "machine": dict(attrs.get("machine", {}))}
        for env in out:
            if env["packages"] == rec["packages"] and env["machine"] == rec["machine"]:
                env["experiments"].append(name)
                break
        else:
            out.append({**rec, "experiments": [name]})
    return out


def built_with(store: Store, meta: dict[str, Any], only: Slice | None = None,
               ) -> dict[str, Any]:
    """What a report was built with, machine-readable (rendered into both pages, read back by
    :func:`read_built_with`): the analysis version, the suite's source and hash, and the version
    of every mechanism and problem (by registered name) of the experiments and audits it shows
    (of the slice ``only``). A committed report whose record differs from the code is
    stale."""
    from ..audit.store import audit_names, group_path

    algorithms: dict[str, str] = {}
    problems: dict[str, str] = {}
    groups = []
    for name in _names(store, only):
        ds = _open_slice(store, name, only, ("status",))
        shown = ({str(v) for v in ds.algorithm.values}, {str(v) for v in ds.problem.values})
        groups.append((store.root[name].attrs, shown))
    if not only:
        groups += [(store.root[group_path(name)].attrs, None) for name in audit_names(store)]
    for attrs, shown in groups:
        for label, info in (attrs.get("algorithms") or {}).items():
            if shown is None or label in shown[0]:
                algorithms[str(info.get("algorithm"))] = str(info.get("version"))
        for label, info in (attrs.get("problems") or {}).items():
            if shown is None or label in shown[1]:
                problems[str(info.get("problem"))] = str(info.get("version"))
    return {"analysis": ANALYSIS_VERSION, "suite_source": str(meta.get("suite_source", "")),
            "suite_hash": str(meta.get("suite_hash", "")),
            "algorithms": dict(sorted(algorithms.items())),
            "problems": dict(sorted(problems.items()))}


#: The marker of the built-with record in a report's pages (an HTML comment in both).
BUILT_WITH_MARK = "dpbench-built-with:"


def built_with_comment(record: dict[str, Any]) -> str:
    """The record as one HTML comment line (valid in the HTML page and the Markdown summary)."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=True).replace("--", "-\u002d")
    return f"<!-- {BUILT_WITH_MARK} {text} -->"


def read_built_with(text: str) -> dict[str, Any] | None:
    """The built-with record of a report page's text, or ``None`` when it has none."""
    start = text.find(f"<!-- {BUILT_WITH_MARK} ")
    if start < 0:
        return None
    end = text.find(" -->", start)
    body = text[start + len(f"<!-- {BUILT_WITH_MARK} "):end]
    record = json.loads(body)
    return record if isinstance(record, dict) else None


def _provenance(store: Store, only: Slice | None = None) -> dict[str, Any]:
    meta = dict(store.root.attrs[ROOT_KEY])
    return {
        "built_with": built_with(store, meta, only),
        "suite_name": str(meta.get("suite_name", store.path.stem)),
        "suite_source": str(meta.get("suite_source", "")),
        "suite_hash": str(meta.get("suite_hash", "")),
        "suite_yaml": str(meta.get("suite_yaml", "")),
        "root_seed": meta.get("root_seed", ""),
        "created_utc": str(meta.get("created_utc", "")),
        "store_version": str(meta.get("dpbench_version", "")),
        "report_version": __version__,
        "store_path": str(store.path),
        "runs": list(meta.get("runs", [])),
        "environments": _environments(store),
    }


def _methods(n_resamples: int) -> dict[str, Any]:
    """The settings the Methods section states (those the report ran with)."""
    return {"n_resamples": n_resamples, "level": DEFAULT.level, "tolerance": DEFAULT.tolerance,
            "min_points": DEFAULT.min_points, "cap_fraction": DEFAULT.cap_fraction,
            "floor_factor": DEFAULT.floor_factor, "alpha": DEFAULT.alpha,
            "collapse_tolerance": DEFAULT.collapse_tolerance, "max_combos": DEFAULT.max_combos,
            "seed": DEFAULT.seed, "verdicts": VERDICT_TEXT}


# --- rendering --------------------------------------------------------------------------------

def md_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell (pipes escaped, one line)."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _section_template(name: str) -> tuple[str, None, Callable[[], bool]] | None:
    """A registered section's template source; looked up in the registry when loaded (and stale
    once the registry changes), so the cached environment serves the sections registered now."""
    source = sections.templates().get(name)
    if source is None:
        return None
    return source, None, lambda: sections.templates().get(name) == source


@functools.cache
def environment() -> Environment:
    """The jinja2 environment of the report templates (autoescaped HTML, strict undefined): the
    pages from ``dpbench/templates``, the sections' fragments from :mod:`dpbench.report.sections`."""
    # select_autoescape matches name endings: "report.html.j2" needs "html.j2" to be escaped
    escaped = ("html", "htm", "xml", "html.j2")
    loader = ChoiceLoader([PackageLoader("dpbench", "templates"),
                           FunctionLoader(_section_template)])
    env = Environment(loader=loader,
                      autoescape=select_autoescape(enabled_extensions=escaped),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters.update(num=num, slope=slope_text, estimate=estimate_text, expect_summary=summary_line,
                       fixed=fixed_text, sym=axis_symbol, md=md_cell, duration=duration_text,
                       built_with=built_with_comment)
    return env


#: A name from a store may become a file name only if it is a plain identifier.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
             *(f"lpt{i}" for i in range(10))}


def safe_file_stem(name: Any, fallback: str = "report") -> str:
    """``name`` if it is a plain file stem (letters, digits, ``_ . -``; no separator, no leading
    dot, not a device name, at most 100 characters), else ``fallback``. Names read from a store
    (shared, downloaded, editable) pass through this before they become paths."""
    text = name if isinstance(name, str) else ""
    ok = (_SAFE_NAME.fullmatch(text) is not None and ".." not in text
          and text.split(".")[0].lower() not in _RESERVED)
    return text if ok else fallback


def default_output(store: Store, only: Slice | None = None) -> Path:
    """``reports/<suite name>.html`` for a store (relative to the working directory); the suite
    name read from the store is used only if it is a safe file stem (:func:`safe_file_stem`),
    else the store directory's name, else ``report``. The report of a slice (``--only``) is
    ``reports/<suite name>.only-<values>.html``, never the whole store's file."""
    meta = dict(store.root.attrs[ROOT_KEY])
    stem = safe_file_stem(meta.get("suite_name"),
                          safe_file_stem(store.path.resolve().name.removesuffix(".zarr")))
    if only:
        values = re.sub(r"[^A-Za-z0-9_-]+", "_", only.describe())[:60]
        stem = safe_file_stem(f"{stem}.only-{values}", f"{stem}.only")
    return Path("reports") / f"{stem}.html"


#: What the first 2 KiB of a file dpbench wrote hold (the HTML generator tag, the Markdown title).
_MARKERS = ('<meta name="generator" content="dpbench', "# dpbench report:")


def _ours(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(2048)
    except OSError:
        return False
    return any(m in head for m in _MARKERS)


def check_output(html_path: Path, overwrite: bool = False, option: str = "--output") -> None:
    """Refuse (exit 2) to replace a file that dpbench did not write, unless ``overwrite``, and
    to write into a directory on a read-only or full file system (``option`` names the field)."""
    for path in (html_path, html_path.with_suffix(".md")):
        if path.is_dir():
            raise UserInputError(f"report output {str(path)!r} is a directory")
        if path.exists() and not overwrite and not _ours(path):
            raise UserInputError(
                f"report output {str(path)!r} exists and was not written by dpbench; choose "
                "another --output, or pass --overwrite to replace it")
    check_writable(html_path, option)


def report_context(store: Store, *, n_resamples: int = DEFAULT.n_resamples,
                   allow_incomplete: bool = False,
                   only: Slice | None = None) -> dict[str, Any]:
    """Everything the templates show, computed from the store (see :func:`build_report`): the
    entries shared by the page and its sections, then what each registered section adds. With
    a slice ``only``, the report is of that slice and says so under its title."""
    names = _names(store, only)
    if not allow_incomplete:
        _check_complete(store, names, only)
    experiments = [experiment_section(store, name, n_resamples=n_resamples,
                                      allow_incomplete=allow_incomplete, only=only)
                   for name in names]
    prov = _provenance(store, only)
    prov["slice"] = only.describe() if only else ""
    shared = {
        "prov": prov,
        "experiments": experiments,
        "checks": [c for e in experiments for c in e.expectations],
        "methods": _methods(n_resamples),
    }
    added: dict[str, Any] = {}
    for section in sections.SECTIONS:
        if section.context is not None:
            added.update(section.context(store, shared))
    return {**shared, **added}


def render_report(context: dict[str, Any], output_html: str | Path, *,
                  overwrite: bool = False, option: str = "--output") -> tuple[Path, Path]:
    """Render the HTML report and its Markdown summary (same stem, ``.md``) from a context.

    A file at either path that dpbench did not write is refused unless ``overwrite``. Both files
    are written to temporary files beside them and then renamed into place, so a disk that
    fills up (or any other write error) leaves neither a partial report nor a changed one: a
    disk error is a :class:`UserInputError` naming ``option``."""
    env = environment()
    html_path, md_path = page_paths(output_html, overwrite, option)
    registered = sections.SECTIONS
    texts = [(html_path, env.get_template("report.html.j2").render(**context,
                                                                   sections=registered)),
             (md_path, env.get_template("report.md.j2").render(**context, sections=registered))]
    write_pages(texts, option)
    return html_path, md_path


def write_pages(texts: Sequence[tuple[Path, str]], option: str = "--output") -> None:
    """Write the pages ``(path, text)`` of a report or a diff all or nothing
    (:func:`~dpbench.store.writable.write_all_or_nothing`)."""
    write_all_or_nothing([(path, lambda tmp, text=text: tmp.write_text(
        text, encoding="utf-8", newline="\n")) for path, text in texts], option)


def page_paths(output_html: str | Path, overwrite: bool, option: str) -> tuple[Path, Path]:
    """The HTML page and its Markdown summary (same stem) for ``output_html``, refused (exit 2)
    when it names the Markdown file or a file dpbench did not write (unless ``overwrite``)."""
    html_path = Path(output_html)
    if html_path.suffix.lower() == ".md":
        raise UserInputError(f"{option} {str(html_path)!r} must be the HTML file (.html); the "
                             "Markdown summary is written next to it")
    check_output(html_path, overwrite, option)
    return html_path, html_path.with_suffix(".md")


def build_report(store: str | os.PathLike[str], output_html: str | Path, *,
                 n_resamples: int = DEFAULT.n_resamples,
                 allow_incomplete: bool = False, overwrite: bool = False) -> tuple[Path, Path]:
    """Write the HTML report of the store at path ``store`` and its Markdown summary.

    The HTML is one self-contained file (inline CSS, figures as base64 PNG ``data:`` URIs); the
    Markdown (same stem, ``.md``) holds the provenance, rate-card tables, comparisons and cell
    summary. Raises :class:`~dpbench.core.errors.StoreError` for a path that is not a dpbench store
    and :class:`~dpbench.core.errors.UserInputError` for a store with pending or failed cells unless
    ``allow_incomplete`` (then the report states what is missing). Deterministic: the same
    store gives the same bytes. A file at the output paths that dpbench did not write is refused
    unless ``overwrite``. Returns (html path, markdown path).
    """
    check_output(Path(output_html), overwrite)
    context = report_context(Store.open(store), n_resamples=n_resamples,
                             allow_incomplete=allow_incomplete)
    return render_report(context, output_html, overwrite=overwrite)
