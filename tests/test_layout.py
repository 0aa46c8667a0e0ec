"""tests/ mirrors what it tests (docs/architecture.md "Tests"), so a module's tests are found where the module is."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# folders that mirror no folder of the repository: the foundations at the top of billing/, cli.py,
# the tests against real servers, and what several test modules share
OWN_FOLDERS = {"foundations", "cli", "integration", "helpers"}

# the only test modules at the top: rules over the whole repository
REPOSITORY_RULES = {"test_docs.py", "test_imports.py", "test_layout.py"}


def test_every_test_module_sits_in_the_folder_of_what_it_tests():
    stages = {path.name for path in (ROOT / "billing").iterdir() if (path / "__init__.py").exists()}
    mirrored = stages | {"fixtures", "bench"} | OWN_FOLDERS
    folders = {path.name for path in TESTS.iterdir() if (path / "__init__.py").exists()}
    assert folders - mirrored == set()
    assert {path.name for path in TESTS.glob("test_*.py")} - REPOSITORY_RULES == set()
