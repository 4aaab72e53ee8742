"""Privacy audit: per audit, the empirical ε lower bounds and audit gaps per mechanism and grid
point, the broken zoo's detections and the auditor's power table.

Shown only when the store holds audits; the data come from :func:`dpbench.audit.report.audit_context`.
Explained in docs/audit.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...audit.report import audit_context
from ...store.cube import Store
from .section import Section

HTML = """\
{% if audits %}
<section id="privacy-audit">
<h2>Privacy audit</h2>
<p>Empirical lower bounds on ε from replace-one neighbouring datasets with worst-case canaries: an event on the score (a bulk or tail threshold, or an atom) is selected on the first half of every batch and confirmed on the second half with Clopper–Pearson bounds (and a μ-GDP bound after Nasr et al. 2023), tested against the claimed (ε, δ), μ and privacy profile, Bonferroni-corrected over the audit points of the run. <strong>Audit gap</strong> = claimed ε − ε lower bound; a negative gap proves the claim wrong at the stated confidence. A positive gap does not prove the mechanism private. <strong>Tightness</strong> = the largest fraction of the claim the assumption-free bounds reach (ε lower bound / ε claimed, or μ lower bound / μ claimed when the ledger states μ); a clean point below 0.1 is <em>uninformative</em>, not a pass. See <code>docs/audit.md</code>.</p>
{% if audit_tightness %}
<h3 id="audit-tightness">Tightness per mechanism</h3>
<div class="scroll"><table>
  <tr><th>mechanism</th><th>points</th><th>violations</th><th>best tightness</th><th>reached at</th><th>summary</th></tr>
  {% for t in audit_tightness %}
  <tr><td>{{ t.algorithm }}</td><td class="num">{{ t.points }}</td><td class="num">{{ t.violations }}</td><td class="num">{{ t.tightness | num }}</td><td>{{ t.where }}</td><td>{% if t.verdict == "VIOLATION" %}<span class="no">{{ t.verdict }}</span>{% elif t.verdict == "informative" %}<span class="yes">{{ t.verdict }}</span>{% else %}{{ t.verdict }}{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
{% for a in audits %}
<h3 id="audit-{{ a.name }}">{{ a.name }} (expect: {{ a.expect }})</h3>
{% if a.description %}<p>{{ a.description }}</p>{% endif %}
<p>{{ a.audit_points }} applicable audit points in the run; alpha = {{ a.alpha_total | num }} over the run, {{ a.alpha_per_point | num }} per point. Runs per side completed: {{ a.runs_completed }} of {{ a.runs_planned }} planned.{% if a.violations %} <span class="no">{{ a.violations | length }} privacy violation(s).</span>{% endif %}{% if a.uninformative %} {{ a.uninformative | length }} of {{ a.judged | length }} point(s) uninformative (tightness &lt; 0.1).{% endif %}</p>
{% if a.detections %}
<div class="scroll"><table>
  <tr><th>zoo member</th><th>points detected</th><th>largest ε lower bound</th></tr>
  {% for d in a.detections %}
  <tr><td>{{ d.algorithm }}</td><td class="num"><span class="{{ 'yes' if d.detected else 'no' }}">{{ d.detected }}/{{ d.points }}</span></td><td class="num">{{ d.max_epsilon_lb | num }}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
<div class="scroll"><table>
  <tr><th>algorithm</th><th>problem</th><th>n</th><th>p</th><th>ε</th><th>δ</th><th>canary</th><th>ε claimed</th><th>ε lower bound</th><th>ε lb (GDP)</th><th>μ claimed</th><th>μ lower bound</th><th>audit gap</th><th>runs</th><th>tightness</th><th>verdict</th></tr>
  {% for r in a.rows %}
  <tr><td>{{ r.algorithm }}</td><td>{{ r.problem }}</td><td class="num">{{ r.n }}</td><td class="num">{{ r.p }}</td><td class="num">{{ r.epsilon | num }}</td><td class="num">{{ r.delta | num }}</td><td>{{ r.canary }}</td>
    <td class="num">{{ r.epsilon_claimed | num }}</td><td class="num">{{ r.epsilon_lb | num }}</td><td class="num">{{ r.epsilon_lb_gdp | num }}</td><td class="num">{{ r.mu_claimed | num }}</td><td class="num">{{ r.mu_lb | num }}</td>
    <td class="num">{% if r.gap < 0 %}<span class="no">{{ r.gap | num }}</span>{% else %}{{ r.gap | num }}{% endif %}</td><td class="num">{{ r.runs_completed }}/{{ r.runs_planned }}</td><td class="num">{{ r.tightness | num }}</td>
    <td>{% if r.verdict in ("VIOLATION", "not detected") %}<span class="no">{{ r.verdict }}</span>{% elif r.verdict in ("pass", "detected") %}<span class="yes">{{ r.verdict }}</span>{% else %}{{ r.verdict }}{% if r.note %} <span class="small">({{ r.note }})</span>{% endif %}{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% endfor %}
{% if audit_power %}
<h3 id="audit-power">Auditor power vs runs</h3>
<pre>{{ audit_power }}</pre>
{% endif %}
</section>
{% endif %}
"""

MARKDOWN = """\
{% if audits %}
## Privacy audit

Empirical ε lower bounds (an event — bulk or tail threshold, or atom — selected on the first half of every batch, Clopper–Pearson and GDP bounds on the second half, tested against the claimed (ε, δ), μ and privacy profile, Bonferroni over the run's audit points). Audit gap = claimed ε − lower bound; a negative gap is a privacy violation at the stated confidence; a pass does not prove privacy. Tightness = the largest fraction of the claim the assumption-free bounds reach (ε lb / ε claimed, or μ lb / μ claimed); a clean point below 0.1 is *uninformative*, not a pass.
{% if audit_tightness %}

### Tightness per mechanism

| mechanism | points | violations | best tightness | reached at | summary |
|---|---|---|---|---|---|
{% for t in audit_tightness %}
| {{ t.algorithm | md }} | {{ t.points }} | {{ t.violations }} | {{ t.tightness | num }} | {{ t.where | md }} | {% if t.verdict == "VIOLATION" %}**{{ t.verdict }}**{% else %}{{ t.verdict }}{% endif %} |
{% endfor %}
{% endif %}
{% for a in audits %}

### {{ a.name }} (expect: {{ a.expect }})

{{ a.audit_points }} applicable audit points in the run; alpha = {{ a.alpha_total | num }} over the run, {{ a.alpha_per_point | num }} per point; runs per side completed {{ a.runs_completed }} of {{ a.runs_planned }}.{% if a.violations %} **{{ a.violations | length }} privacy violation(s).**{% endif %}{% if a.uninformative %} {{ a.uninformative | length }} of {{ a.judged | length }} point(s) uninformative (tightness < 0.1).{% endif %}


{% if a.detections %}
| zoo member | points detected | largest ε lower bound |
|---|---|---|
{% for d in a.detections %}
| {{ d.algorithm | md }} | {{ d.detected }}/{{ d.points }} | {{ d.max_epsilon_lb | num }} |
{% endfor %}

{% endif %}
| algorithm | problem | n | p | ε | δ | canary | ε claimed | ε lb | ε lb (GDP) | μ claimed | μ lb | gap | runs | tightness | verdict |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
{% for r in a.rows %}
| {{ r.algorithm | md }} | {{ r.problem | md }} | {{ r.n }} | {{ r.p }} | {{ r.epsilon | num }} | {{ r.delta | num }} | {{ r.canary | md }} | {{ r.epsilon_claimed | num }} | {{ r.epsilon_lb | num }} | {{ r.epsilon_lb_gdp | num }} | {{ r.mu_claimed | num }} | {{ r.mu_lb | num }} | {% if r.gap < 0 %}**{{ r.gap | num }}**{% else %}{{ r.gap | num }}{% endif %} | {{ r.runs_completed }}/{{ r.runs_planned }} | {{ r.tightness | num }} | {% if r.verdict in ("VIOLATION", "not detected") %}**{{ r.verdict }}**{% else %}{{ r.verdict }}{% endif %} |
{% endfor %}
{% endfor %}
{% if audit_power %}

### Auditor power vs runs

{{ audit_power }}
{% endif %}
{% endif %}
"""


def context(store: Store, shared: Mapping[str, Any]) -> dict[str, Any]:
    """``audits``, ``audit_tightness`` and ``audit_power`` (empty when the store has no audit)."""
    return audit_context(store)


SECTION = Section(
    name="privacy-audit", title="Privacy audit", html=HTML, markdown=MARKDOWN, context=context,
    nav='{% if audits %}<a href="#{{ section.name }}">{{ section.title }}</a>{% endif %}')
