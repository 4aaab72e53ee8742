"""Deprecated: the exception types moved to :mod:`dpbench.core.errors` (internal); import them
from :mod:`dpbench`. Every name still works, with a ``DeprecationWarning``, for one minor version
(docs/plugins.md, "Public API")."""

from __future__ import annotations

from . import _deprecated_module

#: The names this module exported before the reorganisation (commit dafba27), by new home.
_MOVED: dict[str, str] = {
    **{name: "dpbench" for name in (
        "CellTimeout", "DpbenchError", "NotApplicable", "PluginError", "SchedulerLost",
        "StoreError", "SuiteError", "UserInputError")},
    "did_you_mean": "dpbench.core.errors",
}

__all__ = sorted(_MOVED)
__getattr__, __dir__ = _deprecated_module(__name__, _MOVED)
