"""The package's layers: imports point only downward (docs/architecture.md, "Layers").

Every module of ``dpbench`` belongs to one layer below. A module may import modules of its own
layer or of lower layers, never of a higher one; imports inside functions count too, and so do
imports under ``if TYPE_CHECKING:`` (they never run, but a type a lower layer names must live in
that layer or below: move it down, or name a Protocol of the lower layer). The module graph of the
imports that run must also be acyclic, so that no cycle can hide behind a function-local import
(``TYPE_CHECKING`` imports within a layer may close a cycle: they never run).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dpbench"

#: Deprecated modules kept for one minor version after they moved (docs/plugins.md, "Public
#: API"): they sit flat in ``dpbench/`` where plugins imported them, and re-export lazily.
SHIMS: tuple[str, ...] = ("algorithm", "deadline", "errors")

#: (layer, module prefixes), lowest first. A module takes the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("_version", "privacy", "theory")),
    ("core", ("core",)),
    # The store knows no plugin and no suite: it writes the records configuration builds.
    ("store", ("store",)),
    ("numerics", ("numerics",)),
    ("plugins", ("algorithms", "problems", "datasets")),
    ("configuration", ("config",)),
    ("engine", ("engine",)),
    ("analysis", ("analysis",)),
    ("audit", ("audit",)),
    ("report", ("report",)),
    ("interface", ("cli", "testing", "__main__", *SHIMS)),
)
RANK = {prefix: i for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in RANK:
            return RANK[prefix]
    raise AssertionError(f"dpbench.{module} belongs to no layer: add it to LAYERS in {__file__}")


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def _target(node: ast.ImportFrom | ast.Import, package: str) -> list[str]:
    """The dpbench modules (relative to the package) one import statement names."""
    out: list[str] = []
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".") if package else []
            base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join([*base, *([node.module] if node.module else [])])
        elif node.module and (node.module == "dpbench" or node.module.startswith("dpbench.")):
            target = node.module[len("dpbench."):] if node.module != "dpbench" else ""
        else:
            return out
        for alias in node.names:
            full = f"{target}.{alias.name}" if target else alias.name
            out.append(full if full in MODULES else target)
    else:
        out.extend(alias.name[len("dpbench."):] for alias in node.names
                   if alias.name.startswith("dpbench."))
    return out


def module_imports(module: str) -> tuple[set[str], set[str]]:
    """The dpbench modules ``module`` imports (relative to the package): (at run time, under
    ``if TYPE_CHECKING:`` only)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = _type_checking_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    runtime: set[str] = set()
    typing: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ImportFrom, ast.Import)):
            (typing if node.lineno in typing_only else runtime).update(_target(node, package))
    for found in (runtime, typing):
        found.discard(module)
        found.discard("")  # the package itself: its __init__ is the public API facade, tested below
    return runtime, typing - runtime


def imports_of(module: str) -> set[str]:
    """The dpbench modules ``module`` imports at run time (relative to the package)."""
    return module_imports(module)[0]


GRAPH = {m: imports_of(m) for m in MODULES if m}
#: The imports under ``if TYPE_CHECKING:`` (never run, so outside the acyclicity test).
TYPING_GRAPH = {m: module_imports(m)[1] for m in MODULES if m}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_downward(module: str) -> None:
    mine = layer_of(module)
    upward = sorted(f"dpbench.{t} ({LAYERS[layer_of(t)][0]})" for t in GRAPH[module]
                    if layer_of(t) > mine)
    upward += sorted(f"dpbench.{t} ({LAYERS[layer_of(t)][0]}; under TYPE_CHECKING: move the type "
                     "down, or name a Protocol of this layer)" for t in TYPING_GRAPH[module]
                     if layer_of(t) > mine)
    assert not upward, (f"dpbench.{module} ({LAYERS[mine][0]}) imports upward: "
                        f"{', '.join(upward)}")


