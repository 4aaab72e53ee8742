"""Declared parameter constraints: unions with null and with other constraints, error messages
that name the parameter and every allowed form, and identities that keep seed streams stable."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from dpbench.core.errors import UserInputError
from dpbench.core.params import Param, Parametrized, identity_params

STEPS = Param(None, kind="int", low=1, none="the public default", identity_of_none=0)
H = Param("auto", kind="str", choices=("auto",), alternatives=(Param(0.1, low=0.0, low_open=True),))


def test_none_is_allowed_only_when_declared() -> None:
    assert STEPS.validate("a", "steps", None) is None
    assert STEPS.validate("a", "steps", 7) == 7
    with pytest.raises(UserInputError, match=r"must be a number in \[0.0, inf\), got None"):
        Param(1.0, low=0.0).validate("a", "x", None)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True])
def test_union_with_none_names_every_allowed_form(bad: Any) -> None:
    with pytest.raises(UserInputError) as info:
        STEPS.validate("algorithm 'm'", "steps", bad)
    assert str(info.value) == ("algorithm 'm': parameter 'steps' must be an integer in [1, inf) "
                               f"or null (the public default), got {bad!r}")


def test_union_of_constraints() -> None:
    assert H.validate("a", "h", "auto") == "auto"
    assert H.validate("a", "h", 0.25) == 0.25
    with pytest.raises(UserInputError, match=r"must be one of 'auto' or a number in \(0.0, inf\)"):
        H.validate("a", "h", 0)
    with pytest.raises(UserInputError, match="got 'fast'"):
        H.validate("a", "h", "fast")


class _Plugin(Parametrized):
    name: ClassVar[str] = "plug"
    params: ClassVar[dict[str, Param]] = {"steps": STEPS, "h": H}


def test_values_are_stored_as_given_and_identities_keep_the_old_sentinel() -> None:
    plug = _Plugin()
    assert plug.get_params() == {"steps": None, "h": "auto"}
    # Seed streams and fingerprints see the sentinel that spelled the default before the union,
    # so cubes computed before stay bit-identical; an explicit value is its own identity.
    assert plug.identity_params() == {"steps": 0, "h": "auto"}
    assert _Plugin(steps=5).identity_params() == {"steps": 5, "h": "auto"}
    assert identity_params({"x": Param(None, none="d")}, {"x": None}) == {"x": None}


#: The parameters whose public default was spelled ``0`` before ``Param`` had unions.
FORMER_SENTINELS = [("algorithms", "exp_mech", "steps"), ("algorithms", "gibbs", "steps"),
                    ("algorithms", "rashomon", "steps"), ("algorithms", "iterated_exp_mech", "steps"),
                    ("algorithms", "localize", "steps"), ("algorithms", "localize", "step_scale"),
                    ("algorithms", "noisy_sgd", "steps"), ("problems", "lb_lin", "signal_count"),
                    ("problems", "lb_quad", "signal_count")]


@pytest.mark.parametrize("group, name, param", FORMER_SENTINELS)
def test_public_defaults_are_null_not_zero(group: str, name: str, param: str) -> None:
    from dpbench.core import registry

    cls = registry.get(group, name)
    assert cls().get_params()[param] is None
    assert cls().identity_params()[param] == 0   # the old sentinel: earlier cubes reproduce
    with pytest.raises(UserInputError, match=rf"parameter '{param}' must be .* or null \("):
        cls(**{param: 0})
