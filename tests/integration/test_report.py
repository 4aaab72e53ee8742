"""The HTML report: self-contained, every figure an embedded PNG with a caption, the expected
sections, deterministic bytes, the Markdown summary, and the ``report`` / ``run --report`` CLI."""

from __future__ import annotations

import base64
import io
import re
import shutil
import textwrap
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import zarr

from dpbench.analysis import Comparison, Crossover
from dpbench.cli.main import main
from dpbench.config.suite import parse_suite
from dpbench.core.schema import PENDING
from dpbench.engine.runner import run_suite
from dpbench.report import build_report, render_report, report_context
from dpbench.report import sections as report_sections
from dpbench.report.build import environment
from dpbench.report.sections import Section
from dpbench.store.cube import Store

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SECTIONS = ("provenance", "summary", "rate-cards", "figures", "overlay", "cost", "comparisons",
            "cells", "privacy-spent", "methods")

# Cheap cells only: NoisySGD with the paper's closed-form σ (the RDP accountant's calibration
# costs seconds), output perturbation, and the non-private reference. hinge_svm is merely convex,
# so output perturbation is not applicable to it (status 3 cells for the cells section). Five ε
# values: the n sweep has more fixed combinations than get a figure each.
REPORT_SUITE = """
name: reportsuite
root_seed: 3
seeds: 4
experiments:
  - name: approx
    problems:
      - problem: lb_lin
      - problem: lb_quad
    algorithms:
      - label: nonprivate
        algorithm: nonprivate_erm
      - label: sgd
        algorithm: noisy_sgd
        params: {sigma_mode: paper}
    grid:
      n: [8, 16, 32, 64]
      p: [2]
      epsilon: [1.0]
      delta: [1e-5]
  - name: pure
    seeds: 10
    problems:
      - problem: lb_quad
      - problem: hinge_svm
    algorithms:
      - label: nonprivate
        algorithm: nonprivate_erm
      - label: outpert
        algorithm: output_perturbation
    grid:
      n: [8, 16, 32]
      p: [2]
      epsilon: [0.5, 1.0, 2.0, 4.0, 8.0]
"""


@dataclass
class Figure:
    id: str = ""
    imgs: list[str] = field(default_factory=list)
    caption: str = ""


class ReportParser(HTMLParser):
    """Collects images, figures with their captions, element ids and resource references."""

    def __init__(self) -> None:
        super().__init__()
        self.imgs: list[str] = []
        self.figures: list[Figure] = []
        self.ids: set[str] = set()
        self.refs: list[str] = []
        self.tags: set[str] = set()
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        for key in ("src", "href"):
            if a.get(key):
                self.refs.append(str(a[key]))
        if tag == "figure":
            self.figures.append(Figure(str(a.get("id", ""))))
        elif tag == "img":
            self.imgs.append(str(a.get("src", "")))
            if self.figures:
                self.figures[-1].imgs.append(str(a.get("src", "")))
        elif tag == "figcaption":
            self._in_caption = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data: str) -> None:
        if self._in_caption and self.figures:
            self.figures[-1].caption += data


def parse(html: str) -> ReportParser:
    p = ReportParser()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "cube.zarr"
    suite = parse_suite(textwrap.dedent(REPORT_SUITE), "reportsuite.yaml")
    summary = run_suite(suite, path, workers=0, progress=False)
    assert summary.complete
    return path


@pytest.fixture(scope="module")
def report(store: Path) -> tuple[Path, Path]:
    return build_report(store, store.parent / "out" / "report.html")


def test_single_file_with_embedded_png_figures(report: tuple[Path, Path]) -> None:
    html_path, _ = report
    assert sorted(p.name for p in html_path.parent.iterdir()) == ["report.html", "report.md"]
    p = parse(html_path.read_text(encoding="utf-8"))
    assert len(p.imgs) >= 4
    for src in p.imgs:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        png = base64.b64decode(src[len(prefix):], validate=True)
        assert png.startswith(PNG_SIGNATURE)
        try:
            from PIL import Image
        except ImportError:  # pragma: no cover - PIL is a matplotlib dependency
            import matplotlib.image

            img = matplotlib.image.imread(io.BytesIO(png), format="png")
            assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        else:
            with Image.open(io.BytesIO(png)) as img:
                img.load()
                assert img.format == "PNG" and img.size[0] > 100 and img.size[1] > 100


