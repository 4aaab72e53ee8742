"""The declared public API (docs/plugins.md, "Public API") is what plugin authors are shown.

The public API is ``dpbench.__all__`` and the ``__all__`` of the public modules
(``dpbench._PUBLIC_MODULES``: ``dpbench.testing``, ``dpbench.analysis``, ``dpbench.audit``);
everything else is internal. The examples (every ``.py`` file under ``examples/``), the package
``dpbench new-plugin`` writes, and every ```` ```python ```` block of ``README.md``,
``docs/*.md`` and the examples' Markdown files must import nothing else, so that a plugin
written from them keeps working when internal modules move (commit dafba27 broke one). The
modules deprecated by that move still work, with a ``DeprecationWarning`` naming the new import.
"""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import dpbench
from dpbench.cli.scaffold import scaffold_plugin

ROOT = Path(__file__).resolve().parents[2]

#: Public module -> its public names.
PUBLIC: dict[str, frozenset[str]] = {
    name: frozenset(importlib.import_module(name).__all__)
    for name in ("dpbench", *dpbench._PUBLIC_MODULES)
}

_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _from_import(module: str, names: list[str]) -> list[str]:
    """What ``from module import names`` takes from outside the public API."""
    if module not in PUBLIC:
        return [f"{module} is internal"]
    return [f"{module}.{name} is not in {module}.__all__" for name in names
            if name != "*" and name not in PUBLIC[module] and f"{module}.{name}" not in PUBLIC]


def _chain(node: ast.Attribute) -> list[str] | None:
    """``a.b.c`` as ['a', 'b', 'c'], or None when the chain does not start at a name."""
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return [current.id, *reversed(parts)] if isinstance(current, ast.Name) else None


def _attribute(module: str, attributes: list[str]) -> str | None:
    """What ``module.a.b…`` (a public module bound to a name) reaches outside the public API."""
    for attribute in attributes:
        if f"{module}.{attribute}" in PUBLIC:
            module = f"{module}.{attribute}"
            continue
        if attribute in PUBLIC[module] or attribute.startswith("__"):
            return None
        return f"{module}.{attribute} is not in {module}.__all__"
    return None


