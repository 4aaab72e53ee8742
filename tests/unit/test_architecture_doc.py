"""docs/architecture.md is a true map of the package.

Its "Modules" section lists every module of ``dpbench`` (package ``__init__.py`` files may be
left out) under the heading of its layer, and no module that no longer exists; its "Layers" table
states the layers of ``tests/unit/test_layers.py`` in order, what each may import (exactly what
that test enforces) and what each folder imports today.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from tests.unit.test_layers import GRAPH, LAYERS, PACKAGE, layer_of, module_name

DOC = PACKAGE.parent / "docs" / "architecture.md"
_ITEM = re.compile(r"^- `(dpbench/[\w/]+\.py)`")
_TICKED = re.compile(r"`([\w/.]+)`")


def _section(title: str) -> list[str]:
    """The lines of the ``## title`` section of the document."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    return lines[start + 1:end]


def listed_modules() -> Iterator[tuple[str, str]]:
    """(path, heading of its group) of every module line of the "Modules" section."""
    heading = ""
    for line in _section("Modules"):
        if line.startswith("### "):
            heading = line[4:]
        match = _ITEM.match(line)
        if match:
            yield match.group(1), heading


def package_modules() -> set[str]:
    """Every module of the package that the map must list: all but package ``__init__.py``."""
    root = PACKAGE.parent
    return {str(p.relative_to(root)) for p in PACKAGE.rglob("*.py")
            if p.name != "__init__.py" and "__pycache__" not in p.parts}


def test_every_module_is_on_the_map() -> None:
    listed = [path for path, _ in listed_modules()]
    missing = sorted(package_modules() - set(listed))
    assert not missing, (
        "docs/architecture.md, 'Modules', lacks these modules: add a line "
        "'- `dpbench/…/name.py`: what it is.' under its layer's heading:\n  "
        + "\n  ".join(missing))


def test_the_map_lists_no_module_that_is_gone() -> None:
    listed = [path for path, _ in listed_modules()]
    root = PACKAGE.parent
    gone = sorted(path for path in set(listed) if not (root / path).is_file())
    twice = sorted({path for path in listed if listed.count(path) > 1})
    assert not gone, ("docs/architecture.md, 'Modules', lists modules that no longer exist "
                      "(renamed or removed: correct or delete their lines):\n  "
                      + "\n  ".join(gone))
    assert not twice, f"docs/architecture.md, 'Modules', lists twice: {twice}"


def test_modules_sit_under_their_layer() -> None:
    names = [name for name, _ in LAYERS]
    wrong = []
    for path, heading in listed_modules():
        layer = heading.split(":")[0]
        if layer not in names or not (PACKAGE.parent / path).is_file():
            continue  # "The package root" mixes layers; a missing file is reported above
        module = module_name(PACKAGE.parent / path)
        if names[layer_of(module)] != layer:
            wrong.append(f"{path} is in layer {names[layer_of(module)]}, listed under {layer}")
    assert not wrong, "docs/architecture.md, 'Modules':\n  " + "\n  ".join(wrong)


def _layer_rows() -> list[list[str]]:
    rows = [line for line in _section("Layers") if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]


def _folder_imports() -> dict[str, set[str]]:
    """Top-level package or flat module -> the others its modules import at run time."""
    out: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        top = module.split(".")[0]
        out.setdefault(top, set()).update(t.split(".")[0] for t in targets)
        out[top].discard(top)
    return out


def test_the_layer_table_states_the_enforced_rule() -> None:
    rows = _layer_rows()
    names = [name for name, _ in LAYERS]
    assert [row[0] for row in rows] == names, "the table's layers are not LAYERS, in order"
    for i, (row, (name, prefixes)) in enumerate(zip(rows, LAYERS)):
        folders = {m.rstrip("/") for m in _TICKED.findall(row[1])}
        assert folders == set(prefixes), (name, sorted(folders), prefixes)
        may = [w.strip() for w in row[2].split(",")]
        assert may == names[:i + 1] or (row[2] == "every layer" and i == len(names) - 1), (
            f"'may import' of {name} should read: {', '.join(names[:i + 1])}")


def test_the_layer_table_states_the_imports_of_today() -> None:
    imports = _folder_imports()
    wrong = []
    for row in _layer_rows():
        stated: dict[str, set[str]] = {}
        for segment in row[3].split(";"):
            owners, _, targets = segment.partition(":")
            found = {t.strip() for t in targets.split(",")} - {"—", ""}
            for owner in _TICKED.findall(owners):
                stated[owner.rstrip("/")] = found
        for folder, found in stated.items():
            actual = imports.get(folder, set())
            if found != actual:
                order = sorted(actual, key=lambda t: (layer_of(t), t))
                wrong.append(f"{folder}: stated {sorted(found)}, "
                             f"imports {', '.join(order) or '—'}")
        missing = {p for _, prefixes in LAYERS if _ == row[0] for p in prefixes} - set(stated)
        wrong += [f"{folder}: not stated in its row" for folder in sorted(missing)
                  if folder in imports]
    assert not wrong, ("docs/architecture.md, 'Layers', column 'imports today':\n  "
                       + "\n  ".join(wrong))
