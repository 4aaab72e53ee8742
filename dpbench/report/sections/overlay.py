"""Mechanisms compared: per experiment and problem, every mechanism's mean excess risk along the
main axis on one log-log figure, with the bootstrap interval of each mean. HTML only.

The panels are built by :func:`dpbench.report.overview.overlay_panels` and drawn by
:class:`dpbench.report.figures.OverlayPanel`; the intervals are the rate figures' (docs/analysis.md,
"What is fitted").
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="overlay">
<h2>3. Mechanisms compared</h2>
<p>Per experiment and problem, the mean excess risk of every mechanism along the main axis (n when it is swept, else the first swept axis), the other axes at their first value as in the figures above, log-log; bands: the {{ "%.0f" | format(methods.level * 100) }}% bootstrap CI of each mean. Drawn where at least two mechanisms have a mean excess above round-off; the rate figures show the others with theory and seeds.</p>
{% for e in experiments %}
<h3 id="overlay-{{ e.name }}">{{ e.name }}</h3>
{% for fig in e.overlays %}
{% with figure_id = fig.anchor, figno = fig.title ~ "." %}
{% include "figure.html.j2" %}
{% endwith %}
{% endfor %}
{% if e.overlay_notes %}
<ul class="notes">{% for n in e.overlay_notes %}<li>{{ n }}</li>{% endfor %}</ul>
{% endif %}
{% endfor %}
</section>
"""

SECTION = Section(name="overlay", title="Mechanisms compared", html=HTML, when="experiments")
