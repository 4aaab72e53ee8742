"""Summary: the report at a glance, at the top of both outputs. Per experiment the cells done,
failed and pending and the declared expected rates by outcome; per problem the mechanism with
the lowest mean excess at the largest n and the fastest one (median wall time per cell).

The leaders are computed by :func:`dpbench.report.overview.problem_leaders` (the comparison point
is the figures': the other swept axes at their first value); the outcome counts are those of the
Expected rates section and of ``dpbench check``.
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="summary">
<h2>Summary</h2>
<p class="small">Expected rates: how many of the experiment's declared exponents agree, disagree or are inconclusive (<a href="#expected-rates">details</a>; — when it declares none). Lowest mean excess: over the done seeds at the largest n, the other swept axes at their first value as in the figures. Fastest: the lowest median wall time per done cell over the whole grid (the median, since a worker's first cells include compilation), measured on the machine that ran the store (not deterministic). Both rank the private mechanisms only, unless an experiment has no private one.</p>
<div class="scroll"><table>
  <tr><th>experiment</th><th>cells done / failed / pending</th><th>expected rates agree / disagree / inconclusive</th><th>problem</th><th>lowest mean excess at the largest n</th><th>fastest (median wall time per cell)</th></tr>
  {% for e in experiments %}
  {% set o = e.outcomes %}
  {% for l in e.leaders %}
  <tr>
    {% if loop.first %}
    <td rowspan="{{ loop.length }}"><a href="#rate-cards-{{ e.name }}">{{ e.name }}</a></td>
    <td class="num" rowspan="{{ loop.length }}">{{ e.counts.done }} / {% if e.counts.failed %}<span class="no">{{ e.counts.failed }}</span>{% else %}0{% endif %} / {{ e.counts.pending }}</td>
    <td class="num" rowspan="{{ loop.length }}">{% if e.expectations %}{{ o.agrees }} / {% if o.disagrees %}<span class="no">{{ o.disagrees }}</span>{% else %}0{% endif %} / {{ o.inconclusive }}{% if o.missing %} <span class="small">(+{{ o.missing }} missing)</span>{% endif %}{% else %}—{% endif %}</td>
    {% endif %}
    <td>{{ l.problem }}</td>
    <td>{% if l.best %}<strong>{{ l.best.label }}</strong> {{ l.best.value | num }} <span class="small">at {{ l.best.where }}</span>{% else %}—{% endif %}</td>
    <td>{% if l.fastest %}<strong>{{ l.fastest.label }}</strong> {{ l.fastest.value | duration }}{% else %}—{% endif %}</td>
  </tr>
  {% endfor %}
  {% endfor %}
</table></div>
</section>
"""

MARKDOWN = """\
## Summary

Expected rates: declared exponents that agree / disagree / are inconclusive (— when none are declared). Lowest mean excess: over the done seeds at the largest n, the other swept axes at their first value. Fastest: lowest median wall time per done cell, measured on the machine that ran the store (not deterministic). Private mechanisms only, unless an experiment has none.

| experiment | cells done / failed / pending | expected rates agree / disagree / inconclusive | problem | lowest mean excess at the largest n | fastest (median wall time per cell) |
|---|---|---|---|---|---|
{% for e in experiments %}
{% set o = e.outcomes %}
{% set cells %}{{ e.counts.done }} / {{ e.counts.failed }} / {{ e.counts.pending }}{% endset %}
{% set rates %}{% if e.expectations %}{{ o.agrees }} / {{ o.disagrees }} / {{ o.inconclusive }}{% if o.missing %} (+{{ o.missing }} missing){% endif %}{% else %}—{% endif %}{% endset %}
{% for l in e.leaders %}
| {{ e.name | md if loop.first else "" }} | {{ cells if loop.first else "" }} | {{ rates if loop.first else "" }} | {{ l.problem | md }} | {% if l.best %}**{{ l.best.label | md }}** {{ l.best.value | num }} at {{ l.best.where | md }}{% else %}—{% endif %} | {% if l.fastest %}**{{ l.fastest.label | md }}** {{ l.fastest.value | duration }}{% else %}—{% endif %} |
{% endfor %}
{% endfor %}
"""

SECTION = Section(name="summary", title="Summary", html=HTML, markdown=MARKDOWN, top=True,
                  when="experiments")
