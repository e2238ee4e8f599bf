"""Import-cycle check for the ``moldau`` package.

Builds the import graph of every module under ``src/moldau`` with ``ast``: every ``import`` and ``from``
statement counts, including those under ``if TYPE_CHECKING:`` and inside functions, with relative imports
resolved. Finds the strongly connected components (Tarjan) and fails (exit 1, naming the modules of each
cycle) on any cycle anywhere in the package: there is no waiver list.

    python tools/check_imports.py [SRC_DIR] [--package moldau]

An edge ``a -> b`` means module ``a`` imports ``b``; ``from pkg import name`` adds ``pkg.name`` when that is
a module, else ``pkg``. Importing ``pkg.sub`` also runs ``pkg/__init__``, but that is not counted as an edge:
the cycles that hurt readability are the ones written in the source.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def module_name(root: Path, path: Path, package: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [package, *rel.parts] if rel.parts[0] != package else list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def discover(src: Path, package: str) -> dict[str, Path]:
    """module name -> file, for every ``.py`` under ``src/<package>``."""
    pkg_dir = src / package
    return {module_name(src, p, package): p for p in sorted(pkg_dir.rglob("*.py"))}


def _resolve_relative(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(mod: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``mod`` (file ``path``) imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def add(name: str) -> None:
        # the longest prefix that is one of our modules
        parts = name.split(".")
        while parts:
            cand = ".".join(parts)
            if cand in modules:
                out.add(cand)
                return
            parts.pop()

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = (_resolve_relative(mod, is_pkg, node.level, node.module) if node.level
                    else node.module or "")
            for alias in node.names:
                full = f"{base}.{alias.name}" if base else alias.name
                if full in modules:
                    out.add(full)
                else:
                    add(base)
    out.discard(mod)
    return out


def build_graph(src: Path, package: str) -> dict[str, set[str]]:
    files = discover(src, package)
    names = set(files)
    return {mod: imports_of(mod, path, names) for mod, path in files.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); returns the components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, succ = work[-1]
            if succ:
                nxt = succ.pop(0)
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps)


def problems(graph: dict[str, set[str]]) -> list[str]:
    """One message per import cycle of the graph (each a strongly connected component, modules sorted)."""
    return [f"import cycle: {' <-> '.join(comp)}" for comp in strongly_connected(graph)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default=str(Path(__file__).resolve().parent.parent / "src"))
    ap.add_argument("--package", default="moldau")
    args = ap.parse_args(argv)
    src = Path(args.src)
    if not (src / args.package).is_dir():
        print(f"check_imports: no package {args.package!r} under {src}", file=sys.stderr)
        return 2
    graph = build_graph(src, args.package)
    found = problems(graph)
    for msg in found:
        print(msg, file=sys.stderr)
    if found:
        return 1
    print(f"check_imports: {len(graph)} modules, no import cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
