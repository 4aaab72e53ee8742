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
<p>Empirical lower bounds on each mechanism's real ε, from replace-one neighbouring datasets inside the problem's universe. Each point has a budget of worker time: pilot runs search the canaries (and any public parameter left open) by successive halving and choose the events — thresholds, intervals and atoms of the release's projection, of the canary's loss difference, of the mechanism's declared density ratio, and of distinguishers fitted on the pilots —; fresh runs, which no choice saw, confirm them with Clopper–Pearson bounds (and a μ-GDP bound after Nasr et al. 2023), tested against the claimed (ε, δ), μ and privacy profile, Bonferroni-corrected over the events and the points of the run. <strong>Tightness</strong> = the largest fraction of the claim the assumption-free bounds reach; a clean point below 0.1 is <em>uninformative</em>, not a pass, unless the audit reached at least half of the point's exact true ε (then the claim is loose there, and the slack says by how much). <strong>Resolution</strong> = the smallest true ε (at the claimed δ) of a Gaussian (Laplace for a pure claim) mechanism the point's confirmation runs would have flagged with the best event in half of the runs: a pass proves at most that the violation, if any, is smaller. <strong>True ε</strong> = the exact ε of the mechanism's output on the audited pair where the mechanism can compute it; <strong>reach</strong> = ε lower bound / true ε; <strong>slack</strong> = true ε / claimed ε (below 1: the claim is conservative there). See <code>docs/audit.md</code>.</p>
{% if audit_tightness %}
<h3 id="audit-tightness">Per mechanism</h3>
<div class="scroll"><table>
  <tr><th>mechanism</th><th>points</th><th>violations</th><th>best tightness</th><th>reached at</th><th>true ε</th><th>ε lower bound</th><th>reach</th><th>slack</th><th>summary</th></tr>
  {% for t in audit_tightness %}
  <tr><td>{{ t.algorithm }}</td><td class="num">{{ t.points }}</td><td class="num">{{ t.violations }}</td><td class="num">{{ t.tightness | num }}</td><td>{{ t.where }}</td><td class="num">{{ t.true_epsilon | num }}</td><td class="num">{{ t.epsilon_lb | num }}</td><td class="num">{{ t.reach | num }}</td><td class="num">{{ t.slack | num }}</td><td>{% if t.verdict == "VIOLATION" %}<span class="no">{{ t.verdict }}</span>{% elif t.verdict.startswith("informative") %}<span class="yes">{{ t.verdict }}</span>{% else %}{{ t.verdict }}{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
{% for a in audits %}
<h3 id="audit-{{ a.name }}">{{ a.name }} (expect: {{ a.expect }})</h3>
{% if a.description %}<p>{{ a.description }}</p>{% endif %}
<p>{{ a.audit_points }} applicable audit points in the run; alpha = {{ a.alpha_total | num }} over the run, {{ a.alpha_per_point | num }} per point; budget {{ a.budget_s | num }} s of worker time per point. Confirmation runs per side completed: {{ a.runs_completed }} of {{ a.runs_planned }} planned.{% if a.violations %} <span class="no">{{ a.violations | length }} privacy violation(s).</span>{% endif %}{% if a.uninformative %} {{ a.uninformative | length }} of {{ a.judged | length }} point(s) uninformative (tightness &lt; 0.1).{% endif %}</p>
{% if a.detections %}
<div class="scroll"><table>
  <tr><th>zoo member</th><th>points detected</th><th>largest ε lower bound</th></tr>
  {% for d in a.detections %}
  <tr><td>{{ d.algorithm }}</td><td class="num"><span class="{{ 'yes' if d.detected else 'no' }}">{{ d.detected }}/{{ d.points }}</span></td><td class="num">{{ d.max_epsilon_lb | num }}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
<div class="scroll"><table>
  <tr><th>algorithm</th><th>problem</th><th>point</th><th>canary</th><th>configuration confirmed</th><th>ε claimed</th><th>ε lower bound</th><th>true ε</th><th>μ claimed</th><th>μ lower bound</th><th>runs (confirm / select)</th><th>resolution</th><th>tightness</th><th>verdict</th></tr>
  {% for r in a.rows %}
  <tr><td>{{ r.algorithm }}</td><td>{{ r.problem }}</td><td>{{ r.grid_text }}</td><td>{{ r.canary }}</td><td class="small">{{ r.config }}</td>
    <td class="num">{{ r.epsilon_claimed | num }}</td><td class="num">{% if r.violation %}<span class="no">{{ r.epsilon_lb | num }}</span>{% else %}{{ r.epsilon_lb | num }}{% endif %}</td><td class="num">{{ r.true_epsilon | num }}</td><td class="num">{{ r.mu_claimed | num }}</td><td class="num">{{ r.mu_lb | num }}</td>
    <td class="num">{{ r.runs_completed }}/{{ r.runs_planned }} / {{ r.selection_runs }}</td><td class="num">{{ r.resolution | num }}</td><td class="num">{{ r.tightness | num }}</td>
    <td>{% if r.verdict in ("VIOLATION", "not detected") %}<span class="no">{{ r.verdict }}</span>{% elif r.verdict in ("pass", "detected") %}<span class="yes">{{ r.verdict }}</span>{% else %}{{ r.verdict }}{% if r.note %} <span class="small">({{ r.note }})</span>{% endif %}{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% endfor %}
{% if audit_power %}
<h3 id="audit-power">Auditor power</h3>
<pre>{{ audit_power }}</pre>
{% endif %}
</section>
{% endif %}
"""

MARKDOWN = """\
{% if audits %}
## Privacy audit

Empirical lower bounds on each mechanism's real ε (a budget of worker time per point: pilot runs search the canaries and choose events on several scores, fresh runs confirm them with Clopper–Pearson and GDP bounds, tested against the claimed (ε, δ), μ and profile; Bonferroni over events and points). Tightness = the largest fraction of the claim the bounds reach (a clean point below 0.1 is *uninformative*, not a pass). Resolution = the smallest true ε a Gaussian (Laplace for pure claims) violation would need to be flagged by the point's confirmation runs. True ε = the exact ε of the output on the audited pair where computable; reach = ε lb / true ε; slack = true ε / claimed ε.
{% if audit_tightness %}

### Per mechanism

| mechanism | points | violations | best tightness | reached at | true ε | ε lb | reach | slack | summary |
|---|---|---|---|---|---|---|---|---|---|
{% for t in audit_tightness %}
| {{ t.algorithm | md }} | {{ t.points }} | {{ t.violations }} | {{ t.tightness | num }} | {{ t.where | md }} | {{ t.true_epsilon | num }} | {{ t.epsilon_lb | num }} | {{ t.reach | num }} | {{ t.slack | num }} | {% if t.verdict == "VIOLATION" %}**{{ t.verdict }}**{% else %}{{ t.verdict }}{% endif %} |
{% endfor %}
{% endif %}
{% for a in audits %}

### {{ a.name }} (expect: {{ a.expect }})

{{ a.audit_points }} applicable audit points in the run; alpha = {{ a.alpha_total | num }} over the run, {{ a.alpha_per_point | num }} per point; budget {{ a.budget_s | num }} s per point; confirmation runs per side completed {{ a.runs_completed }} of {{ a.runs_planned }}.{% if a.violations %} **{{ a.violations | length }} privacy violation(s).**{% endif %}{% if a.uninformative %} {{ a.uninformative | length }} of {{ a.judged | length }} point(s) uninformative (tightness < 0.1).{% endif %}


{% if a.detections %}
| zoo member | points detected | largest ε lower bound |
|---|---|---|
{% for d in a.detections %}
| {{ d.algorithm | md }} | {{ d.detected }}/{{ d.points }} | {{ d.max_epsilon_lb | num }} |
{% endfor %}

{% endif %}
| algorithm | problem | point | canary | configuration confirmed | ε claimed | ε lb | true ε | μ claimed | μ lb | runs (confirm / select) | resolution | tightness | verdict |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
{% for r in a.rows %}
| {{ r.algorithm | md }} | {{ r.problem | md }} | {{ r.grid_text | md }} | {{ r.canary | md }} | {{ r.config | md }} | {{ r.epsilon_claimed | num }} | {% if r.violation %}**{{ r.epsilon_lb | num }}**{% else %}{{ r.epsilon_lb | num }}{% endif %} | {{ r.true_epsilon | num }} | {{ r.mu_claimed | num }} | {{ r.mu_lb | num }} | {{ r.runs_completed }}/{{ r.runs_planned }} / {{ r.selection_runs }} | {{ r.resolution | num }} | {{ r.tightness | num }} | {% if r.verdict in ("VIOLATION", "not detected") %}**{{ r.verdict }}**{% else %}{{ r.verdict }}{% endif %} |
{% endfor %}
{% endfor %}
{% if audit_power %}

### Auditor power

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
