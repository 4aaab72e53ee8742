"""dpbench's public check harness, run against the example mechanism."""

from dpbench.testing import parametrize_with_checks

from dpbench_plugin_example import GaussianOutputPerturbation


@parametrize_with_checks([GaussianOutputPerturbation()])
def test_dpbench_compatible(algorithm, problem, check):
    check(algorithm, problem)
