"""An installed copy of the package finds its report templates (not only a checkout)."""

import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.report_ledger import write_ledger

ROOT = Path(__file__).resolve().parents[2]

RENDER = """
import sys
from datetime import date
from pathlib import Path
import billing.publish.pages as pages
from billing.notify.letters import admin_letter
from billing.publish.dayview import read_report
from billing.ledger.database import open_ledger
report = read_report(open_ledger(sys.argv[1]), date(2026, 11, 20), "USD", "unallocated")
pages.write_pages(report, Path(sys.argv[2]))
print(pages.template_dir())
print(admin_letter(report).subject)
"""


def test_an_installed_package_renders_with_its_own_templates(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "billing", "reports"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(source)],
        check=True, capture_output=True, timeout=300,
    )
    shutil.rmtree(source)  # nothing left to fall back on but the installed copy
    url = write_ledger(tmp_path / "ledger.db")
    run = subprocess.run(
        [sys.executable, "-c", RENDER, url, str(tmp_path / "out")],
        cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    template_dir, subject = run.stdout.splitlines()
    assert Path(template_dir) == site / "billing" / "reports"
    assert subject == "Cluster billing 2026-11-20: all teams 40.32 USD"
    assert "40.32 USD" in (tmp_path / "out" / "2026-11-20" / "index.html").read_text()
