"""YAML read within bounds: its size before it is parsed, its nesting while it is parsed, and
what it expands to: an alias names a node again without copying it, so a few hundred bytes of
nested aliases (a "billion laughs") parse at once but become millions of nodes for whatever
walks or copies the result, and a file nested thousands deep ends any recursive reader in a
``RecursionError``. Every YAML file the toolkit reads (a user's ``conf/``, a run folder, a
model file, a level type's parameters) is measured here first."""

from __future__ import annotations

import os
from typing import Any

import yaml

from safety_rl_common.errors import UserError
from safety_rl_common.files import check_readable_file
from safety_rl_common.limits import YAML_DEPTH_LIMIT, YAML_NODE_LIMIT, YAML_SIZE_LIMIT


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


def nesting_depth(text: str | bytes, source: str) -> int:
    """Levels of mappings and lists ``text`` nests, read from the parser's events (the parser
    keeps its own stack; composing the nodes would recurse), refused past
    :data:`YAML_DEPTH_LIMIT` as soon as it gets there. YAML that does not parse ends the count
    where it breaks: the caller's loader reports it."""
    limit = YAML_DEPTH_LIMIT.get()
    depth = deepest = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > limit:
                    raise UserError(
                        f"{source}: its YAML nests deeper than {limit} levels; "
                        f"{YAML_DEPTH_LIMIT.raise_hint()}"
                    )
                deepest = max(deepest, depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass
    return deepest


def check_yaml_text(text: str | bytes, source: str) -> None:
    """Refuse YAML ``text`` (``source`` names it in the error) larger than
    :data:`YAML_SIZE_LIMIT`, nested deeper than :data:`YAML_DEPTH_LIMIT` or whose aliases
    expand it past :data:`YAML_NODE_LIMIT`; YAML that does not parse is left to the caller's
    loader."""
    size = len(text.encode("utf-8") if isinstance(text, str) else text)
    YAML_SIZE_LIMIT.check(-(-size // 1024), f"{source}: its YAML")
    nesting_depth(text, source)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError:
        return
    finally:
        loader.dispose()
    if node is not None:
        YAML_NODE_LIMIT.check(expanded_size(node), f"{source}: its YAML, aliases expanded,")


def read_yaml_text(path: str | os.PathLike) -> str:
    """The text of the YAML file at ``path`` once :func:`check_yaml_text` has measured it: a
    regular file (a FIFO would block) whose size is within :data:`YAML_SIZE_LIMIT` before a
    byte is read, in UTF-8."""
    check_readable_file(path)
    limit = YAML_SIZE_LIMIT.get()
    YAML_SIZE_LIMIT.check(-(-os.stat(path).st_size // 1024), f"{path}: its YAML")
    with open(path, "rb") as handle:
        data = handle.read((limit << 10) + 1)  # a file that grew since: still bounded
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text ({error})") from None
    check_yaml_text(text, str(path))
    return text


def load_yaml(text: str | bytes, source: str) -> Any:
    """``yaml.safe_load(text)`` once :func:`check_yaml_text` has measured it."""
    check_yaml_text(text, source)
    return yaml.safe_load(text)


def read_yaml(path: str | os.PathLike) -> Any:
    """``yaml.safe_load`` of the file at ``path`` once :func:`read_yaml_text` has read it."""
    return yaml.safe_load(read_yaml_text(path))
