"""billing's modules import each other one way: no cycles, so each can be read (and tested) before its users."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "billing"


def imports_of(path: Path) -> set[str]:
    """The billing modules a file imports anywhere in it, function bodies included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"billing.{a.name}" for a in node.names] if node.module == "billing" else [node.module]
        found |= {name.split(".")[1] for name in names if name.startswith("billing.")}
    return found


def test_no_import_cycles():
    graph = {path.stem: imports_of(path) for path in PACKAGE.glob("*.py")}
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        for imported in sorted(graph.get(module, ())):
            if imported in path:
                cycles.append(" -> ".join(path[path.index(imported):] + [imported]))
            elif imported not in done:
                visit(imported, path + [imported])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(cycles)
