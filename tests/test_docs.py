"""The repository's own contract: every citation of a docs page names a page and a heading that exist.

Code, tests and docs cite the docs as `docs/spec.md "Rule 3: request"` or `docs/spec.md#rule-3-request`,
and Markdown links as `[text](spec.md#rule-3-request)`. A citation of a page or heading that is not there
fails here, naming the file and line; so does any reference to a specification outside the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = {".py", ".md", ".yaml", ".yml", ".j2", ".toml", ".txt", ".cfg", ".sql", ".css", ""}
CITATION = re.compile(r'\bdocs/([\w-]+\.md)(?:#([\w-]+)| "([^"\n]+)")?')
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s#]*\.md)?(?:#([\w-]+))?\)")
OUTSIDE = re.compile(r"SPEC\.md|\.\./shared")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(page: Path) -> set[str]:
    """The headings of a Markdown page (outside code blocks), as written."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            found.add(line.lstrip("#").strip())
    return found


def broken(path: Path, text: str) -> list[str]:
    """Every citation or link in `text` (of the file at `path`) whose page or heading does not exist."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path.relative_to(ROOT)}:{number}"
        cited = [(ROOT / "docs" / m[1], m[2], m[3]) for m in CITATION.finditer(line)]
        if path.suffix == ".md":
            cited += [((path.parent / m[1]) if m[1] else path, m[2], None) for m in LINK.finditer(line)
                      if not (m[1] or "").startswith(("http:", "https:"))]
        for page, fragment, heading in cited:
            if not page.exists():
                problems.append(f"{where}: {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page} does not exist")
            elif page.suffix == ".md" and (fragment or heading):
                titles = headings(page)
                if (heading and heading not in titles) or (fragment and fragment not in map(anchor, titles)):
                    problems.append(f"{where}: {page.name} has no heading {heading or '#' + fragment}")
        if OUTSIDE.search(line):
            problems.append(f"{where}: refers to a specification outside the repository")
    return problems


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in names if Path(name).suffix in TEXT and (ROOT / name).is_file()
            and name != "tests/test_docs.py"]


def test_every_citation_names_a_page_and_heading_that_exist():
    problems = list(dict.fromkeys(problem for path in tracked_text_files() for problem in broken(path, path.read_text())))
    assert not problems, "\n".join(problems)


def test_a_citation_of_a_missing_heading_or_page_is_found():
    here = ROOT / "billing" / "example.py"
    assert broken(here, 'see docs/spec.md "Rule 3: request"') == []
    assert broken(here, "see docs/spec.md#rule-10-no-data-is-not-zero") == []
    assert broken(here, 'see docs/spec.md "Rule 11: nothing"') == ["billing/example.py:1: spec.md has no heading Rule 11: nothing"]
    assert broken(here, "x\nsee docs/nowhere.md") == ["billing/example.py:2: docs/nowhere.md does not exist"]
    assert broken(ROOT / "docs" / "example.md", "[the rule](spec.md#rule-99)") == [
        "docs/example.md:1: spec.md has no heading #rule-99"]
    assert broken(here, "as ../shared/SPEC.md says") == ["billing/example.py:1: refers to a specification outside the repository"]
