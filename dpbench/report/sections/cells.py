"""Failed and not-applicable cells: per experiment, the cells of each status grouped by identical
message, with the algorithms and problems concerned. Last in the Markdown summary.

Cells are recorded, not raised (docs/architecture.md, "Errors"); their status codes are the
cube's ``status`` variable (README, "The cube").
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="cells">
<h2>6. Failed and not-applicable cells</h2>
{% for e in experiments %}
<h3 id="cells-{{ e.name }}">{{ e.name }}</h3>
<p>{{ e.counts.failed }} failed, {{ e.counts.not_applicable }} not applicable, {{ e.counts.pending }} pending of {{ e.counts.total }} cells.</p>
{% if e.cells %}
<div class="scroll"><table>
  <tr><th>status</th><th>cells</th><th>algorithm(s)</th><th>problem(s)</th><th>message</th></tr>
  {% for g in e.cells %}
  <tr><td>{{ g.status }}</td><td class="num">{{ g.count }}</td><td>{{ g.algorithms | join(", ") }}</td><td>{{ g.problems | join(", ") }}</td>
    <td>{{ g.first_line }}{% if g.multiline %}<details><summary>full message</summary><pre>{{ g.message }}</pre></details>{% endif %}</td></tr>
  {% endfor %}
</table></div>
{% else %}
<p>None.</p>
{% endif %}
{% endfor %}
</section>
"""

MARKDOWN = """\
## Failed and not-applicable cells
{% for e in experiments %}

### {{ e.name }}

{% if e.cells %}
| status | cells | algorithm(s) | problem(s) | message |
|---|---|---|---|---|
{% for g in e.cells %}
| {{ g.status }} | {{ g.count }} | {{ g.algorithms | join(", ") | md }} | {{ g.problems | join(", ") | md }} | {{ g.first_line | md }} |
{% endfor %}
{% else %}
None.
{% endif %}
{% endfor %}
"""

SECTION = Section(name="cells", title="Failed and not-applicable cells", html=HTML,
                  markdown=MARKDOWN, markdown_last=True, when="experiments")
