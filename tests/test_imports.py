"""billing's modules import each other one way: no cycles, so each can be read (and tested) before its users."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "billing"


def module_name(path: Path) -> str:
    """`billing.collect.usage` for billing/collect/usage.py; a package by its own name."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py") if "migrations" not in path.parts}


def imports_of(path: Path) -> set[str]:
    """The billing modules a file imports anywhere in it, function bodies included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
            names = [name if name in MODULES else node.module for name in names]
        found |= {name for name in names if name in MODULES}
    return found


def test_no_import_cycles():
    graph = {module: imports_of(path) for module, path in MODULES.items()}
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


STAGES = ["collect", "directory", "charge", "ledger", "publish", "notify", "web", "jobs"]


def stage_of(module: str) -> int:
    """A stage's place in the night's order; the foundations at the top of the package come before all."""
    parts = module.split(".")
    return STAGES.index(parts[1]) + 1 if len(parts) > 2 and parts[1] in STAGES else 0


def test_no_import_runs_up_the_stages():
    """A stage reads what earlier stages hand it and never reaches into a later one (docs/architecture.md)."""
    upward = [
        f"{module} imports {imported}"
        for module, path in MODULES.items() if module != "billing.cli"
        for imported in sorted(imports_of(path))
        if stage_of(imported) > stage_of(module)
    ]
    assert not upward, "imports that run up the stages: " + "; ".join(upward)


# what a module outside billing/ledger/ may take from SQLAlchemy: handles it passes on, never a query it builds
SQLALCHEMY_HANDLES = {"Engine", "Connection"}


def test_the_ledger_has_one_door():
    """Every read and write of the ledger's tables goes through billing/ledger/ (docs/architecture.md): no module
    outside it imports the tables or builds a query."""
    doors = []
    for module, path in MODULES.items():
        if module.startswith("billing.ledger"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {alias.name for alias in node.names}
                if node.module == "billing.ledger.tables" or (node.module == "billing.ledger" and "tables" in names):
                    doors.append(f"{module} imports billing.ledger.tables")
                elif node.module.split(".")[0] == "sqlalchemy" and names - SQLALCHEMY_HANDLES:
                    doors.append(f"{module} imports {', '.join(sorted(names - SQLALCHEMY_HANDLES))} from {node.module}")
            elif isinstance(node, ast.Import):
                doors += [f"{module} imports {alias.name}" for alias in node.names
                          if alias.name == "billing.ledger.tables" or alias.name.split(".")[0] == "sqlalchemy"]
    assert not doors, "the ledger read or written outside billing/ledger/: " + "; ".join(doors)


# what goes into an answer: the ledger's readers, budgets, statements and the day's view model
ASSEMBLY = {"billing.ledger.read", "billing.publish.budgets", "billing.publish.statement", "billing.publish.dayview"}


def test_the_command_line_and_serve_ask_the_answer_layer():
    """cli.py parses and prints and serve turns answers into pages: both ask billing/publish/answers.py, which
    assembles each answer once (serve's /healthz alone reads the ledger itself, to see that it answers)."""
    assert imports_of(MODULES["billing.cli"]) & ASSEMBLY == set()
    assert imports_of(MODULES["billing.web.app"]) & ASSEMBLY == {"billing.ledger.read"}


def test_billing_mcp_asks_the_answer_layer():
    """`billing mcp`'s tools answer from billing/publish/answers.py too, so an assistant's figures are the reports'."""
    for module in ("billing.web.tools", "billing.web.mcp_server"):
        assert imports_of(MODULES[module]) & ASSEMBLY == set(), module
    assert "billing.publish.answers" in imports_of(MODULES["billing.web.tools"])


def test_budget_alerts_and_personal_digests_ask_the_answer_layer():
    """An alert's month to date is the pages' (issue 52: alerts summed the month themselves, and said 84% where the
    team's page said 42.00 of 50.00); the night's digests are asked of the answer layer too."""
    assert "billing.publish.answers" in imports_of(MODULES["billing.notify.budget_alerts"])
    assert imports_of(MODULES["billing.notify.budget_alerts"]) & ASSEMBLY == set()  # its own records: ledger.messages
    assert "billing.publish.digest" not in imports_of(MODULES["billing.jobs.run"])
    assert "billing.ledger.read" not in imports_of(MODULES["billing.publish.digest"])  # answers.py reads its rows
