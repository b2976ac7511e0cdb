"""The import graph of ``safelife_rl`` (every import, those inside functions included, as grimp
finds them): each module lives on one floor, no floor imports one above it (a back-arrow) and no
modules import each other round a circle. The floors are import-linter's layers contract in
``pyproject.toml``; this counts what the contract only passes or fails.

``python -m tests.packages.test_layers`` prints the counts (floors, modules per floor, imports,
back-arrows, circles).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "safelife_rl"
#: Modules that stand beside the floors: the package's entry (lazy public names, ``python -m``)
#: and its Hydra configs (YAML files, whose folders are packages only to be found).
OUTSIDE = [PACKAGE, f"{PACKAGE}.__main__", f"{PACKAGE}.conf"]


def floors() -> list[str]:
    """The layers contract's floors, top first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [contract] = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and c["name"].startswith(f"{PACKAGE} floors")
    ]
    return contract["layers"]


def floor_of(module: str, layers: list[str]) -> int | None:
    """The index of the first of ``layers`` (packages) that holds ``module``, None if none
    does."""
    for i, layer in enumerate(layers):
        if module == layer or module.startswith(layer + "."):
            return i
    return None


def back_arrows(graph: grimp.ImportGraph, layers: list[str]) -> list[tuple[str, str]]:
    """Imports of a module on a higher floor (``layers`` top first) than the importer's."""
    arrows = []
    for importer in sorted(graph.modules):
        low = floor_of(importer, layers)
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            high = floor_of(imported, layers)
            if low is not None and high is not None and high < low:
                arrows.append((importer, imported))
    return arrows


def circles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """The groups of two or more of ``modules`` that import each other round a circle (the
    strongly connected components of the import graph, by Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph.find_modules_directly_imported_by(module) & modules):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.append(other)
                if other == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return found


def package_graph() -> tuple[grimp.ImportGraph, set[str]]:
    graph = grimp.build_graph(PACKAGE)
    own = {m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + ".")}
    return graph, own


def report() -> dict:
    """The counts of the floors of ``safelife_rl``."""
    graph, own = package_graph()
    layers = floors()
    per_floor = {
        layer: sum(floor_of(m, layers) == i for m in own) for i, layer in enumerate(layers)
    }
    imports = sum(len(graph.find_modules_directly_imported_by(m) & own) for m in own)
    return {
        "floors": len(layers),
        "modules": per_floor,
        "imports": imports,
        "back_arrows": back_arrows(graph, layers),
        "circles": circles(graph, own),
    }


def test_every_module_is_on_a_floor():
    graph, own = package_graph()
    layers = floors()
    beside = [m for m in own if m == PACKAGE or floor_of(m, OUTSIDE[1:]) is not None]
    homeless = sorted(m for m in own if floor_of(m, layers) is None and m not in beside)
    assert homeless == []


def test_no_back_arrows_and_no_circles():
    counts = report()
    assert counts["floors"] == 5 and all(counts["modules"].values())
    assert counts["back_arrows"] == []
    assert counts["circles"] == []


def test_the_counts_find_a_back_arrow_and_a_circle():
    """A hand-made graph: top > bottom, with bottom.b importing top.a and a circle c <-> d."""
    graph = grimp.ImportGraph()
    for module in ("p", "p.top", "p.top.a", "p.bottom", "p.bottom.b", "p.bottom.c", "p.bottom.d"):
        graph.add_module(module)
    graph.add_import(importer="p.top.a", imported="p.bottom.b")
    graph.add_import(importer="p.bottom.b", imported="p.top.a")
    graph.add_import(importer="p.bottom.c", imported="p.bottom.d")
    graph.add_import(importer="p.bottom.d", imported="p.bottom.c")
    layers = ["p.top", "p.bottom"]
    assert back_arrows(graph, layers) == [("p.bottom.b", "p.top.a")]
    modules = set(graph.modules)
    assert circles(graph, modules) == [["p.bottom.b", "p.top.a"], ["p.bottom.c", "p.bottom.d"]]
    graph.remove_import(importer="p.bottom.b", imported="p.top.a")
    assert back_arrows(graph, layers) == [] and circles(graph, modules) == [
        ["p.bottom.c", "p.bottom.d"]
    ]


def apps_contract_kept(planted: tuple[str, str] | None = None) -> bool:
    """Whether ``pyproject.toml``'s contract "apps over the core" of drest and extended_envs
    holds on their real import graph, with ``planted`` (importer, imported) added."""
    from importlinter import configuration
    from importlinter.contracts.forbidden import ForbiddenContract

    configuration.configure()  # import-linter's settings (its timer), as lint-imports sets them
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["name"].endswith("apps over the core")]
    packages = ["drest", "extended_envs"]
    graph = grimp.build_graph(*packages, include_external_packages=True)
    if planted is not None:
        graph.add_import(importer=planted[0], imported=planted[1])
    check = ForbiddenContract(
        name=contract["name"],
        session_options={"root_packages": packages, "include_external_packages": True},
        contract_options={k: v for k, v in contract.items() if k not in ("name", "type")},
    )
    return check.check(graph, verbose=False).kept


def test_drest_and_extended_envs_keep_their_commands_above_their_core():
    """The contract holds, and fails on a core module, old or new, that imports a command."""
    assert apps_contract_kept()
    assert not apps_contract_kept(("drest.dynamics", "drest.apps.train"))
    assert not apps_contract_kept(("extended_envs.combination", "extended_envs.apps.benchmark"))


if __name__ == "__main__":
    counts = report()
    print(
        f"{PACKAGE}: {counts['floors']} floors, {sum(counts['modules'].values())} modules on "
        f"them, {counts['imports']} imports between its modules"
    )
    for layer, n in counts["modules"].items():
        print(f"  {layer}: {n} modules")
    print(f"back-arrows: {len(counts['back_arrows'])}, circles: {len(counts['circles'])}")
