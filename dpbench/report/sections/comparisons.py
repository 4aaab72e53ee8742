"""Comparisons: per experiment, the paired Wilcoxon tests (Holm-corrected), the crossovers, the
collapse check onto nε and the ε-convergence check.

Explained in docs/analysis.md, "Comparisons".
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="comparisons">
<h2>5. Comparisons</h2>
{% for e in experiments %}
<h3 id="comparisons-{{ e.name }}">{{ e.name }}</h3>
<h4>Paired comparisons</h4>
<p>{{ e.n_comparisons }} paired Wilcoxon signed-rank test(s) (same data seeds); {{ e.significant | length }} significant at α = {{ methods.alpha }} after Holm's correction.</p>
{% if e.significant %}
<div class="scroll"><table>
  <tr><th>problem</th><th>pair</th><th>points tested</th><th>first better at (Holm-significant)</th><th>second better at (Holm-significant)</th></tr>
  {% for s in e.pairs %}
  <tr><td>{{ s.problem }}</td><td>{{ s.a }} vs {{ s.b }}</td><td class="num">{{ s.tested }}</td>
    <td>{% if s.a_better %}<strong>{{ s.a }}</strong>: {{ s.a_better | join("; ") }}{% else %}—{% endif %}</td>
    <td>{% if s.b_better %}<strong>{{ s.b }}</strong>: {{ s.b_better | join("; ") }}{% else %}—{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
{% if e.significant %}
<details><summary>{{ e.significant | length }} significant comparison(s) in detail</summary>
<div class="scroll"><table>
  <tr><th>problem</th><th>point</th><th>a</th><th>b</th><th>better</th><th>median excess(a) − excess(b)</th><th>pairs</th><th>p</th><th>p (Holm)</th></tr>
  {% for c in e.significant %}
  <tr><td>{{ c.problem }}</td><td>{{ c.point | fixed }}</td><td>{{ c.a }}</td><td>{{ c.b }}</td><td><strong>{{ c.better }}</strong></td><td class="num">{{ c.median_difference | num }}</td><td class="num">{{ c.n_pairs }}</td><td class="num">{{ c.p_value | num(2) }}</td><td class="num">{{ c.p_holm | num(2) }}</td></tr>
  {% endfor %}
</table></div>
</details>
{% endif %}
<h4>Crossovers</h4>
{% if e.crossovers %}
<div class="scroll"><table>
  <tr><th>problem</th><th>axis</th><th>fixed</th><th>pair</th><th>crossover at</th><th>lower excess below it</th></tr>
  {% for c in e.crossovers %}
  <tr><td>{{ c.problem }}</td><td>{{ c.axis | sym }}</td><td>{{ c.fixed | fixed }}</td><td>{{ c.a }} vs {{ c.b }}</td><td class="num">{{ c.axis | sym }} ≈ {{ c.at | num }}</td><td>{{ c.below }}</td></tr>
  {% endfor %}
</table></div>
{% else %}
<p>No crossover: along every swept axis, no algorithm's mean excess overtakes another's.</p>
{% endif %}
{% if e.collapse %}
<h4>Collapse check (does the excess depend on n and ε only through nε?)</h4>
<div class="scroll"><table>
  <tr><th>algorithm</th><th>problem</th><th>fixed</th><th>slope in n (b)</th><th>slope in ε (c)</th><th>b − c [{{ "%.0f" | format(methods.level * 100) }}% CI]</th><th>collapses (CI ± {{ methods.collapse_tolerance }} contains 0)</th></tr>
  {% for c in e.collapse %}
  <tr><td>{{ c.algorithm }}</td><td>{{ c.problem }}</td><td>{{ c.fixed | fixed }}</td><td class="num">{{ c.slope_n | slope }}</td><td class="num">{{ c.slope_epsilon | slope }}</td><td class="num">{{ c.difference | estimate(c.difference_low, c.difference_high) }}</td><td>{% if c.collapses %}<span class="yes">yes</span>{% else %}<span class="no">no</span>{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
{% if e.convergence %}
<h4>ε-convergence (does the excess fall towards the non-private reference as ε grows?)</h4>
<div class="scroll"><table>
  <tr><th>algorithm</th><th>problem</th><th>fixed</th><th>ε</th><th>mean excess</th><th>non-increasing (within 2 SE)</th><th>mean at largest ε / at smallest</th></tr>
  {% for c in e.convergence %}
  <tr><td>{{ c.algorithm }}</td><td>{{ c.problem }}</td><td>{{ c.fixed | fixed }}</td><td class="num">{{ c.epsilons | map("num") | join(", ") }}</td><td class="num">{{ c.mean | map("num") | join(", ") }}</td><td>{% if c.monotone %}<span class="yes">yes</span>{% else %}<span class="no">no</span>{% endif %}</td><td class="num">{{ c.reduction | num }}</td></tr>
  {% endfor %}
</table></div>
{% endif %}
{% endfor %}
</section>
"""

MARKDOWN = """\
## Comparisons
{% for e in experiments %}

### {{ e.name }}

{{ e.n_comparisons }} paired Wilcoxon test(s); {{ e.significant | length }} significant at α = {{ methods.alpha }} after Holm.
{% for s in e.pairs if s.a_better or s.b_better %}
- {{ s.problem }}, {{ s.a }} vs {{ s.b }}:{% if s.a_better %} {{ s.a }} better at {{ s.a_better | join("; ") }}.{% endif %}{% if s.b_better %} {{ s.b }} better at {{ s.b_better | join("; ") }}.{% endif %}

{% endfor %}
{% for c in e.crossovers %}
- crossover on {{ c.problem }} along {{ c.axis | sym }} ({{ c.fixed | fixed }}): {{ c.a }} vs {{ c.b }} at {{ c.axis | sym }} ≈ {{ c.at | num }}, {{ c.below }} lower below it
{% endfor %}
{% for c in e.collapse %}
- collapse onto nε, {{ c.algorithm }} on {{ c.problem }} ({{ c.fixed | fixed }}): b − c = {{ c.difference | estimate(c.difference_low, c.difference_high) }} → {{ "collapses" if c.collapses else "does not collapse" }}
{% endfor %}
{% endfor %}
"""

SECTION = Section(name="comparisons", title="Comparisons", html=HTML, markdown=MARKDOWN,
                  when="experiments")
