"""docs/cli.md describes every command and every option the program has, each in its command's section."""

import re
from pathlib import Path

import click

from billing.cli import main

GLOBAL = ("--help", "--config", "--log-format", "--verbose")  # options of every command, before or after its name
DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()


def commands(group: click.Group = main, path: str = "billing") -> list[tuple[str, click.Command]]:
    """Every command with its full name, `billing` and the groups included."""
    found: list[tuple[str, click.Command]] = [(path, group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += commands(command, f"{path} {name}")
        else:
            found.append((f"{path} {name}", command))
    return found


def section(path: str) -> str:
    """The text under the heading naming `path` (`## \\`billing report\\``); the top part for `billing` itself."""
    parts = re.split(r"^## ", DOC, flags=re.MULTILINE)
    if path == "billing":
        return parts[0]
    matching = [part for part in parts[1:] if re.match(rf"`{re.escape(path)}[` ]", part)]
    return matching[0] if matching else ""


def test_every_command_has_a_section_naming_each_of_its_options():
    missing = []
    for path, command in commands():
        text = section(path)
        if not text:
            missing.append(f"a section ## `{path}`")
            continue
        for parameter in command.params:
            names = [name for name in parameter.opts if name.startswith("--")]
            if not isinstance(parameter, click.Option) or not names or names[0] in GLOBAL:
                continue  # the top part says every command takes them
            if not re.search(rf"{re.escape(names[0])}\b", text):
                missing.append(f"{names[0]} of `{path}`")
    assert not missing, "docs/cli.md lacks " + ", ".join(missing)


def test_the_command_table_lists_every_command():
    cells = re.findall(r"^\| `(billing [^`]+)`", DOC, flags=re.MULTILINE)
    rows = {re.match(r"[a-z ]+[a-z]", cell).group() for cell in cells}  # the words before the first option
    leaves = {path for path, command in commands() if not isinstance(command, click.Group)}
    assert leaves <= rows, f"commands missing from the table of docs/cli.md: {sorted(leaves - rows)}"
