"""YAML read with a bound on what it expands to: an alias names a node again without copying
it, so a few hundred bytes of nested aliases (a "billion laughs") parse at once but become
millions of nodes for whatever walks or copies the result. Every YAML file the toolkit reads
from a user, a run folder or a model file is measured here first."""

from __future__ import annotations

from typing import Any

import yaml

from safety_rl_common.limits import YAML_NODE_LIMIT


def expanded_size(node: yaml.Node) -> int:
    """Nodes of ``node``'s tree once every alias is replaced by a copy of what it names
    (counted without expanding: each distinct node once, its size remembered)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:  # iterative post-order: deep nesting cannot exhaust Python's stack
        current, children_done = stack.pop()
        if id(current) in sizes:
            continue
        children = _children(current)
        if children_done or not children:
            sizes[id(current)] = 1 + sum(sizes[id(child)] for child in children)
        else:
            stack.append((current, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(node)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_yaml_text(text: str | bytes, source: str) -> None:
    """Refuse YAML ``text`` whose aliases expand it past :data:`YAML_NODE_LIMIT` (``source``
    names it in the error); YAML that does not parse is left to the caller's loader."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except (yaml.YAMLError, RecursionError):
        return
    finally:
        loader.dispose()
    if node is not None:
        YAML_NODE_LIMIT.check(expanded_size(node), f"{source}: its YAML, aliases expanded,")


def load_yaml(text: str | bytes, source: str) -> Any:
    """``yaml.safe_load(text)`` once :func:`check_yaml_text` has measured it."""
    check_yaml_text(text, source)
    return yaml.safe_load(text)
