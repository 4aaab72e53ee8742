"""Cost: per experiment, the mean wall time and query counts per cell of every mechanism against
n and against p (each axis with at least two values), log-log. HTML only.

The panels are built by :func:`dpbench.report.overview.cost_panels` and drawn by
:class:`dpbench.report.figures.CostPanel`. Wall time is the cube's nondeterministic variable
(``core.schema.NONDETERMINISTIC_VARS``): measured on the machine that ran the cell.
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="cost">
<h2>4. Cost</h2>
<p>Mean cost per done cell of every mechanism against n and against p (an axis with a single value gets no figure), log-log: the wall time of the mechanism's run, measured on the machine that ran the store and not deterministic (compare mechanisms within one store only), and the counted gradient queries, with loss evaluations when a mechanism counts them. Each point pools the problems, seeds and other axes of the experiment.</p>
{% for e in experiments %}
<h3 id="cost-{{ e.name }}">{{ e.name }}</h3>
{% for fig in e.costs %}
{% with figure_id = fig.anchor, figno = fig.title ~ "." %}
{% include "figure.html.j2" %}
{% endwith %}
{% endfor %}
{% if e.cost_notes %}
<ul class="notes">{% for n in e.cost_notes %}<li>{{ n }}</li>{% endfor %}</ul>
{% endif %}
{% endfor %}
</section>
"""

SECTION = Section(name="cost", title="Cost", html=HTML, when="experiments")
