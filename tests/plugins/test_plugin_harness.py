"""The public check harness on every registered mechanism, with the settings it declares
(``Algorithm.check_settings``): a mechanism registered with dpbench runs the same checks a
third-party plugin author runs with ``dpbench.testing.check_algorithm``."""

from __future__ import annotations

import pytest

from dpbench.core import registry
from dpbench.testing import ALGORITHM_CHECKS, check_case

#: Checks that run the mechanism thousands of times: outside the fast development loop.
STATISTICAL = {"check_empirical_privacy", "check_epsilon_limit", "check_rate_smoke"}
CASES = []
for _name, _cls in sorted(registry.available("algorithms").items()):
    if not _cls.__module__.startswith("dpbench."):
        continue  # an example package's test registers its classes; it runs their harness itself
    _case = check_case(_cls)
    for _check in ALGORITHM_CHECKS:
        marks = ([pytest.mark.skip(reason=f"{_name}: {_case.skip[_check.__name__]}")]
                 if _check.__name__ in _case.skip else [])
        if _check.__name__ in STATISTICAL:
            marks.append(pytest.mark.slow)
        CASES.append(pytest.param(_case, _check, id=f"{_name}-{_check.__name__}", marks=marks))


@pytest.mark.parametrize("case, check", CASES)
def test_registered_mechanism_passes_the_harness(case, check) -> None:
    case.run(check)