def test_no_external_resources(report: tuple[Path, Path]) -> None:
    html = report[0].read_text(encoding="utf-8")
    p = parse(html)
    for ref in p.refs:
        assert ref.startswith(("data:", "#")), ref
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html, re.IGNORECASE)
    assert not re.search(r"url\(|@import", html)
    assert "script" not in p.tags and "link" not in p.tags


def test_every_figure_has_one_image_and_a_caption(report: tuple[Path, Path]) -> None:
    p = parse(report[0].read_text(encoding="utf-8"))
    assert p.figures and sum(len(f.imgs) for f in p.figures) == len(p.imgs)
    assert all(len(f.imgs) == 1 and f.id and f.caption.strip() for f in p.figures)
    rate_figures = [f for f in p.figures if f.id.startswith("figure-")]
    for f in rate_figures:
        caption = " ".join(f.caption.split())
        # generated from metadata: the problem, the axis, the normalisation, the slopes
        assert caption.startswith("Figure ")
        assert "Mean excess empirical risk" in caption and "Normalisation: average" in caption
        assert re.search(r"seeds per point", caption)
        assert re.search(r"fitted slope|no fitted slope", caption)
    captions = " ".join(" ".join(f.caption.split()) for f in rate_figures)
    # the non-private reference is not drawn but is named; capped points are explained
    assert "Not drawn: nonprivate" in captions and "non-private reference" in captions
    assert "Excluded: n=" in captions and "capped" in captions
    # the ε sweep of the pure experiment gets figures too; its n sweep, at five ε values, only one
    assert "against ε" in captions
    assert "5 combinations of the other swept axes (ε) exist; only the first value" in captions
    assert len(rate_figures) == 2 + 1 + 3  # approx: lb_lin, lb_quad vs n; pure: vs n, vs ε at 3 n


def test_expected_sections_and_content(report: tuple[Path, Path]) -> None:
    html = report[0].read_text(encoding="utf-8")
    p = parse(html)
    assert set(SECTIONS) <= p.ids
    for text in ("reportsuite", "Suite YAML", "root seed", "Run log", "theory exponent",
                 "fitted slope [CI]", "empirical / bound [CI]", "verdict-inconclusive",
                 "BST14 Thm 2.4(1)", "Paired comparisons", "Crossovers", "Collapse check",
                 "ε-convergence", "Holm", "bootstrap"):
        assert text in html, text
    # the hinge SVM is not applicable to output perturbation: grouped into one row with a count
    assert re.search(r"<td>not applicable</td><td class=\"num\">150</td><td>outpert</td>"
                     r"<td>hinge_svm</td>", html)
    # ten seeds, all better for the reference (exact p = 2/1024, 15 tests): Holm-significant
    assert re.search(r"[1-9]\d* significant at α = 0.05 after Holm", html)


def test_markdown_summary(report: tuple[Path, Path]) -> None:
    html_path, md_path = report
    assert md_path == html_path.with_suffix(".md") and md_path.is_file()
    md = md_path.read_text(encoding="utf-8")
    assert md.startswith("# dpbench report: reportsuite")
    header = "| algorithm | problem | axis | fixed | theory exponent | predicted slope |"
    assert header in md
    cards = md[md.index("\n## Rate cards\n"):]
    cards = cards[:cards.index("\n## ", 1)]
    rows = [line for line in cards.splitlines() if line.startswith("| outpert | lb_quad |")]
    assert len(rows) == 5 + 3        # n at five ε, ε at three n
    assert all(line.count(" | ") == header.count(" | ") + 6 for line in rows)
    assert "not applicable | 150 | outpert | hinge_svm |" in md
    # OutPert on LB-Quad has the closed-form oracle O4 (docs/bst14.md): a finite empirical/oracle ratio
    ratios = [line.split(" | ")[9] for line in rows]
    assert all(r != "—" and 0.2 < float(r) <= 1.5 for r in ratios), ratios


