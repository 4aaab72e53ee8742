"""Figures: mean excess risk against each swept axis, one line per algorithm, log-log, embedded
PNGs with generated captions (drawn by :mod:`dpbench.report.figures`). HTML only.

Explained in docs/analysis.md, "What is fitted" and "What is excluded — and what is a failure"
(the hollow markers).
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="figures">
<h2>2. Figures</h2>
<p>Mean excess risk against each swept axis, one line per algorithm, log-log. When an axis has more than {{ methods.max_combos }} combinations of the other axes, only the first value of each is plotted (the table above fits them all).</p>
{% set fig_counter = namespace(n=0) %}
{% for e in experiments %}
<h3 id="figures-{{ e.name }}">{{ e.name }}</h3>
{% for fig in e.figures %}
{% set fig_counter.n = fig_counter.n + 1 %}
{% with figure_id = "figure-%d" % fig_counter.n, figno = "Figure %d." % fig_counter.n %}
{% include "figure.html.j2" %}
{% endwith %}
{% else %}
<p>No figure: no algorithm has a positive mean excess along a swept axis.</p>
{% endfor %}
{% if e.figure_notes %}
<ul class="notes">{% for n in e.figure_notes %}<li>{{ n }}</li>{% endfor %}</ul>
{% endif %}
{% endfor %}
</section>
"""

SECTION = Section(name="figures", title="Figures", html=HTML, when="experiments")
