"""The report's sections, in page order: adding one is a module here and a line in ``SECTIONS``.

The page itself (head, style, the header with the title, navigation and provenance, the
footer) is ``dpbench/templates/report.html.j2`` / ``report.md.j2``; it renders every registered
section in turn, each followed (HTML) or preceded (Markdown, when present) by a blank line.
See docs/architecture.md, "Where to add things".
"""

from __future__ import annotations

from . import (
    cells,
    comparisons,
    cost,
    expected_rates,
    figures,
    methods,
    overlay,
    privacy_audit,
    privacy_spent,
    rate_cards,
    summary,
)
from .section import Section

SECTIONS: tuple[Section, ...] = (
    summary.SECTION,
    expected_rates.SECTION,
    rate_cards.SECTION,
    figures.SECTION,
    overlay.SECTION,
    cost.SECTION,
    comparisons.SECTION,
    cells.SECTION,
    privacy_spent.SECTION,
    privacy_audit.SECTION,
    methods.SECTION,
)


def templates() -> dict[str, str]:
    """The jinja source of every registered section's templates, by template name."""
    return {name: source for section in SECTIONS for name, source in section.templates().items()}


__all__ = ["SECTIONS", "Section", "templates"]