def violations(source: str) -> list[tuple[int, str, str]]:
    """(line, statement, reason) for every use of a dpbench name outside the public API: an
    import of an internal module or of a name not in a public ``__all__``, and an attribute
    reached through a name bound to a dpbench module (``dpbench.core.registry.register``)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    bound: dict[str, str] = {}      # local name -> the public dpbench module it is bound to
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "dpbench":
                    continue
                if alias.name not in PUBLIC:
                    found.append((node.lineno, f"{alias.name} is internal"))
                elif alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound["dpbench"] = "dpbench"
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] == "dpbench":
            names = [a.name for a in node.names]
            found += [(node.lineno, reason) for reason in _from_import(node.module, names)]
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                          if f"{node.module}.{a.name}" in PUBLIC})
    inner = {id(n.value) for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _chain(node)
            if chain and chain[0] in bound:
                reason = _attribute(bound[chain[0]], chain[1:])
                if reason:
                    found.append((node.lineno, reason))
    return [(line, lines[line - 1].strip(), reason) for line, reason in sorted(found)]


def _check(label: str, source: str, first_line: int = 1) -> list[str]:
    """``label:line: `statement`: reason`` for every violation (a block that does not parse is
    one, too: the documentation's code must be Python)."""
    try:
        found = violations(source)
    except SyntaxError as exc:
        return [f"{label}:{first_line + (exc.lineno or 1) - 1}: does not parse: {exc.msg}"]
    return [f"{label}:{first_line + line - 1}: `{text}`: {reason}" for line, text, reason in found]


def python_blocks(path: Path) -> Iterator[tuple[int, str]]:
    """(first line, code) of every ```python block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    for match in _FENCE.finditer(text):
        yield text.count("\n", 0, match.start(1)) + 1, match.group(1)


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def test_examples_import_only_the_public_api() -> None:
    files = sorted((ROOT / "examples").rglob("*.py"))
    assert len(files) >= 10, files
    problems = [v for f in files for v in _check(_relative(f), f.read_text(encoding="utf-8"))]
    assert not problems, "examples/ import outside the public API:\n" + "\n".join(problems)


def test_scaffolded_plugin_imports_only_the_public_api(tmp_path: Path) -> None:
    root, written = scaffold_plugin("my_mechanism", tmp_path / "plugin")
    files = [f for f in written if f.suffix == ".py"]
    assert len(files) >= 3, written
    problems = [v for f in files
                for v in _check(f"scaffold:{f.relative_to(root)}", f.read_text(encoding="utf-8"))]
    assert not problems, ("dpbench/cli/scaffold.py writes imports outside the public API:\n"
                          + "\n".join(problems))


def test_documented_code_imports_only_the_public_api() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "examples").rglob("*.md"))]
    blocks = [(path, line, code) for path in docs for line, code in python_blocks(path)]
    assert len(blocks) >= 10, "fewer ```python blocks than expected: is the fence pattern right?"
    problems = [v for path, line, code in blocks for v in _check(_relative(path), code, line)]
    assert not problems, ("```python blocks use names outside the public API (docs/plugins.md, "
                          "'Public API'):\n" + "\n".join(problems))


@pytest.mark.parametrize("source, expected", [
    ("from dpbench.core.tags import get_tags", ["dpbench.core.tags is internal"]),
    ("import dpbench.store.cube", ["dpbench.store.cube is internal"]),
    ("from dpbench import Algorithm, Store", ["dpbench.Store is not in dpbench.__all__"]),
    ("from dpbench.testing import _AUDIT_N", ["dpbench.testing._AUDIT_N is not in"]),
    ("import dpbench\ndpbench.core.registry.register('algorithms', A)",
     ["dpbench.core is not in dpbench.__all__"]),
    ("import dpbench.analysis\ndpbench.analysis.rates.verdict(x)",
     ["dpbench.analysis.rates is not in dpbench.analysis.__all__"]),
    ("from dpbench import Algorithm, testing\nfrom dpbench.testing import check_algorithm\n"
     "import dpbench.analysis\nx = dpbench.analysis.fit_rates\ny = dpbench.Problem\n"
     "from .mechanism import core", []),
])
def test_the_checker_sees_internal_imports(source: str, expected: list[str]) -> None:
    found = [reason for _, _, reason in violations(source)]
    assert len(found) == len(expected), found
    for reason, start in zip(found, expected):
        assert reason.startswith(start), (reason, start)


def test_every_public_name_resolves() -> None:
    """Every name of every ``__all__`` is there, the ones imported on first use included."""
    for module, names in PUBLIC.items():
        mod = importlib.import_module(module)
        missing = sorted(n for n in names if not hasattr(mod, n))
        assert not missing, f"{module}.__all__ names what it lacks: {missing}"


# --- the modules deprecated by the reorganisation (dafba27) -------------------------------------

#: What each module exported before dafba27 (``git show dafba27^:dpbench/<name>.py``).
OLD_EXPORTS: dict[str, tuple[str, ...]] = {
    "dpbench.errors": ("DpbenchError", "UserInputError", "SuiteError", "StoreError",
                       "PluginError", "SchedulerLost", "NotApplicable", "CellTimeout",
                       "did_you_mean"),
    "dpbench.algorithm": ("PRIVACY_KINDS", "REQUIREMENTS", "Release", "check_privacy_args",
                          "Algorithm", "NotApplicable", "UserInputError", "Param", "Parametrized",
                          "PrivacyLedger", "Dataset", "Problem", "RateCard"),
    "dpbench.deadline": ("time_limit", "checkpoint", "grace_s", "hard_timeout_message",
                         "memory_message", "Killed", "limit_memory", "reset_child",
                         "run_isolated", "Prepare", "CellTimeout"),
}


@pytest.mark.parametrize("shim, name", [(s, n) for s, names in OLD_EXPORTS.items()
                                        for n in names])
def test_deprecated_import_works_and_warns(shim: str, name: str) -> None:
    module = importlib.import_module(shim)
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(shim)} is deprecated") as record:
        value = getattr(module, name)
    message = str(record[0].message)
    if name in dpbench.__all__:
        assert message.endswith(f"import {name} from dpbench"), message
        assert value is getattr(dpbench, name)
    else:  # an internal name: the warning says where it lives now
        home = re.search(r"now in (\S+),", message)
        assert home and getattr(importlib.import_module(home.group(1)), name) is value, message


def test_deprecated_from_import_statement_warns_at_the_caller() -> None:
    code = "from dpbench.errors import NotApplicable, UserInputError\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scope: dict[str, object] = {}
        exec(compile(code, "old_plugin.py", "exec"), scope)
    assert scope["NotApplicable"] is dpbench.NotApplicable
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, "old_plugin.py")] * 2
    assert "import NotApplicable from dpbench" in str(caught[0].message)


def test_deprecated_modules_know_no_other_names() -> None:
    for shim, names in OLD_EXPORTS.items():
        module = importlib.import_module(shim)
        assert set(names) <= set(module.__all__) == set(dir(module)), shim
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            getattr(module, "nope")


def test_plugins_md_lists_the_public_api() -> None:
    """docs/plugins.md's table row for ``dpbench`` names exactly ``dpbench.__all__``, and its
    deprecation policy the release that removes the shims."""
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `dpbench` |"))
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row)) - {"dpbench"}
    assert listed == PUBLIC["dpbench"], (
        f"docs/plugins.md, 'Public API': missing {sorted(PUBLIC['dpbench'] - listed)}, "
        f"not in dpbench.__all__ {sorted(listed - PUBLIC['dpbench'])}")
    assert f"until dpbench {dpbench._SHIMS_REMOVED_IN} they are shims" in text
