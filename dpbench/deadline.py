"""Deprecated: the per-cell limits moved to :mod:`dpbench.core.time_limit` (cooperative) and
:mod:`dpbench.engine.isolation` (hard limits), both internal; a mechanism imports
:func:`~dpbench.checkpoint` (and :class:`~dpbench.CellTimeout`) from :mod:`dpbench`. Every name
still works, with a ``DeprecationWarning``, for one minor version (docs/plugins.md,
"Public API")."""

from __future__ import annotations

from . import _deprecated_module

#: The names this module exported before the reorganisation (commit dafba27), by new home.
_MOVED: dict[str, str] = {
    "checkpoint": "dpbench",
    "CellTimeout": "dpbench",
    "time_limit": "dpbench.core.time_limit",
    **{name: "dpbench.engine.isolation" for name in (
        "Killed", "Prepare", "grace_s", "hard_timeout_message", "limit_memory", "memory_message",
        "reset_child", "run_isolated")},
}

__all__ = sorted(_MOVED)
__getattr__, __dir__ = _deprecated_module(__name__, _MOVED)
