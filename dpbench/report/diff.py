"""The diff of two stores (``dpbench diff A B``): opening both, and its HTML report with a
Markdown summary next to it.

The statistics are :mod:`dpbench.analysis.diff`; this module reads the stores (the experiments
both hold, the variables the diff needs: the ``diff`` role of :mod:`dpbench.core.schema`), states
their provenance, and renders ``diff.html.j2`` / ``diff.md.j2`` with the main report's jinja
environment, filters and
style sheet (read from ``report.html.j2``, so the two pages never drift apart). Deterministic:
the same two stores give the same bytes.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import xarray as xr
from jinja2 import Environment
from markupsafe import Markup

from .._version import __version__
from ..analysis.diff import VERDICT_TEXT, StoreDiff, UnpairableStores, diff_cubes
from ..analysis.settings import DEFAULT
from ..config.slice import Slice
from ..core.schema import DIFF_VARIABLES
from ..store.cube import ROOT_KEY, Store
from .build import environment, page_paths, write_pages
from .figures import axis_symbol

def _cube(store: Store, name: str, only: Slice | None = None) -> xr.Dataset:
    return store.cube(name, DIFF_VARIABLES,
                      only.positions(store.slice_index()[name]) if only else None)


def _provenance(store: Store) -> dict[str, Any]:
    meta = dict(store.root.attrs[ROOT_KEY])
    versions = sorted({str(store.root[name].attrs.get("packages", {}).get("dpbench", ""))
                       for name in store.experiments()} - {""})
    return {"path": str(store.path), "suite_name": str(meta.get("suite_name", "")),
            "suite_hash": str(meta.get("suite_hash", "")), "root_seed": meta.get("root_seed", ""),
            "created_utc": str(meta.get("created_utc", "")),
            "store_version": str(meta.get("dpbench_version", "")),
            "run_versions": ", ".join(versions), "experiments": store.experiments()}


def diff_stores(store_a: str | os.PathLike[str], store_b: str | os.PathLike[str], *,
                alpha: float, min_change: float,
                n_resamples: int = DEFAULT.n_resamples, only: Slice | None = None,
                ) -> tuple[StoreDiff, dict[str, Any]]:
    """Diff the store at path ``store_b`` against the one at ``store_a`` (the slice ``only``,
    checked against A): the diff and both stores' provenance.

    Raises :class:`~dpbench.core.errors.StoreError` for a path that is not a dpbench store and
    :class:`~dpbench.analysis.diff.UnpairableStores` when the stores' cells do not share their
    data (different root seeds or problem definitions) or no cell is done in both."""
    a, b = Store.open(store_a), Store.open(store_b)
    prov = {"a": _provenance(a), "b": _provenance(b)}
    names_a, names_b = a.experiments(), b.experiments()
    if only:
        only.check(a.slice_index())
        names_a, names_b = only.experiments(names_a), [
            n for n in names_b if only.experiment is None or n in only.experiment]
    common = [n for n in names_a if n in names_b]
    seeds = (prov["a"]["root_seed"], prov["b"]["root_seed"])
    if seeds[0] != seeds[1]:
        raise UnpairableStores(f"the stores' cells cannot be paired: root seed {seeds[0]} (A) vs "
                               f"{seeds[1]} (B); their datasets differ")
    if not common:
        raise UnpairableStores(f"the stores have no experiment in common (A: "
                               f"{', '.join(names_a) or 'none'}; B: {', '.join(names_b) or 'none'})")
    pairs = {name: (_cube(a, name, only), _cube(b, name, only))
             for name in common}
    result = diff_cubes(pairs, experiments_only_a=[n for n in names_a if n not in common],
                        experiments_only_b=[n for n in names_b if n not in common],
                        alpha=alpha, min_change=min_change, n_resamples=n_resamples)
    return result, prov


# --- rendering ----------------------------------------------------------------------------------

def pct(value: float, digits: int = 1) -> str:
    """A relative change as a signed percentage ("0%" exactly when it is 0, "—" when missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value == 0:
        return "0%"
    if math.isinf(value):
        return "+∞" if value > 0 else "−∞"
    return f"{value * 100:+.{digits}f}%"


def pct_ci(low: float, high: float) -> str:
    """"[low, high]" in percent ("" when the interval is unbounded or undefined)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f"[{pct(low)},\u00a0{pct(high)}]"


def percent(value: float) -> str:
    """A fraction as an unsigned percentage (0.05 -> "5%")."""
    return f"{value * 100:g}%"


def value_text(value: Any) -> str:
    """A listed coordinate value ("1", "0.5", "lb_quad")."""
    return f"{value:g}" if isinstance(value, float) else str(value)


_STYLE = re.compile(r"<style>.*?</style>", re.S)
#: The report's verdict badge (its CSS class suffix) each diff verdict wears.
VERDICT_CLASS = {"regression": "slower", "improvement": "faster",
                 "below min-change": "inconclusive", "not significant": "consistent",
                 "no signal": "inconclusive"}


def report_style(env: Environment) -> Markup:
    """The ``<style>`` element of the main report's page (``report.html.j2``): one style sheet for
    both pages."""
    assert env.loader is not None
    source = env.loader.get_source(env, "report.html.j2")[0]
    match = _STYLE.search(source)
    if match is None:  # the main template lost its style sheet: a packaging bug
        raise RuntimeError("report.html.j2 has no <style> element to share with diff.html.j2")
    return Markup(match.group(0))


def diff_environment() -> Environment:
    """The report's jinja environment with the diff's filters added (an overlay: the report's own
    environment is left as it is)."""
    env = environment().overlay()
    env.filters.update(pct=pct, pct_ci=pct_ci, percent=percent, value=value_text)
    return env


def unmatched_lines(result: StoreDiff) -> list[str]:
    """What only one store has (experiments, labels, grid values, seeds) and the cells in both
    stores' coordinates not done in both: listed, never compared."""
    out = []
    if result.experiments_only_a:
        out.append(f"experiments only in A: {', '.join(result.experiments_only_a)}")
    if result.experiments_only_b:
        out.append(f"experiments only in B: {', '.join(result.experiments_only_b)}")
    for e in result.experiments:
        if e.note:
            out.append(f"{e.name}: not compared ({e.note})")
        for side, only in (("A", e.only_a), ("B", e.only_b)):
            for dim, values in only.items():
                out.append(f"{e.name}: {axis_symbol(dim)} only in {side}: "
                           + ", ".join(value_text(v) for v in values))
        if e.unpaired_cells:
            out.append(f"{e.name}: {e.unpaired_cells} cell(s) in both stores' coordinates but "
                       "not done in both")
    return out


def diff_context(result: StoreDiff, prov: dict[str, Any]) -> dict[str, Any]:
    """Everything the diff's templates show."""
    return {"result": result, "prov": prov, "version": __version__, "verdicts": VERDICT_TEXT,
            "verdict_class": VERDICT_CLASS, "floor_factor": DEFAULT.floor_factor,
            "unmatched": unmatched_lines(result),
            "tested": [f for f in result.families if math.isfinite(f.p_value)]}


def render_diff(context: dict[str, Any], output_html: str | Path, *, overwrite: bool = False,
                option: str = "--output") -> tuple[Path, Path]:
    """Write the diff's HTML page and its Markdown summary (same stem, ``.md``).

    As :func:`dpbench.report.build.render_report`: a file at either path that dpbench did not
    write is refused unless ``overwrite`` (:func:`check_output`), and both files are written
    beside their targets and renamed into place, so an error leaves neither a partial file nor a
    changed one (a disk error becomes a :class:`UserInputError` naming ``option``)."""
    html_path, md_path = page_paths(output_html, overwrite, option)
    env = diff_environment()
    texts = [(html_path, env.get_template("diff.html.j2").render(
                 **context, style=report_style(env))),
             (md_path, env.get_template("diff.md.j2").render(**context))]
    write_pages(texts, option)
    return html_path, md_path
