"""The report's overview: the summary table at the top of both outputs, every mechanism of a
problem on one figure, the cost figures against n and p; a store with pending cells and axes with
a single value render with notes instead of figures."""

from __future__ import annotations

import base64
import io
import shutil
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr
from PIL import Image

from dpbench.analysis import fit_rates
from dpbench.config.suite import parse_suite
from dpbench.core.schema import DONE, PENDING
from dpbench.engine.runner import run_suite
from dpbench.report import build_report, render_report, report_context
from dpbench.report.build import experiment_fits
from dpbench.report.overview import cost_panels, overlay_panels, problem_leaders
from dpbench.store.cube import Store
from tests.integration.test_report import parse
from tests.support.cubes import open_cube

N_RESAMPLES = 200
# Cheap cells only (the paper's closed-form σ, n ≤ 32). "duo": two NoisySGD variants next to the
# non-private reference on LB-Quad (both drawn), and on LB-Lin where the strongly convex variant
# is not applicable (one line: no overlay); n and p swept, so cost figures against both. "pure":
# output perturbation and the exponential mechanism (loss evaluations, no gradient queries), p a
# single value (no cost figure against p).
SUITE = """
name: overview
root_seed: 5
seeds: 4
experiments:
  - name: duo
    problems:
      - problem: lb_quad
      - problem: lb_lin
    algorithms:
      - label: nonprivate
        algorithm: nonprivate_erm
      - label: sgd
        algorithm: noisy_sgd
        params: {sigma_mode: paper}
      - label: sgd_sc
        algorithm: noisy_sgd
        params: {variant: strongly_convex, sigma_mode: paper}
    grid:
      n: [8, 16, 32]
      p: [2, 3]
      epsilon: [1.0]
      delta: [1e-5]
    expect:
      - {id: SGD-n, algorithm: sgd, problem: lb_quad, axis: n, slope: -1, source: test}
      - {id: SC-n, algorithm: sgd_sc, problem: lb_quad, axis: n, slope: -2, source: test}
  - name: pure
    problems:
      - problem: lb_quad
    algorithms:
      - label: outpert
        algorithm: output_perturbation
      - label: exp_mech
        algorithm: exp_mech
    grid:
      n: [8, 16]
      p: [2]
      epsilon: [1.0]
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("overview") / "cube.zarr"
    summary = run_suite(parse_suite(textwrap.dedent(SUITE), "overview.yaml"), path, workers=0,
                        progress=False)
    assert summary.complete
    return path


@pytest.fixture(scope="module")
def context(store: Path) -> dict[str, Any]:
    return report_context(Store.open(store), n_resamples=N_RESAMPLES)


@pytest.fixture(scope="module")
def report(context: dict[str, Any], store: Path) -> tuple[str, str]:
    html, md = render_report(context, store.parent / "out" / "overview.html")
    return html.read_text(encoding="utf-8"), md.read_text(encoding="utf-8")


def _experiment(context: dict[str, Any], name: str) -> Any:
    return next(e for e in context["experiments"] if e.name == name)


def _png_size(uri: str) -> tuple[int, int]:
    png = base64.b64decode(uri.removeprefix("data:image/png;base64,"), validate=True)
    with Image.open(io.BytesIO(png)) as img:
        return img.size


def _legend(fig: Any) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text() for lg in legends for t in lg.get_texts()]


def test_overlay_figure_per_problem(store: Path, context: dict[str, Any],
                                    report: tuple[str, str]) -> None:
    """One figure per problem with two or more mechanisms to draw; each mechanism named in the
    legend, the caption and the alt text; a note where a single line would be drawn."""
    html = report[0]
    figures = {f.id: f for f in parse(html).figures}
    duo, pure = _experiment(context, "duo"), _experiment(context, "pure")
    assert [f.anchor for f in duo.overlays] == ["overlay-duo-lb_quad"]
    assert [f.anchor for f in pure.overlays] == ["overlay-pure-lb_quad"]
    assert duo.overlay_notes == ["lb_lin: only sgd can be drawn (nonprivate: mean excess ≤ 0 or "
                                 "below the optimisation floor (round-off of the certified "
                                 "optimum) at every point); no comparison to draw."]
    for entry, labels in ((duo.overlays[0], ("sgd", "sgd_sc")),
                          (pure.overlays[0], ("outpert", "exp_mech"))):
        caption = " ".join(figures[entry.anchor].caption.split())
        assert all(label in entry.alt and label in caption for label in labels)
        assert "95% percentile-bootstrap CI of the mean" in caption and "against n" in caption
        assert (entry.width, entry.height) == _png_size(entry.uri) == (720, 420)
    assert "Not drawn: nonprivate (mean excess ≤ 0" in " ".join(figures["overlay-duo-lb_quad"]
                                                                 .caption.split())
    # the legend of the drawing names every mechanism of the problem, drawn or not
    ds, fits = experiment_fits(Store.open(store), "duo", n_resamples=N_RESAMPLES)
    panels, _ = overlay_panels(ds, fits, level=0.95)
    assert _legend(panels[0].figure()) == ["sgd", "sgd_sc", "nonprivate (not drawn)",
                                           "95% CI of the mean"]


def test_cost_figures(context: dict[str, Any], report: tuple[str, str]) -> None:
    """Wall time and gradient queries against n and p; loss evaluations only where counted; an
    axis with a single value and an uncounted variable leave a note, not a figure."""
    html = report[0]
    figures = {f.id: f for f in parse(html).figures}
    duo, pure = _experiment(context, "duo"), _experiment(context, "pure")
    assert [f.anchor for f in duo.costs] == ["cost-duo-n", "cost-duo-p"]
    assert [f.anchor for f in pure.costs] == ["cost-pure-n"]
    assert pure.cost_notes == ["p has a single value (2): no cost figure against it.",
                               "No panel for grad_queries: no mechanism records a positive value."]
    assert duo.cost_notes == []
    for entry in (*duo.costs, *pure.costs):
        assert entry.anchor in figures
        assert _png_size(entry.uri) == (entry.width, entry.height)
        caption = " ".join(figures[entry.anchor].caption.split())
        assert ("wall time per cell (s, this machine) (wall_time_s: seconds of the mechanism's "
                "run") in caption
        assert "wall_time_s is measured on the machine that ran each cell" in caption
        assert "not deterministic" in caption
    duo_n = " ".join(figures["cost-duo-n"].caption.split())
    assert "gradient queries per cell (grad_queries" in duo_n and "loss evaluations" not in duo_n
    # equal step counts: the two NoisySGD variants make the same number of gradient queries
    assert "the lines of sgd and sgd_sc coincide" in duo_n
    assert "Not drawn in gradient queries per cell (mean 0 or not recorded at every point): " \
           "nonprivate." in duo_n
    pure_n = " ".join(figures["cost-pure-n"].caption.split())
    assert "loss evaluations per cell (func_queries" in pure_n and "gradient" not in pure_n
    assert "cost-pure-p" not in figures and "p has a single value (2)" in html


def _mean(ds: xr.Dataset, var: str, **sel: Any) -> float:
    sub = ds.sel(sel)
    return float(sub[var].where(sub.status == DONE).mean())


def test_summary_block(store: Path, context: dict[str, Any], report: tuple[str, str]) -> None:
    """At the top of both outputs, one row per problem: the experiment's cell counts and
    expected-rate outcomes, the lowest mean excess at the largest n and the fastest mechanism (median
    wall time),
    among the private mechanisms."""
    html, md = report
    assert html.index('<section id="summary">') < html.index("<h2>Provenance</h2>")
    assert md.index("\n## Summary\n") < md.index("\n## Runs\n")
    checks = [c for c in context["checks"] if c.experiment == "duo"]
    outcome = [sum(c.outcome == o for c in checks) for o in ("agrees", "disagrees", "inconclusive")]
    assert sum(outcome) == len(checks) == 4       # two declarations, each at p = 2 and p = 3
    counts = Store.open(store).counts("duo")
    assert (counts.done, counts.failed, counts.pending) == (120, 0, 0)
    ds = open_cube(store, "duo")
    best = min(("sgd", "sgd_sc"), key=lambda a: _mean(ds, "excess_risk", algorithm=a,
                                                       problem="lb_quad", n=32, p=2))
    fastest = min(("sgd", "sgd_sc"), key=lambda a: float(
        ds.sel(algorithm=a, problem="lb_quad").wall_time_s.where(
            ds.sel(algorithm=a, problem="lb_quad").status == DONE).median()))
    rows = [line for line in md.splitlines() if line.startswith("| duo |")]
    assert len(rows) == 1
    assert rows[0].startswith(f"| duo | 120 / 0 / 0 | {outcome[0]} / {outcome[1]} / {outcome[2]} "
                              f"| lb_quad | **{best}** ")
    assert f"at n=32, p=2 | **{fastest}** " in rows[0]
    # LB-Lin: sgd is the only private mechanism applicable; the second row leaves the
    # experiment's cells blank
    assert any(line.startswith("|  |  |  | lb_lin | **sgd** ") for line in md.splitlines())
    assert "| pure | 16 / 0 / 0 | — | lb_quad | " in md
    assert '<td class="num" rowspan="2">120 / 0 / 0</td>' in html


def test_pending_cells_still_render(store: Path, tmp_path: Path) -> None:
    """With the largest n of one mechanism pending and a whole experiment pending, the report
    renders (allow_incomplete): figures from the done cells, notes and dashes for the rest."""
    copy = tmp_path / "partial.zarr"
    shutil.copytree(store, copy)
    root = zarr.open_group(str(copy), mode="r+")
    status = root["duo"]["status"]
    status[1, 0, 2, 0, 0, 0, :] = np.full(4, PENDING, dtype=np.uint8)  # sgd, lb_quad, n=32, p=2
    pure = root["pure"]["status"]
    pure[...] = np.full(pure.shape, PENDING, dtype=np.uint8)
    html_path, md_path = build_report(copy, tmp_path / "partial.html", allow_incomplete=True,
                                      n_resamples=N_RESAMPLES)
    html, md = html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")
    ids = {f.id for f in parse(html).figures}
    assert {"overlay-duo-lb_quad", "cost-duo-n", "cost-duo-p"} <= ids
    assert not any(i.startswith(("overlay-pure", "cost-pure")) for i in ids)
    assert "| duo | 116 / 0 / 4 |" in md
    # sgd has no done cell at n=32, p=2: only sgd_sc is ranked there
    assert any(line.startswith("| duo |") and "| lb_quad | **sgd_sc** " in line
               for line in md.splitlines())
    assert "| pure | 0 / 0 / 16 | — | lb_quad | — | — |" in md
    assert ("lb_quad: no mechanism can be drawn (outpert: no done cell yet; exp_mech: no done "
            "cell yet); no comparison to draw.") in html
    assert "n: no done cell records a cost yet." in html
    assert "At the largest value with data, lowest mean first:" in html


def test_axes_with_a_single_value(store: Path) -> None:
    """A cube whose swept axes are cut to one value: no overlay and no cost figure, a note each;
    the summary's leaders are still computed."""
    ds = open_cube(store, "duo")
    one_n = ds.isel(n=[0])
    panels, notes = cost_panels(one_n)
    assert [p.axis for p in panels] == ["p"] and notes == [
        "n has a single value (8): no cost figure against it."]
    flat = ds.isel(n=[0], p=[0])
    fits = fit_rates(flat, n_resamples=N_RESAMPLES)
    assert fits == []
    assert overlay_panels(flat, fits, level=0.95) == (
        [], ["No grid axis has two or more values: there is no axis to compare along."])
    assert cost_panels(flat) == ([], ["n has a single value (8): no cost figure against it.",
                                      "p has a single value (2): no cost figure against it."])
    leaders = problem_leaders(flat)
    assert [(lead.problem, lead.best.where if lead.best else None) for lead in leaders] == [
        ("lb_quad", "n=8"), ("lb_lin", "n=8")]


def test_a_mean_wall_time_dominated_by_a_few_cells_is_flagged(store: Path) -> None:
    """One slow cell (as when a worker compiles a kernel on its first call) is named in the
    caption; the query counts, which are counted rather than measured, are never flagged."""
    ds = open_cube(store, "duo")
    ds["wall_time_s"][...] = 1e-3       # measured times vary between runs: set them
    ds["wall_time_s"].loc[{"algorithm": "sgd", "problem": "lb_quad", "n": 8, "p": 2,
                           "seed": 0}] = 1.0
    panel = next(p for p in cost_panels(ds)[0] if p.axis == "n")
    wall, grad = panel.metrics
    assert wall.variable == "wall_time_s" and [s.split(" (")[0] for s in wall.skewed] == [
        "sgd at n=8"]
    assert grad.skewed == []
    assert any("a few slow cells dominate the mean" in line and "sgd at n=8" in line
               for line in panel.caption())
