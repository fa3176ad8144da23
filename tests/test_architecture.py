"""The architecture, checked on the real code: the layer contract written in pyproject.toml holds (import-linter),
no module imports itself back through others (grimp's import graph), nothing under the CLI reaches back up into
it (read from the import statements with ast, so a lazy import inside a function counts as much as one at the
top of a module), and every module says what it owns and reads in one sitting."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

import kenning

PACKAGE = Path(kenning.__file__).parent
ROOT = PACKAGE.parents[1]
BELOW_THE_CLI = ("daemon", "mcp", "commands")  # packages that the CLI calls and must not call it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every module an import statement in `path` names, `from X import Y` as X and X.Y
    (Y may be a submodule: `from kenning import cli`), relative imports resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _modules_under(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((PACKAGE / folder).rglob("*.py"))


def test_the_import_walk_sees_what_it_must() -> None:
    """The walk itself: it finds the CLI's own imports of the command layer, lazy ones included."""
    found = {name for _, name in _imports(PACKAGE / "cli.py")}
    assert "kenning.commands" in found
    assert "kenning.daemon.commands" in found  # imported inside main(), only for a routable command
    relative = {name for _, name in _imports(PACKAGE / "commands" / "__init__.py")}
    assert "kenning.errors" in relative


def test_no_module_under_daemon_or_mcp_imports_cli() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for path in _modules_under(*BELOW_THE_CLI)
        for line, name in _imports(path)
        if name == "kenning.cli" or name.startswith("kenning.cli.")
    ]
    assert not offenders, "\n".join(offenders)
    assert list(_modules_under("daemon")) and list(_modules_under("mcp")) and list(_modules_under("commands"))


def test_the_layer_contract_in_pyproject_holds() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "kept, 0 broken" in run.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    # An import under TYPE_CHECKING never runs: it names a type for an annotation, as engine/refresh.py names
    # the Engine whose methods it implements. The layer contract above still counts those.
    graph = grimp.build_graph("kenning", cache_dir=None, exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_every_module_says_what_it_owns_and_reads_in_one_sitting() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(PACKAGE.parent)
        if not ast.get_docstring(ast.parse(text)):
            problems.append(f"{name} has no module docstring")
        lines = text.count("\n")
        limit = 400 if path == PACKAGE / "cli.py" else 600
        if lines >= limit:
            problems.append(f"{name} has {lines} lines (under {limit} wanted)")
    assert not problems, "\n".join(problems)
