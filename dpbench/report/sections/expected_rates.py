"""Expected rates: the exponents the suite declares (``expect:``) against the fitted slopes, one
row per declaration with its outcome, CI, band, tolerance source and resolution.

Shown only when the suite declares some (``checks``, shared with the page header's summary line).
Explained in docs/analysis.md, "Expected rates (`expect:` in a suite)" and "Verdicts".
"""

from __future__ import annotations

from .section import Section

HTML = """\
{% if checks %}
<section id="expected-rates">
<h2>Expected rates</h2>
<p>The exponents the suite declares (average scale) on its designated instances, against the fitted slopes (same fits and exclusions as section 1), by an equivalence rule. <em>Agrees</em>: the slope's whole {{ "%.0f" | format(methods.level * 100) }}% CI lies inside the band (expected ± tolerance); <em>disagrees</em>: the CI lies wholly outside, or a point blows up or collapses inside the informative range, or a mean excess is non-positive, or the level against a closed-form oracle is off by more than its tolerance; <em>inconclusive</em>: otherwise (the reason says what would decide it: seeds or grid points). Error rates per row: at most {{ "%.1f" | format((1 - methods.level) / 2 * 100) }}% of agreeing when the finite-range slope lies outside the band and at most {{ "%.1f" | format((1 - methods.level) / 2 * 100) }}% of disagreeing when it lies inside, if the bootstrap CI has its nominal coverage. <em>Resolution</em>: tolerance + CI half-width, the smallest slope error the row could have detected. Tolerances: 0.1 by default; <em>card</em>: derived from the rate card's local slopes over the kept points (log factors, two-term bends); above 0.1 only with the written reason shown. <em>Derived</em>: where the paper treats a calibrated quantity (a noise multiplier, an inverse temperature, a number of steps) as an exact power law and it is not one on the grid, the band is centred on the slope the mechanism's own calibration predicts over the kept points, computed by the code (its derivation is shown), beside the paper's exponent.</p>
<div class="scroll"><table class="ratecards">
  <tr><th>id</th><th>experiment</th><th>algorithm</th><th>problem</th><th>axis</th><th>fixed</th><th>paper's slope</th><th>band</th><th>tolerance from</th><th>fitted slope [CI]</th><th>resolution</th><th>empirical / oracle [CI]</th><th>points used</th><th>outcome</th><th>source</th></tr>
  {% for c in checks %}
  <tr>
    <td>{{ c.expectation.id }}</td><td><a href="#rate-cards-{{ c.experiment }}">{{ c.experiment }}</a></td><td>{{ c.expectation.algorithm }}</td><td>{{ c.expectation.problem }}</td><td>{{ c.expectation.axis | sym }}{% if c.expectation.variable != "excess_risk" %} <span class="small">({{ c.expectation.variable }})</span>{% endif %}</td><td class="fixed">{{ c.fixed | fixed }}</td>
    <td class="num">{{ c.expectation.slope | slope }}</td><td class="num">{{ c.centre | slope }} ± {{ c.tolerance | num(2) }}</td><td class="small">{{ c.tolerance_source }}</td>
    <td class="num">{{ c.slope | estimate(c.slope_low, c.slope_high) }}</td><td class="num">±{{ c.resolution | num(2) }}</td>
    <td class="num">{% if c.level_outcome %}{{ c.level | estimate(c.level_low, c.level_high, "num") }}<br><span class="small">{{ c.level_outcome }}</span>{% else %}—{% endif %}</td>
    <td class="num">{{ c.points_used }}/{{ c.points }}{% if c.excluded %}<br><span class="small" title="{{ c.excluded | join('; ') }}">{{ c.excluded | length }} excluded</span>{% endif %}</td>
    <td><span class="verdict verdict-{{ {"agrees": "consistent", "disagrees": "slower", "inconclusive": "inconclusive", "missing": "inconclusive"}[c.outcome] }}" title="{{ c.reason }}">{{ c.outcome }}</span>{% if c.outcome != "agrees" %}<br><span class="small">{{ c.reason }}</span>{% endif %}</td>
    <td class="small cite">{{ c.expectation.source }}</td>
  </tr>
  {% endfor %}
</table></div>
</section>
{% endif %}
"""

MARKDOWN = """\
{% if checks %}
## Expected rates

**{{ checks | expect_summary }}.**

The suite's declared exponents (average scale) against the fitted slopes on the designated instances, by an equivalence rule: *agrees* only when the slope's whole {{ "%.0f" | format(methods.level * 100) }}% CI lies inside the band (expected ± tolerance); *disagrees* when it lies wholly outside, when a point blows up or collapses inside the informative range or a mean excess is non-positive, or when the level against a closed-form oracle is off; *inconclusive* otherwise (the reason says what would decide it). Error rates per row: at most {{ "%.1f" | format((1 - methods.level) / 2 * 100) }}% of agreeing when the finite-range slope lies outside the band, and at most {{ "%.1f" | format((1 - methods.level) / 2 * 100) }}% of disagreeing when it lies inside (if the bootstrap CI has its nominal coverage). Resolution: the tolerance plus the CI half-width, the smallest slope error the row could have detected. Tolerance: 0.1 by default; *card*: derived from the rate card's local slopes over the kept points; above 0.1 only with the written reason shown. *Derived*: the band is centred on the slope the mechanism's own calibration predicts over the kept points (computed by the code; the derivation is shown), beside the paper's exponent.

| id | experiment | algorithm | problem | axis | fixed | paper | band | tolerance from | fitted slope [CI] | resolution | empirical / oracle [CI] | points used | outcome |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
{% for c in checks %}
| {{ c.expectation.id | md }} | {{ c.experiment | md }} | {{ c.expectation.algorithm | md }} | {{ c.expectation.problem | md }} | {{ c.expectation.axis | sym }}{% if c.expectation.variable != "excess_risk" %} ({{ c.expectation.variable | md }}){% endif %} | {{ c.fixed | fixed | md }} | {{ c.expectation.slope | slope }} | {{ c.centre | slope }} ± {{ c.tolerance | num(2) }} | {{ c.tolerance_source | md }} | {{ c.slope | estimate(c.slope_low, c.slope_high) }} | ±{{ c.resolution | num(2) }} | {% if c.level_outcome %}{{ c.level | estimate(c.level_low, c.level_high, "num") }} ({{ c.level_outcome }}){% else %}—{% endif %} | {{ c.points_used }}/{{ c.points }} | **{{ c.outcome }}**{% if c.outcome != "agrees" %}: {{ c.reason | md }}{% endif %} |
{% endfor %}
{% endif %}
"""

SECTION = Section(
    name="expected-rates", title="Expected rates", html=HTML, markdown=MARKDOWN,
    # on the Provenance link's line, as the page has always had it
    nav='{% if checks %} <a href="#{{ section.name }}">{{ section.title }}</a>{% endif %}')
