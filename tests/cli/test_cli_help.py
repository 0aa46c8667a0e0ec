"""Every command explains itself with an example; --version answers."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
from click.testing import CliRunner

from billing.cli import main


@pytest.mark.parametrize("command", [[], *[[name] for name in sorted(main.commands)]])
def test_help_shows_an_example(command):
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    examples = re.findall(r"^ {4,}billing (\S+)", result.output, flags=re.MULTILINE)
    assert examples and all(name in main.commands for name in examples)
    if command:
        assert command[0] in examples


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.output.endswith(f", version {version('billing')}\n")
