"""What a report section is: its anchor, its navigation label, its markup, the data it adds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...store.cube import Store

#: ``context(store, shared)``: the entries a section adds to the report context, computed from the
#: store and the shared context (``prov``, ``experiments``, ``checks``, ``methods``).
ContextFunction = Callable[["Store", Mapping[str, Any]], Mapping[str, Any]]

#: A navigation entry on a line of its own. ``section`` is the page's loop variable.
DEFAULT_NAV = '  <a href="#{{ section.name }}">{{ section.title }}</a>\n'


@dataclass(frozen=True)
class Section:
    """One section of the report, rendered where it is registered (``sections.SECTIONS``).

    ``html`` and ``markdown`` are jinja sources rendered with the report context; the HTML one is
    autoescaped. A section shown only in some reports wraps its markup and its ``nav`` entry in
    the same condition (or names it in ``when``), so both render empty when it is absent. An empty ``markdown`` leaves the
    section out of the Markdown summary, which puts ``markdown_last`` sections after the others.
    A ``top`` section is rendered at the top of both outputs, under the title and the incomplete
    store's banner and before the provenance, rather than after it.
    """

    name: str
    """The anchor: the ``id`` of the section's element and ``#name`` in the navigation."""
    title: str
    """The navigation label."""
    html: str
    markdown: str = ""
    nav: str = DEFAULT_NAV
    context: ContextFunction | None = None
    markdown_last: bool = False
    top: bool = False
    when: str = ""
    """A context entry (e.g. ``experiments``): when it is empty or false the section and its
    navigation entry render empty in both outputs (an audit-only store has no experiments, so it
    gets no empty rate-card, figure or comparison sections)."""

    @property
    def html_template(self) -> str:
        return f"sections/{self.name}.html.j2"

    @property
    def markdown_template(self) -> str:
        return f"sections/{self.name}.md.j2"

    @property
    def nav_template(self) -> str:
        return f"sections/{self.name}.nav.html.j2"

    def templates(self) -> dict[str, str]:
        """Jinja source by template name; the names end like the page's, so that the HTML
        fragments are autoescaped and the Markdown one is not."""
        def shown(source: str) -> str:
            if not (self.when and source):
                return source
            return f"{{% if {self.when} %}}{source}{{% endif %}}"

        return {self.html_template: shown(self.html), self.markdown_template: shown(self.markdown),
                self.nav_template: shown(self.nav)}
