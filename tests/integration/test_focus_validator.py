"""The FinOps Foundation's own FOCUS validator (`focus-validator` 2.2.1, which holds the FOCUS 1.2 rules) run on
`billing export --focus-version 1.2`, as a user would: from its own Python 3.12 environment
(tests/focus_validator/, made by .ci/run), on a closed month with a reserved pool, unrequested capacity, a
priority-class discount and cost recovery, one of whose days was run again after the close (its corrections are
rows of ChargeClass Correction in November), and a November day of persistent volumes' storage."""

import re
import subprocess
from datetime import date
from pathlib import Path

from click.testing import CliRunner

from billing.charge.bill import DayBill
from billing.cli import main
from billing.ledger.database import open_ledger
from billing.ledger.write import replace_day
from fixtures.servers import require_program
from tests.helpers.processes import ROOT
from tests.helpers.report_ledger import frame
from tests.helpers.statements import OCT_5_RERUN, closed_october

VALIDATOR = ROOT / "tests" / "focus_validator" / "venv" / "bin"
# InvoiceId-C-003-C: "InvoiceId nullability is defined as follows", an OR of C-004 (null when a charge is on no
# invoice) and C-005 (not null when it is on one). The validator cannot tell which charges are invoiced, so it
# checks both over every row and reports the branch that does not hold as failed while the OR passes: every row
# here is on a statement, so C-005 holds and C-004 is listed. It is no failure of the dataset.
OR_BRANCHES = {"InvoiceId-C-004-C"}
# persistent volumes of two storage classes on November 3 (ServiceCategory Storage beside Compute)
STORAGE = [("jaguar", "alice", "robotics", "alice", "storage", "fast-nvme", 24_000.0, 0.0002, 4.80),
           ("jaguar", "team-vision", "vision", None, "storage", "bulk", 48_300.0, 0.00005, 2.415)]


def test_the_official_focus_validator_finds_no_failure_in_the_1_2_export(tmp_path, write_config):
    program = require_program("focus-validator", [str(VALIDATOR)])
    url = closed_october(f"sqlite:///{tmp_path / 'october.db'}")
    engine = open_ledger(url)
    replace_day(engine, date(2026, 10, 5), DayBill(frame(OCT_5_RERUN)), "USD")
    replace_day(engine, date(2026, 11, 3), DayBill(frame(STORAGE)), "USD")
    engine.dispose()
    config = write_config(database=url, currency="USD")
    export = tmp_path / "october.csv"
    result = CliRunner().invoke(main, ["export", "--config", str(config), "--from", "2026-10-01", "--to", "2026-11-30",
                                       "--focus-version", "1.2", "--output", str(export)])
    assert result.exit_code == 0, result.output
    assert ",Correction," in export.read_text()  # the corrections of October 5 are among the rows checked
    assert ",Storage," in export.read_text()  # and persistent volumes' rows, of their own ServiceCategory
    # the validator reads its currency codes from focus_validator/rules/ under the working directory: its package's
    python = Path(program).parent / "python"
    packages = subprocess.run([python, "-c", "import focus_validator, os; print(os.path.dirname(os.path.dirname("
                               "focus_validator.__file__)))"], capture_output=True, text=True, check=True).stdout.strip()
    checked = subprocess.run([program, "--data-file", str(export), "--validate-version", "1.2", "--block-download"],
                             cwd=packages, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    summary = re.search(r"Total: (\d+) \| Pass: (\d+) \| Fail: (\d+) \| Skipped: (\d+)", checked.stdout)
    assert summary is not None, checked.stdout
    failed = set(re.findall(r"❌ (\S+): FAIL", checked.stdout))
    assert failed <= OR_BRANCHES, checked.stdout
    assert "InvoiceId-C-003-C: FAIL" not in checked.stdout and "InvoiceId-C-000-O: FAIL" not in checked.stdout
    assert int(summary[2]) > 100  # it did check the columns: 136 rules pass on such an export
