"""Rate cards: per experiment, one row per fitted curve (the empirical log-log slope with its
bootstrap CI against the rate card's predicted slope, the verdict, the level ratios), then the
experiment's rate cards and problems.

Explained in docs/analysis.md, "What is fitted" and "Verdicts".
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="rate-cards">
<h2>1. Rate cards: empirical slopes against theory</h2>
<p>One row per fitted curve: an algorithm on a problem along one swept axis, the other axes fixed. The fitted slope is the least-squares slope of log mean excess risk against log axis over the kept points, with its {{ "%.0f" | format(methods.level * 100) }}% bootstrap CI; the predicted slope is the rate card's local slope d log(bound)/d log(axis) averaged over the same points. Verdict: the CI inside predicted ± {{ methods.tolerance }} (consistent), wholly outside (faster / slower), else inconclusive; invalid on a blow-up, collapse or non-positive mean. Hover a verdict for its reason.</p>
{% for e in experiments %}
<h3 id="rate-cards-{{ e.name }}">{{ e.name }}</h3>
{% if e.description %}<p>{{ e.description }}</p>{% endif %}
<p class="small">Cube {{ e.shape }}; {{ e.counts.done }} done, {{ e.counts.failed }} failed, {{ e.counts.not_applicable }} not applicable, {{ e.counts.pending }} pending. Normalisation: {{ e.normalisation }}.</p>
{% if e.rows %}
<div class="scroll"><table class="ratecards">
  <tr><th>algorithm</th><th>problem</th><th>axis</th><th>fixed</th><th>theory exponent</th><th>predicted local slope</th><th>fitted slope [CI]</th><th>verdict</th><th>empirical / bound [CI]</th><th>empirical / oracle</th><th>regime</th><th>citation</th><th>points used</th></tr>
  {% for r in e.rows %}
  {% set f = r.fit %}
  <tr>
    <td>{{ f.algorithm }}</td><td>{{ f.problem }}</td><td>{{ f.axis | sym }}</td><td class="fixed">{{ f.fixed | fixed }}</td>
    <td class="num">{% if r.exponent is not none %}{{ f.axis | sym }}<sup>{{ r.exponent | num }}</sup>{% else %}—{% endif %}</td>
    <td class="num">{{ f.predicted_slope | slope }}</td>
    <td class="num">{{ f.slope | estimate(f.slope_low, f.slope_high) }}</td>
    <td class="verdict-cell"><span class="verdict verdict-{{ f.verdict }}" title="{{ f.reason }}">{{ r.verdict_text }}</span><br><span class="small">{{ f.reason }}</span></td>
    <td class="num">{{ f.ratio | estimate(f.ratio_low, f.ratio_high, "num") }}</td>
    <td class="num">{{ f.oracle_ratio | num }}</td>
    <td class="small regime">{{ f.rate_regime }}</td>
    <td class="small cite">{{ f.rate_citation }}</td>
    <td class="num">{{ r.points }}{% if f.missing %} <span class="small">({{ f.missing | length }} point(s) with missing cells)</span>{% endif %}</td>
  </tr>
  {% endfor %}
</table></div>
{% else %}
<p>No algorithm of this experiment has a rate card, so there is nothing to compare with theory.</p>
{% endif %}
{% if e.references %}
<p class="small">Reference algorithms without a rate card (not tabulated; drawn only where their excess is positive): {{ e.references | join("; ") }}.</p>
{% endif %}
{% if e.cards %}
<h4>Rate cards of {{ e.name }}</h4>
<div class="scroll"><table>
  <tr><th>algorithm</th><th>privacy</th><th>parameters</th><th>bound (average scale)</th><th>exponents</th><th>citation</th><th>regime</th><th>notes</th></tr>
  {% for c in e.cards %}
  <tr><td>{{ c.label }} <span class="small">({{ c.algorithm }})</span></td><td>{{ c.privacy }}</td><td class="small">{{ c.params }}</td><td><code>{{ c.expression }}</code></td><td class="num">{% for axis, value in c.exponents %}{{ axis | sym }}<sup>{{ value | num }}</sup>{% if not loop.last %}, {% endif %}{% endfor %}</td><td class="small">{{ c.citation }}</td><td class="small">{{ c.regime }}</td><td class="small">{{ c.notes }}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
<h4>Problems of {{ e.name }}</h4>
<div class="scroll"><table>
  <tr><th>problem</th><th>parameters</th><th>constants</th><th>citation</th></tr>
  {% for p in e.problems %}
  <tr><td>{{ p.label }} <span class="small">({{ p.problem }})</span></td><td class="small">{{ p.params }}</td><td class="small">{{ p.constants }}</td><td class="small">{{ p.citation }}</td></tr>
  {% endfor %}
</table></div>
{% endfor %}
</section>
"""

MARKDOWN = """\
## Rate cards

Fitted slope: least squares of log mean excess vs log axis over the kept points, {{ "%.0f" | format(methods.level * 100) }}% bootstrap CI ({{ methods.n_resamples }} resamples); predicted: the rate card's local slope; verdict: the CI inside predicted ± {{ methods.tolerance }} (consistent), wholly outside (faster / slower), invalid on a blow-up, collapse or non-positive mean, else inconclusive.
{% for e in experiments %}

### {{ e.name }}

{% if e.rows %}
| algorithm | problem | axis | fixed | theory exponent | predicted slope | fitted slope [CI] | verdict | empirical / bound [CI] | empirical / oracle | citation | points used |
|---|---|---|---|---|---|---|---|---|---|---|---|
{% for r in e.rows %}
{% set f = r.fit %}
| {{ f.algorithm | md }} | {{ f.problem | md }} | {{ f.axis | sym }} | {{ f.fixed | fixed | md }} | {% if r.exponent is not none %}{{ f.axis | sym }}^{{ r.exponent | num }}{% else %}—{% endif %} | {{ f.predicted_slope | slope }} | {{ f.slope | estimate(f.slope_low, f.slope_high) }} | **{{ f.verdict }}**: {{ f.reason | md }} | {{ f.ratio | estimate(f.ratio_low, f.ratio_high, "num") }} | {{ f.oracle_ratio | num }} | {{ f.rate_citation | md }} | {{ r.points }} |
{% endfor %}
{% else %}
No algorithm of this experiment has a rate card.
{% endif %}
{% if e.references %}

Reference algorithms without a rate card: {{ e.references | join("; ") }}.
{% endif %}
{% endfor %}
"""

SECTION = Section(name="rate-cards", title="Rate cards", html=HTML, markdown=MARKDOWN,
                  when="experiments")
