"""`billing report --by workload` and `--by label:NAME` through click, on SQLite and PostgreSQL.

The ledger is tests/helpers/workload_ledger.py; every figure is worked out by hand there.
"""

from __future__ import annotations

import csv
import io

import pytest
from click.testing import CliRunner

from billing.cli import main
from billing.ledger.database import open_ledger
from tests.helpers.reports import report, report_json
from tests.helpers.workload_ledger import (
    BY_EXPERIMENT,
    BY_WORKLOAD,
    FIRST,
    LAST,
    MISSING,
    NAMESPACE_TOTALS,
    ROBOTICS_TOTAL,
    fill,
)

RANGE = ["--from", str(FIRST), "--to", str(LAST)]


@pytest.fixture(params=["sqlite", "postgresql"])
def config(request, tmp_path, write_config) -> str:
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else f"sqlite:///{tmp_path / 'l.db'}"
    engine = open_ledger(url)
    fill(engine)
    engine.dispose()
    return str(write_config(database=url, currency="USD", cost_labels=["experiment"]))


def sums_by_namespace(rows: list[dict]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for row in rows:
        totals[row["namespace"]] = totals.get(row["namespace"], 0.0) + row["cost"]
    return totals


@pytest.mark.parametrize("by, key, expected", [("workload", "workload", BY_WORKLOAD),
                                               ("label:experiment", "label_experiment", BY_EXPERIMENT)])
def test_a_breakdown_adds_up_to_the_namespace_and_team_totals(config, by, key, expected):
    document = report_json(config, "--team", "robotics", *RANGE, "--by", by)
    assert document["by"] == by and document["missing_days"] == [str(day) for day in MISSING]
    assert all(list(row) == ["namespace", key, "gpu_hours", "cpu_core_hours", "memory_gib_hours", "storage_gib_hours",
                                "energy_kwh", "cost"]
               for row in document["rows"])
    got = {(row["namespace"], row[key]): row["cost"] for row in document["rows"]}
    assert got == pytest.approx(expected, abs=1e-9)
    assert list(got) == list(expected)  # most expensive first
    assert document["total_cost"] == pytest.approx(ROBOTICS_TOTAL, abs=1e-9)
    assert sums_by_namespace(document["rows"]) == pytest.approx(NAMESPACE_TOTALS, abs=1e-9)
    by_namespace = report_json(config, "--team", "robotics", *RANGE, "--by", "namespace")["rows"]
    assert sums_by_namespace(document["rows"]) == pytest.approx(sums_by_namespace(by_namespace), abs=1e-9)


def test_breakdown_rows_carry_resource_hours_and_name_the_days_not_broken_down(config):
    document = report_json(config, "--team", "robotics", *RANGE, "--by", "workload")
    train = next(row for row in document["rows"] if row["workload"] == "Job/train-a")
    assert (train["gpu_hours"], train["cpu_core_hours"], train["memory_gib_hours"]) == (6.0, 60.0, 0.0)
    assert document["days_without_breakdown"] == ["2026-11-02"]
    labelled = report_json(config, "--team", "robotics", *RANGE, "--by", "label:experiment")
    assert labelled["days_without_breakdown"] == ["2026-11-02", "2026-11-03"]
    assert "days_without_breakdown" not in report_json(config, "--team", "robotics", *RANGE, "--by", "namespace")


def test_a_persons_workloads_across_their_teams_and_all_teams(config):
    # bob's namespace is split between robotics and vision: 5.90 each
    for subject in (["--person", "bob"], ["--all-teams"]):
        rows = report_json(config, *subject, *RANGE, "--by", "workload")["rows"]
        assert {(r["namespace"], r["workload"]): r["cost"] for r in rows if r["namespace"] == "bob"} == \
            pytest.approx({("bob", "StatefulSet/db"): 11.80})
    everything = report_json(config, "--all-teams", *RANGE, "--by", "label:experiment")
    assert everything["total_cost"] == pytest.approx(ROBOTICS_TOTAL + 5.90)


def test_table_shows_the_breakdown_with_a_total_and_says_which_days_are_not_broken_down(config):
    result = report(config, "--team", "robotics", *RANGE, "--by", "label:experiment")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "team robotics, 2026-11-01 to 2026-11-04, by label:experiment\n"
        "namespace      label experiment   GPU-h  core-h     GiB-h  cost USD\n"
        "alice          exp-1               6.00   60.00         -     15.12\n"
        "alice          (not broken down)   6.00       -         -     14.40\n"
        "alice          (no label)          4.00   40.00         -     10.08\n"
        "bob            exp-1               2.00       -         -      5.90\n"
        "team-robotics  exp-2                  -       -  1,000.00      1.50\n"
        "total                             18.00  100.00  1,000.00     47.00\n"
    )
    assert result.stderr == (
        "billing: 1 day was never billed and is not in this report: 2026-11-04\n"
        "billing: 2026-11-02 to 2026-11-03 had costs without a breakdown by label experiment (billed with "
        "workloads off, before workload costs were kept or beyond workloads.keep_days, or experiment not yet in "
        "cost_labels); they show as (not broken down)\n"
    )


def test_csv_and_html(config):
    result = report(config, "--team", "robotics", *RANGE, "--by", "workload", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["namespace", "workload", "gpu_hours", "cpu_core_hours", "memory_gib_hours",
                             "storage_gib_hours", "energy_kwh", "cost", "currency"]
    assert {(r["namespace"], r["workload"]): float(r["cost"]) for r in rows} == pytest.approx(BY_WORKLOAD)
    assert "2026-11-02 had costs without a breakdown by workload" in result.stderr
    page = report(config, "--team", "robotics", *RANGE, "--by", "workload", "--format", "html").stdout
    assert page.count("<tr>") == len(BY_WORKLOAD) + 2  # header and totals
    assert "Job/train-a" in page and "47.00 USD" in page
    assert '<p class="missing" id="without-breakdown">2026-11-02 had costs without a breakdown by workload' in page


def test_a_label_that_is_not_a_cost_label_is_a_usage_error_naming_the_key(config, tmp_path):
    result = report(config, "--team", "robotics", *RANGE, "--by", "label:project")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("billing: cannot break down by label 'project': it is not in the config key "
                             "cost_labels, which names experiment\n")
    result = report(config, "--team", "robotics", *RANGE, "--by", "workloads")
    assert result.exit_code == 2 and "cannot group by 'workloads'" in result.stderr


def test_shell_completion_offers_workload_and_the_configured_labels(config):
    words = f"billing report --config {config} --by "
    env = {"_BILLING_COMPLETE": "bash_complete", "COMP_WORDS": words + "w", "COMP_CWORD": str(len(words.split()))}
    result = CliRunner().invoke(main, [], env=env, prog_name="billing")
    assert [line.split(",", 1)[1] for line in result.stdout.splitlines()] == ["workload"]
    env["COMP_WORDS"] = words + "l"
    result = CliRunner().invoke(main, [], env=env, prog_name="billing")
    assert [line.split(",", 1)[1] for line in result.stdout.splitlines()] == ["label:experiment"]