def test_same_cube_same_bytes(store: Path, report: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "again.html"
    assert main(["report", str(store), "--output", str(out)]) == 0
    assert out.read_bytes() == report[0].read_bytes()
    assert out.with_suffix(".md").read_bytes() == report[1].read_bytes()


def test_html_is_autoescaped() -> None:
    env = environment()
    assert env.autoescape("report.html.j2") is True
    assert env.autoescape("report.md.j2") is False


def test_every_section_has_markup_and_a_unique_anchor() -> None:
    env = environment()
    names = [s.name for s in report_sections.SECTIONS]
    assert len(set(names)) == len(names) and "provenance" not in names   # the page header's id
    for s in report_sections.SECTIONS:
        assert s.title and f'id="{s.name}"' in s.html, s.name
        assert env.autoescape(s.html_template) and env.autoescape(s.nav_template), s.name
        assert env.autoescape(s.markdown_template) is False, s.name
    # an empty Markdown fragment leaves a section out of the summary
    assert {s.name for s in report_sections.SECTIONS if not s.markdown} == {
        "figures", "overlay", "cost", "methods"}


DUMMY = Section(
    name="dummy", title="Dummy & co",
    html='<section id="dummy">\n<h2>Dummy of {{ dummy_count }} experiments</h2>\n</section>\n',
    markdown="## Dummy of {{ dummy_count }} experiments\n",
    context=lambda store, shared: {"dummy_count": len(shared["experiments"])})


def test_a_section_is_added_by_registering_it(store: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """One registry entry puts a section's markup, navigation link and data in both outputs, at
    its place in the registry (here between the comparisons and the cells)."""
    registered = report_sections.SECTIONS
    at = [s.name for s in registered].index("cells")
    monkeypatch.setattr(report_sections, "SECTIONS", (*registered[:at], DUMMY, *registered[at:]))
    html_path, md_path = build_report(store, tmp_path / "r.html", n_resamples=200)
    html, md = html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")
    assert ('  <a href="#comparisons">Comparisons</a>\n  <a href="#dummy">Dummy &amp; co</a>\n'
            '  <a href="#cells">') in html
    dummy = html.index('</section>\n\n<section id="dummy">\n<h2>Dummy of 2 experiments</h2>\n'
                       '</section>\n\n<section id="cells">')
    assert html.index('<section id="comparisons">') < dummy
    dummy = md.index("\n\n## Dummy of 2 experiments\n\n## Privacy spent\n")
    assert md.index("\n## Comparisons\n") < dummy


def test_optional_tables_render(store: Path, tmp_path: Path) -> None:
    """Crossover rows (absent from the small cube) render through the strict templates."""
    ctx = report_context(Store.open(store), n_resamples=200)
    exp = ctx["experiments"][0]
    exp.crossovers.append(Crossover("lb_lin", "n", {"p": 2}, "nonprivate", "sgd", 20.0, "sgd"))
    exp.significant.append(Comparison("lb_lin", {"n": 8}, "nonprivate", "sgd", 8, -0.5, 0.004,
                                      0.03, "nonprivate", 0.05))
    html, md = render_report(ctx, tmp_path / "r.html")
    text = html.read_text(encoding="utf-8")
    assert "n ≈ 20" in text and "<strong>nonprivate</strong>" in text
    assert "crossover on lb_lin along n" in md.read_text(encoding="utf-8")


def test_privacy_spent_table_reflects_the_ledgers(store: Path, tmp_path: Path) -> None:
    """Per (algorithm, problem): the grid's nominal ε and δ and the range the ledgers spent over
    the done cells; a done cell planted above its nominal ε is flagged (a run never lets that
    happen), a non-private reference's infinite ε is not."""
    copy = tmp_path / "planted.zarr"
    shutil.copytree(store, copy)
    group = zarr.open_group(str(copy), mode="r+")["approx"]
    eps = group["epsilon_spent"][...]
    eps[1, 1] = 0.25                   # sgd on lb_quad spent 0.25 in every cell ...
    eps[1, 1, 2, 0, 0, 0, 3] = 1.5     # ... but one: n=32, seed 3, above its nominal ε = 1
    group["epsilon_spent"][...] = eps
    html_path, md_path = build_report(copy, tmp_path / "r.html", n_resamples=200)
    md = md_path.read_text(encoding="utf-8")
    spent = md[md.index("\n## Privacy spent\n"):md.index("\n## Failed and not-applicable")]
    approx = spent[spent.index("### approx"):spent.index("### pure")]
    assert ("| algorithm | problem | ε nominal | ε spent | δ nominal | δ spent | done cells | "
            "above nominal |") in approx
    assert "| sgd | lb_quad | 1 | 0.25–1.5 | 1e-05 | 1e-05 | 16 | **1 cell(s)** |" in approx
    assert ("**1 done cell(s) spent more than their nominal budget: this must never happen"
            in approx)
    assert "| nonprivate | lb_lin | 1 | ∞ (non-private) | 1e-05 | 0 | 16 | — (not private) |" \
        in approx
    sgd = next(line for line in approx.splitlines() if line.startswith("| sgd | lb_lin |"))
    assert sgd.endswith(" | 16 | none |") and " | 1.5 | " not in sgd
    pure = spent[spent.index("### pure"):]
    # ε is swept: the spent range is given with its ratio to nominal; no row for the cells that
    # are all not applicable (output perturbation on the hinge SVM)
    assert "| outpert | lb_quad | 0.5, 1, 2, 4, 8 | 0.5–8 (×1 of nominal) |" in pure
    assert "| outpert | hinge_svm |" not in pure
    html = html_path.read_text(encoding="utf-8")
    assert '<a href="#privacy-spent">Privacy spent</a>' in html
    assert '<span class="no">1 cell(s)</span>' in html
    assert "this must never happen" in html
    # the unplanted store: nothing flagged
    clean = build_report(store, tmp_path / "clean.html", n_resamples=200)[1].read_text("utf-8")
    assert "\n## Privacy spent\n" in clean and "this must never happen" not in clean


def test_report_of_a_non_store_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope.zarr")]) == 2
    assert "no store at" in capsys.readouterr().err
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "file.txt").write_text("x")
    assert main(["report", str(tmp_path / "dir")]) == 2
    assert "not a dpbench store" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_incomplete_store(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "partial.zarr"
    shutil.copytree(store, copy)
    status = zarr.open_group(str(copy), mode="r+")["approx"]["status"]
    status[1, 0, 3, 0, 0, 0, :] = np.full(4, PENDING, dtype=np.uint8)   # sgd, lb_lin, n=64
    out = tmp_path / "partial.html"
    assert main(["report", str(copy), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "incomplete" in err and "--allow-incomplete" in err and "4 pending" in err
    assert not out.exists()
    assert main(["report", str(copy), "--output", str(out), "--allow-incomplete"]) == 0
    html = out.read_text(encoding="utf-8")
    assert 'id="missing"' in html and "4 pending and 0 failed" in html
    assert "n=64: 4 seed(s)" in html


def test_run_with_report_default_path(store: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --report`` on a finished store (nothing to compute) writes reports/<suite>.html."""
    suite = tmp_path / "reportsuite.yaml"
    suite.write_text(textwrap.dedent(REPORT_SUITE))
    copy = tmp_path / "cube.zarr"
    shutil.copytree(store, copy)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(suite), "--store", str(copy), "--workers", "0", "--quiet",
                 "--report"]) == 0
    assert (tmp_path / "reports" / "reportsuite.html").is_file()
    assert (tmp_path / "reports" / "reportsuite.md").is_file()


def test_parameters_left_at_their_public_default_read_default() -> None:
    from dpbench.report.build import _mapping_text

    assert _mapping_text({"steps": None, "scale": 0.5, "sampler": "exact", "k": 3}) == (
        "steps=default, scale=0.5, sampler=exact, k=3")
