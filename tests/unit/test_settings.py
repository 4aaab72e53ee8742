"""The analysis settings own the analysis policy: every default of the analysis, the report and
``dpbench diff`` is a field of ``dpbench.analysis.settings.DEFAULT``, and the report's Methods
section states those values."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from dpbench.analysis import compare, diff, rates
from dpbench.analysis.settings import DEFAULT, AnalysisSettings
from dpbench.cli.main import _build_parser
from dpbench.config.suite import DEFAULT_EXPECT_TOLERANCE
from dpbench.report import build

#: (function, {parameter: settings field}) of every default taken from the settings.
DEFAULTS: list[tuple[Callable[..., Any], dict[str, str]]] = [
    (rates.fit_rates, {"level": "level", "n_resamples": "n_resamples", "seed": "seed",
                       "tolerance": "tolerance", "cap_fraction": "cap_fraction",
                       "floor_factor": "floor_factor"}),
    (rates.fit_curve, {"level": "level", "n_resamples": "n_resamples", "rng": "seed",
                       "tolerance": "tolerance", "cap_fraction": "cap_fraction",
                       "floor_factor": "floor_factor", "trivial_fraction": "trivial_fraction"}),
    (rates.slope_ci, {"level": "level", "n_resamples": "n_resamples", "rng": "seed"}),
    (rates.verdict, {"tolerance": "tolerance"}),
    (compare.paired_comparisons, {"alpha": "alpha"}),
    (compare.collapse_check, {"tolerance": "collapse_tolerance",
                              "n_resamples": "collapse_resamples", "seed": "seed"}),
    (diff.diff_cubes, {"alpha": "diff_alpha", "min_change": "diff_min_change", "level": "level",
                       "n_resamples": "n_resamples"}),
    (diff.diff_experiment, {"level": "level", "floor_factor": "floor_factor",
                            "n_resamples": "n_resamples", "seed": "seed", "n_flips": "n_flips"}),
    (diff.sign_flip_test, {"exact_max": "exact_max_cells", "n_flips": "n_flips"}),
    (diff.t_interval, {"level": "level"}),
    (build.report_context, {"n_resamples": "n_resamples"}),
]


@pytest.mark.parametrize("func, fields", DEFAULTS, ids=lambda v: getattr(v, "__name__", ""))
def test_function_defaults_are_the_settings(func: Callable[..., Any],
                                            fields: dict[str, str]) -> None:
    params = inspect.signature(func).parameters
    for param, name in fields.items():
        assert params[param].default == getattr(DEFAULT, name), (func.__name__, param)


def test_the_settings_are_frozen_and_documented() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.level = 0.9  # type: ignore[misc]
    assert DEFAULT == AnalysisSettings()
    assert DEFAULT.tolerance == DEFAULT_EXPECT_TOLERANCE  # the suite format owns the band
    source = inspect.getsource(AnalysisSettings)
    for f in dataclasses.fields(AnalysisSettings):
        assert f'{f.name}: ' in source and '"""' in source.split(f"{f.name}: ", 1)[1][:200], f.name


def test_methods_state_the_settings_the_report_ran_with() -> None:
    methods = build._methods(123)
    assert methods["n_resamples"] == 123
    for key in ("level", "tolerance", "min_points", "cap_fraction", "floor_factor", "alpha",
                "collapse_tolerance", "max_combos", "seed"):
        assert methods[key] == getattr(DEFAULT, key), key


def test_diff_options_default_to_the_settings() -> None:
    args = _build_parser().parse_args(["diff", "a", "b"])
    assert (str(args.alpha), str(args.min_change)) == (f"{DEFAULT.diff_alpha:g}",
                                                      f"{DEFAULT.diff_min_change:g}")
    assert (args.alpha.value(), args.min_change.value()) == (DEFAULT.diff_alpha,
                                                             DEFAULT.diff_min_change)
