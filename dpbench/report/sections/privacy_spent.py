"""Privacy spent: per experiment, per (algorithm label, problem), the nominal ε and δ of the grid
and what the mechanism's privacy ledger says it spent over the done cells, with the cells that
spent more than their budget (which must never happen).

The numbers are :func:`dpbench.analysis.spent.privacy_spent` of the cube's ``privacy`` variables
(:mod:`dpbench.core.schema`), computed per experiment by the report (``ExperimentSection.privacy``).
Explained in docs/analysis.md, "Privacy spent".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..figures import axis_symbol, num
from .section import Section

if TYPE_CHECKING:
    from ...analysis.spent import PrivacySpent, Spent
    from ...store.cube import Store


@dataclass(frozen=True)
class SpentRow:
    """One (algorithm, problem) of the table, as text: per privacy variable its nominal values
    and the range spent."""

    algorithm: str
    problem: str
    values: list[tuple[str, str]]
    done: int
    above: str
    over: int


@dataclass(frozen=True)
class SpentTable:
    """One experiment's table: the axis symbol of each privacy variable, the rows, and how many
    done cells spent more than nominal."""

    experiment: str
    symbols: list[str]
    rows: list[SpentRow]
    over: int


def _range(low: float, high: float) -> str:
    """"low–high", or one value when both read the same."""
    lo, hi = num(low), num(high)
    return lo if lo == hi else f"{lo}–{hi}"


def spent_text(s: Spent, private: bool) -> str:
    """The range spent over the done cells, followed, when the grid has several nominal values,
    by the range of spent / nominal ("×…"); "∞ (non-private)" for a non-private reference's
    infinite ε, "—" when no cell is done."""
    if not math.isfinite(s.low):
        return "∞ (non-private)" if s.low == math.inf and not private else "—"
    text = _range(s.low, s.high)
    if len(s.nominal) > 1 and math.isfinite(s.ratio_low):
        text += f" (×{_range(s.ratio_low, s.ratio_high)} of nominal)"
    return text


def _row(r: PrivacySpent) -> SpentRow:
    values = [(", ".join(num(v, 6) for v in s.nominal), spent_text(s, r.private))
              for s in r.spent]
    above = ("— (not private)" if not r.private else
             f"{r.over} cell(s)" if r.over else "none")
    return SpentRow(r.algorithm, r.problem, values, r.done, above, r.over)


def tables(experiments: list[Any]) -> list[SpentTable]:
    """The privacy-spent table of every experiment section (``e.privacy``)."""
    out = []
    for e in experiments:
        rows: list[PrivacySpent] = e.privacy
        symbols = [axis_symbol(s.axis) for s in rows[0].spent] if rows else []
        out.append(SpentTable(e.name, symbols, [_row(r) for r in rows],
                              sum(r.over for r in rows)))
    return out


def _context(store: Store, shared: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"privacy_spent": tables(list(shared["experiments"]))}


HTML = """\
<section id="privacy-spent">
<h2>Privacy spent</h2>
<p>What each mechanism's privacy ledger certified it spent (the tightest account it holds, e.g. an RDP accountant's), over the done cells, against the nominal budget of the grid. A private mechanism must never spend more than its budget — a run fails such a cell, and this table checks the stored values again —; a spent ε below the nominal one is a conservative account. Non-private references spend ε = ∞ and are not checked.</p>
{% for t in privacy_spent %}
<h3 id="privacy-spent-{{ t.experiment }}">{{ t.experiment }}</h3>
{% if t.over %}
<p><span class="no">{{ t.over }} done cell(s) spent more than their nominal budget: this must never happen (the mechanism's calibration or its ledger is wrong, or the store was edited).</span></p>
{% endif %}
{% if t.rows %}
<div class="scroll"><table>
  <tr><th>algorithm</th><th>problem</th>{% for s in t.symbols %}<th>{{ s }} nominal</th><th>{{ s }} spent</th>{% endfor %}<th>done cells</th><th>above nominal</th></tr>
  {% for r in t.rows %}
  <tr><td>{{ r.algorithm }}</td><td>{{ r.problem }}</td>{% for nominal, spent in r.values %}<td class="num">{{ nominal }}</td><td class="num">{{ spent }}</td>{% endfor %}<td class="num">{{ r.done }}</td><td>{% if r.over %}<span class="no">{{ r.above }}</span>{% else %}{{ r.above }}{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% else %}
<p>No applicable cell.</p>
{% endif %}
{% endfor %}
</section>
"""

MARKDOWN = """\
## Privacy spent

What each mechanism's privacy ledger certified it spent over the done cells, against the grid's nominal budget; a private mechanism must never spend more (non-private references spend ε = ∞ and are not checked).
{% for t in privacy_spent %}

### {{ t.experiment }}

{% if t.over %}
**{{ t.over }} done cell(s) spent more than their nominal budget: this must never happen (the mechanism's calibration or its ledger is wrong, or the store was edited).**

{% endif %}
{% if t.rows %}
| algorithm | problem |{% for s in t.symbols %} {{ s }} nominal | {{ s }} spent |{% endfor %} done cells | above nominal |
|---|---|{% for s in t.symbols %}---|---|{% endfor %}---|---|
{% for r in t.rows %}
| {{ r.algorithm | md }} | {{ r.problem | md }} |{% for nominal, spent in r.values %} {{ nominal }} | {{ spent }} |{% endfor %} {{ r.done }} | {% if r.over %}**{{ r.above }}**{% else %}{{ r.above }}{% endif %} |
{% endfor %}
{% else %}
No applicable cell.
{% endif %}
{% endfor %}
"""

SECTION = Section(name="privacy-spent", title="Privacy spent", html=HTML, markdown=MARKDOWN,
                  context=_context, when="experiments")
