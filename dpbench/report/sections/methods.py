"""Methods: what the numbers are (estimand, fit, bootstrap, predicted slope, exclusions, verdicts,
comparisons) with the settings the report ran with (``methods`` in the context). HTML only.

Explained at length in docs/analysis.md.
"""

from __future__ import annotations

from .section import Section

HTML = """\
<section id="methods">
<h2>7. Methods</h2>
<ul>
  <li><strong>Excess risk.</strong> Every cell records L̄(θ̂) − L̄(θ*), the excess of the average empirical loss (1/n)·Σℓ over a <em>certified</em> optimum θ* (the cube's <code>optimum_gap</code> bounds L̄(θ*) − min L̄). Rate cards state bounds on the same average scale (BST14's sum-scale bounds divided by n); their hidden constants are set to 1, so only slopes are compared, never levels.</li>
  <li><strong>Estimand.</strong> The mean excess over seeds at each grid point (aggregated before taking logs: the estimand is E[excess]; a mean of logs would be another estimand and undefined for non-positive Monte Carlo excesses).</li>
  <li><strong>Fitted slope.</strong> Ordinary least squares of log mean excess against log axis over the kept points. <strong>CI:</strong> {{ "%.0f" | format(methods.level * 100) }}% percentile bootstrap with {{ methods.n_resamples }} resamples, seeds resampled with replacement within each grid point (stratified), the slope refitted on each resample; resamples with a non-positive mean at some point are dropped. The bands in the figures are the same bootstrap's pointwise CI of the mean. The bootstrap is seeded (seed {{ methods.seed }} and the curve's position), so the report is reproducible.</li>
  <li><strong>Predicted slope.</strong> The rate card's local slope d log(bound)/d log(axis) at each grid point (multi-term bounds bend), averaged over the kept points. The theory exponent column is the card's leading polynomial exponent (logarithms ignored).</li>
  <li><strong>Empirical / bound ratio.</strong> The geometric mean of mean/bound over the kept points with a bootstrap CI; flat in the axis when theory holds up to a constant. The dashed theory line in a figure is bound × ratio: the bound rescaled by the fitted constant, passing through the geometric mean of the kept points.</li>
  <li><strong>Exclusions</strong> (shown as hollow markers, listed in the captions, never dropped silently): fewer than 2 seeds done; a mean excess ≤ 0; the capped regime, where the mean is at least {{ methods.cap_fraction }} × the trivial maximum L·D, or at least 0.5 × the excess of the data-independent output (the centre of C: what a release that ignores the data achieves), or the bound itself is at least L·D (the theorem predicts nothing there; BST14 §6.3); the optimisation floor, a mean below {{ methods.floor_factor | num }} × the certified optimum gap.</li>
  <li><strong>Verdicts</strong> (tolerance ±{{ methods.tolerance }} in exponent units): {% for k, v in methods.verdicts.items() %}<span class="verdict verdict-{{ k }}">{{ v }}</span>{% if not loop.last %}, {% endif %}{% endfor %}. <em>Consistent</em>: the whole CI lies inside predicted ± tolerance; <em>faster</em> / <em>slower</em>: the whole CI lies below / above that band; <em>invalid</em>: a capped point on the informative side of kept points (blow-up), a floor point before kept points (collapse) or a non-positive mean where the card predicts a positive excess; <em>inconclusive</em>: the CI straddles an edge of the band, fewer than {{ methods.min_points }} points or fewer than half of the grid kept, or no rate card. Error rates: at most {{ "%.1f" | format((1 - methods.level) / 2 * 100) }}% each way per row when the bootstrap CI has its nominal coverage.</li>
  <li><strong>Paired comparisons.</strong> At every (problem, grid point), every pair of algorithms is compared on the same data seeds (datasets depend only on problem, n, p and seed) with the Wilcoxon signed-rank test (zero differences split) on the per-seed differences of excess risk; at least 5 pairs are needed. p-values are Holm–Bonferroni adjusted over all comparisons of the experiment; significant means adjusted p &lt; {{ methods.alpha }}.</li>
  <li><strong>Crossovers</strong>: where one mean curve overtakes another, log-log interpolated between the grid points where the sign of the difference flips. <strong>Collapse check</strong>: log m = a + b·log n + c·log ε fitted over the (n, ε) grid, bootstrap CI of b − c; the excess collapses onto nε when that CI widened by ±{{ methods.collapse_tolerance }} contains 0. <strong>ε-convergence</strong>: the mean excess should not increase with ε (within 2 standard errors) and falls towards the non-private reference.</li>
</ul>
</section>
"""

SECTION = Section(name="methods", title="Methods", html=HTML, when="experiments")
