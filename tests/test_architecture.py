"""The floors of the package: a module imports only floors below its own (or its own package); within one
floor only the pairs listed in ``SAME_FLOOR``.

Bottom up: errors, text, io, qs, progress -> document, vocab, checkpoint, sharding, devices, hub ->
evaluation, data -> config -> models -> generation, training -> experiments -> summarizers -> pipeline -> cli,
serve. The CLI and the service share the pipeline, never each other's code: the service never imports the
CLI, and the CLI touches the service only in ``cli/serve.py``, the command that launches it. Library code logs
and never prints.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "synopsis"
FLOORS = {
    "errors": 0, "text": 0, "io": 0, "qs": 0, "progress": 0,
    "document": 1, "vocab": 1, "checkpoint": 1, "sharding": 1, "devices": 1, "hub": 1,
    "evaluation": 2, "data": 2,
    "config": 3,
    "models": 4,
    "generation": 5, "training": 5,
    "experiments": 6,
    "summarizers": 7,
    "pipeline": 8,
    "cli": 9, "serve": 9,
}  # fmt: skip
#: The imports within one floor that are allowed, each with why; any other same-floor import is an error
#: (``cli`` and ``serve`` share a floor and never import each other, but for the launcher).
SAME_FLOOR = {
    ("io", "errors"): "every module raises the typed errors; errors imports nothing",
    ("qs", "errors"): "every module raises the typed errors; errors imports nothing",
    ("devices", "sharding"): "under a launch of several processes each takes its own GPU (LOCAL_RANK)",
    ("training", "generation"): "the pointer-generator trainer decodes its dev set with the beam search",
}
LAUNCHER = Path("cli") / "serve.py"  # `synopsis serve` starts the service: the one allowed crossing


def _modules() -> list[tuple[str, ast.Module, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.name in ("__init__.py", "__main__.py") and len(relative.parts) == 1:
            continue  # the package's own re-exports, and `python -m synopsis` (the CLI's entry point)
        out.append((relative.with_suffix("").parts[0], ast.parse(path.read_text(encoding="utf-8")), relative))
    return out


def _imported_packages(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("synopsis."):
            names.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names if a.name.startswith("synopsis."))
    return names


def test_every_package_has_a_floor() -> None:
    assert {package for package, _, _ in _modules()} <= set(FLOORS)


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_imports_go_down_only(package: str) -> None:
    bad = set()
    for owner, tree, relative in _modules():
        if owner != package:
            continue
        for imported in _imported_packages(tree) - {owner}:
            launcher = relative == LAUNCHER and imported == "serve"
            same = FLOORS[imported] == FLOORS[owner] and (owner, imported) not in SAME_FLOOR and not launcher
            if FLOORS[imported] > FLOORS[owner] or same:
                bad.add(imported)
    assert not bad, f"synopsis.{package} (floor {FLOORS[package]}) imports {sorted(bad)}"


def test_the_allowed_same_floor_pairs_are_on_one_floor_and_used() -> None:
    used = {(owner, imported) for owner, tree, _ in _modules() for imported in _imported_packages(tree)}
    for owner, imported in SAME_FLOOR:
        assert FLOORS[owner] == FLOORS[imported] and (owner, imported) in used, (owner, imported)


def test_library_code_never_prints() -> None:
    offenders = []
    for owner, tree, _ in _modules():
        if owner in ("cli", "serve"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{owner}:{node.lineno}")
    assert not offenders


def test_the_architecture_page_names_modules_that_exist() -> None:
    """docs/architecture.md is the map of the code: every module or package it names must be there."""
    root = PACKAGE.parents[1]
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+(?:\.py|/))`", page))
    missing = [
        name
        for name in sorted(named)
        if not (root / name).exists()
        and not (PACKAGE / name).exists()
        and not any((PACKAGE / package / name).exists() for package in ("models",))
    ]
    assert named and not missing, f"docs/architecture.md names {missing}, which do not exist"


def _module_imports(tree: ast.AST, modules: Iterable[str]) -> set[str]:
    """The synopsis modules a module imports when it is loaded or type-checked: its top-level imports and
    those under ``if TYPE_CHECKING:`` (or any other block), not those inside functions (lazy ones).
    ``from package import name``: the submodule ``package.name`` when there is one, else the package."""
    names = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("synopsis."):
            names |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                      for a in node.names}  # fmt: skip
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.startswith("synopsis.")}
        else:
            names |= _module_imports(node, modules)
    return names


def test_no_import_cycle_even_under_type_checking() -> None:
    """A cycle under ``TYPE_CHECKING`` runs nowhere but says that two modules each need the other: one
    of them owns what the other imports (issue 49: ``copy_attention`` and ``pointer_generator``)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("synopsis", *path.relative_to(PACKAGE).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        imported = _module_imports(ast.parse(path.read_text(encoding="utf-8")), modules)
        graph[name] = {i for i in imported if i in modules and i != name}
    done: set[str] = set()

    def cycle_from(name: str, trail: list[str]) -> list[str] | None:
        if name in trail:
            return [*trail[trail.index(name) :], name]
        if name in done:
            return None
        for imported in sorted(graph[name]):
            found = cycle_from(imported, [*trail, name])
            if found:
                return found
        done.add(name)
        return None

    cycles = [c for name in sorted(graph) if (c := cycle_from(name, []))]
    assert not cycles, " -> ".join(cycles[0])


#: Issue 59: names that said two things, each now defined once, where it belongs (module, relative to the
#: package): the transformer's encoded source, the runner's typed request, the one document parser, the
#: device resolver (out of sharding.py) and the method tables' names.
ONE_DEFINITION = {
    "SourceEncoding": "models/inputs.py",
    "SummarizeRequest": "pipeline/request.py",
    "parse_document": "data/readers/__init__.py",
    "resolve_device": "devices.py",
    "check_device": "devices.py",
    "compute_device": "devices.py",
}


def test_a_name_that_said_two_things_is_defined_once() -> None:
    defined: dict[str, list[str]] = {name: [] for name in ONE_DEFINITION}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else []
            if isinstance(node, ast.Assign):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            for name in names:
                if name in defined:
                    defined[name].append(path.relative_to(PACKAGE).as_posix())
    assert defined == {name: [module] for name, module in ONE_DEFINITION.items()}
