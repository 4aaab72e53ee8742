"""Deprecated: the mechanism contract moved to :mod:`dpbench.core.algorithm` (internal); import
:class:`~dpbench.Algorithm` and :class:`~dpbench.Release` from :mod:`dpbench`. Every name still
works, with a ``DeprecationWarning``, for one minor version (docs/plugins.md, "Public API")."""

from __future__ import annotations

from . import _deprecated_module

#: The names this module exported before the reorganisation (commit dafba27), by new home: its
#: own definitions and the public names it imported.
_MOVED: dict[str, str] = {
    **{name: "dpbench" for name in (
        "Algorithm", "Dataset", "NotApplicable", "Param", "PrivacyLedger", "Problem", "RateCard",
        "Release", "UserInputError")},
    **{name: "dpbench.core.algorithm" for name in (
        "PRIVACY_KINDS", "REQUIREMENTS", "check_privacy_args")},
    "Parametrized": "dpbench.core.params",
}

__all__ = sorted(_MOVED)
__getattr__, __dir__ = _deprecated_module(__name__, _MOVED)
