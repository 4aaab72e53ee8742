"""Reading configuration files: the one bounded, safe YAML loader of suites (with their audits,
:mod:`dpbench.config.suite`) and cluster profiles (:mod:`dpbench.config.cluster`).

A configuration file is a few KB in practice; what it may expand to is bounded
(docs/reliability.md, 'Size limits'): its size (:data:`MAX_CONFIG_CHARS`), the number of YAML
aliases (:data:`MAX_YAML_ALIASES`) and the number of values once every alias is expanded
(:data:`MAX_YAML_VALUES`: "billion laughs", or an alias that refers to the node it is in). Only
YAML's safe tags are read. :func:`read_config` and :func:`load_yaml` raise
:class:`ConfigTextError` with the one message each caller reports in its own error type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.files import NotReadable, read_regular
from .validation import short

#: Bounds on what a configuration file (a suite, a cluster profile; a few KB in practice) may
#: expand to: its size, the number of YAML aliases, and the number of values once every alias is
#: expanded ("billion laughs", or an alias that refers to the node it is in).
MAX_CONFIG_CHARS = 1_000_000
MAX_YAML_ALIASES = 100
MAX_YAML_VALUES = 100_000


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses more than :data:`MAX_YAML_ALIASES` aliases."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_YAML_ALIASES} YAML aliases (*name)")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A key given twice in one mapping is an error naming both lines (YAML would keep the
        last silently: two ``root_seed``s). Keys merged in with ``<<`` may be overridden."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                        key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.setdefault(key, line)
                except TypeError:  # an unhashable key: the constructor reports it
                    continue
                if first != line:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {short(str(key), 60)} at line {line} "
                        f"(first at line {first}); give each key once", key_node.start_mark)
        return super().construct_mapping(node, deep)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        """A value whose explicit tag cannot read it (``!!int x``, ``!!timestamp 1``,
        ``!!bool maybe``) is a YAML error naming the line, not a crash of the constructor."""
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001 (SafeLoader's constructors raise anything)
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {short(node.value, 60)} as {node.tag} "
                f"({type(exc).__name__})", node.start_mark) from None


class SuiteLoader(BoundedLoader):
    """SafeLoader that also reads ``1e-6`` (no dot) as a float, as users write it, and refuses
    more than :data:`MAX_YAML_ALIASES` aliases."""


SuiteLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass(frozen=True)
class ConfigKind:
    """One kind of configuration file: how its errors name it, and the loader that reads it."""

    #: The file as a read error names it (``cannot read the suite file``).
    title: str
    #: The file as the other errors name it (``the suite is N characters long``).
    noun: str
    #: What the "expands to more than N values" error adds: the likely cause and the remedy.
    expansion_hint: str
    loader: type[BoundedLoader] = BoundedLoader


class ConfigTextError(ValueError):
    """A configuration file that cannot be read or loaded; the message names no file (the caller
    raises its own error type with the file's name)."""


#: Most bytes read from a configuration file: its character limit in UTF-8's widest encoding.
MAX_CONFIG_BYTES = 4 * MAX_CONFIG_CHARS


def read_config(path: Path, kind: ConfigKind) -> str:
    """The UTF-8 text of a configuration file (a regular file, read with a size limit:
    :func:`dpbench.core.files.read_regular`)."""
    try:
        data = read_regular(path, MAX_CONFIG_BYTES, kind.noun)
    except OSError as exc:
        raise ConfigTextError(f"cannot read the {kind.title}: {exc.strerror or exc}") from None
    except NotReadable as exc:
        raise ConfigTextError(str(exc)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigTextError(f"not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset "
                              f"{exc.start}; save the {kind.noun} as UTF-8") from None


def expanded_size_ok(raw: Any, limit: int = MAX_YAML_VALUES) -> bool:
    """Whether ``raw`` has at most ``limit`` values with every shared (aliased) node counted once
    per use; stops counting at the limit (so a self-referring node is too large, not a hang)."""
    count, stack = 0, [raw]
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            return False
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


def load_yaml(text: str, kind: ConfigKind) -> Any:
    """The value of a configuration file's text, within the bounds above."""
    if len(text) > MAX_CONFIG_CHARS:
        raise ConfigTextError(f"the {kind.noun} is {len(text)} characters long; at most "
                              f"{MAX_CONFIG_CHARS} are allowed")
    try:
        raw = yaml.load(text, Loader=kind.loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ConfigTextError(f"malformed YAML: {str(exc)[:500]}") from None
    except RecursionError:
        raise ConfigTextError("malformed YAML: nested too deeply") from None
    if not expanded_size_ok(raw):
        raise ConfigTextError(f"the {kind.noun} expands to more than {MAX_YAML_VALUES} values "
                              f"{kind.expansion_hint}")
    return raw