def test_module_graph_is_acyclic() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(GRAPH.get(m, ())):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The contract can fail: an upward import planted in a copy of a module is reported."""
    src = MODULES["core.schema"].read_text(encoding="utf-8")
    planted = "core._planted"
    MODULES[planted] = tmp_path / "_planted.py"
    try:
        MODULES[planted].write_text(src + "\n\ndef _f():\n    from ..engine.runner import run_suite\n")
        found = imports_of(planted)
        assert "engine.runner" in found and layer_of("engine.runner") > layer_of(planted)
    finally:
        del MODULES[planted]


def test_the_checker_sees_an_upward_type_checking_import(tmp_path: Path) -> None:
    """An upward import under ``if TYPE_CHECKING:`` (the shape of the old ``LossKernel`` circle,
    core naming a numerics type) is reported too, as typing-only."""
    planted = "core._planted_typing"
    MODULES[planted] = tmp_path / "_planted_typing.py"
    try:
        MODULES[planted].write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                    "    from ..numerics.kernels import resolve_kernel\n"
                                    "    from .problem import Problem\n")
        runtime, typing = module_imports(planted)
        assert not runtime and typing == {"numerics.kernels", "core.problem"}
        assert layer_of("numerics.kernels") > layer_of(planted)
    finally:
        del MODULES[planted]


def test_import_dpbench_loads_the_plugin_api_only() -> None:
    code = ("import sys, dpbench; heavy = [m for m in ('xarray', 'pandas', 'scipy', 'dask', "
            "'distributed', 'zarr', 'dp_accounting', 'numba', 'yaml') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import dpbench loads {out.stdout.strip()}"


_COMMAND_IMPORTS = """
import sys
from dpbench.cli.main import main
from dpbench.core import registry
suite, store = sys.argv[1], sys.argv[2]
main(["run", suite, "--store", store, "--quiet", "--workers", "0"])
for m in [m for m in sys.modules if m.startswith(("dpbench.algorithms.", "dpbench.problems."))]:
    del sys.modules[m]
registry._cache.clear()
before = set(sys.modules)
assert main(["run", suite, "--store", store, "--quiet", "--workers", "0"]) == 0  # a resume
resume = set(sys.modules) - before
assert main(["status", store]) == 0
print("RESUME", *sorted(m for m in resume if m.startswith("dpbench.algorithms.")
                         or m.split(".")[0] in ("dp_accounting", "xarray", "pandas")))
"""


def test_commands_import_only_what_the_suite_names(tmp_path: Path) -> None:
    """Plugins load by name (issue 17): a resume of a finished one-mechanism store imports that
    mechanism's module only, and neither dp-accounting (~0.8 s) nor xarray/pandas (~0.2 s);
    ``dpbench status`` imports no xarray either."""
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nseeds: 1\nexperiments:\n  - name: e\n    problems: [{problem: "
                     "lb_quad}]\n    algorithms: [{algorithm: nonprivate_erm}]\n"
                     "    grid: {n: [8], p: [2], epsilon: [1.0]}\n")
    code = _COMMAND_IMPORTS
    out = subprocess.run([sys.executable, "-c", code, str(suite), str(tmp_path / "s.zarr")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESUME"))
    assert line.split()[1:] == ["dpbench.algorithms.nonprivate"], line
    status = subprocess.run(
        [sys.executable, "-c", "import sys; from dpbench.cli.main import main; "
         f"main(['status', {str(tmp_path / 's.zarr')!r}]); "
         "print([m for m in ('xarray', 'pandas', 'dp_accounting') if m in sys.modules])"],
        capture_output=True, text=True, check=True)
    assert status.stdout.strip().splitlines()[-1] == "[]", status.stdout


def test_one_layer_per_folder() -> None:
    """Layers are top-level folders: no dotted prefix in the table, and no module sits flat in
    ``dpbench/`` except the facade, ``__main__``, the version and the deprecated shims."""
    assert all("." not in prefix for _, prefixes in LAYERS for prefix in prefixes)
    allowed = {"__init__.py", "__main__.py", "_version.py", *(f"{s}.py" for s in SHIMS)}
    flat = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in allowed)
    assert not flat, f"modules outside a layer folder: {', '.join(flat)}"
