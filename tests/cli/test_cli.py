"""Exit statuses and messages of the command line (docs/spec.md "Command line": 0 ok, 1 run failed, 2 usage/config)."""

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from billing.cli import main
from fixtures.servers import free_port
from tests.helpers.config import MINIMAL_CONFIG
from tests.helpers.report_ledger import write_held_ledger, write_ledger

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


def test_version_and_help():
    assert invoke("--version").exit_code == 0
    for command in ("run", "backfill"):
        result = invoke(command, "--help")
        assert result.exit_code == 0 and "Example" in result.output


def test_config_errors_exit_2_with_one_sentence(tmp_path):
    result = invoke("run", "--date", "2026-11-20", "--config", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "cannot read config file" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("content", ["a: " + "[" * 5000 + "]" * 5000, "# padding\n" * 5_000_000], ids=["deep", "50 MB"])
def test_a_deep_or_huge_config_is_a_config_error_not_an_unexpected_one(tmp_path, content):
    path = tmp_path / "billing.yaml"
    path.write_text(content)
    for command in (["run", "--date", "2026-11-20"], ["check"]):
        result = invoke(*command, "--config", str(path))
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1 and "unexpected" not in result.output and "Traceback" not in result.output


def test_config_from_environment_variable(tmp_path):
    result = invoke("run", "--date", "2026-11-20", env={"BILLING_CONFIG": str(tmp_path / "from-env.yaml")})
    assert result.exit_code == 2 and "from-env.yaml" in result.output


def test_invalid_date_is_a_usage_error(write_config):
    result = invoke("run", "--date", "2026-02-30", "--config", str(write_config()))
    assert result.exit_code == 2 and "'2026-02-30' is not a date" in result.output
    result = invoke("backfill", "--from", "2026-11-20", "--to", "2026-11-19", "--config", str(write_config()))
    assert result.exit_code == 2 and "--to is before --from" in result.output


def test_unreachable_prometheus_exits_1_and_leaves_no_rows(write_config, tmp_path):
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retries": 0}}
    path = write_config(clusters=[cluster], database=f"sqlite:///{tmp_path}/ledger.db")
    result = invoke("run", "--date", "2026-11-20", "--config", str(path))
    assert result.exit_code == 1
    assert "Prometheus of cluster jaguar at http://127.0.0.1:" in result.output
    assert "unreachable" in result.output and "Traceback" not in result.output


def test_a_backfill_of_more_than_366_days_asks_for_yes(write_config, tmp_path, monkeypatch):
    """2025-11-20 to 2026-11-20 is 366 days (no 29 February between them): it runs; one day more asks first."""
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retries": 0}}
    path = str(write_config(clusters=[cluster], database=f"sqlite:///{tmp_path}/ledger.db"))

    result = invoke("backfill", "--from", "2006-11-20", "--to", "2026-11-20", "--config", path)
    assert result.exit_code == 2
    assert result.output == ("billing: --from 2006-11-20 --to 2026-11-20 is 7,306 days, more than 366: "
                             "add --yes to bill every one of them\n")
    assert not (tmp_path / "ledger.db").exists()
    assert invoke("backfill", "--from", "2025-11-19", "--to", "2026-11-20", "--config", path).exit_code == 2

    # 366 days, or more with --yes, start: every day is handed to the backfill (billing each against the
    # unreachable Prometheus would only repeat the next test 7,672 times)
    asked: list[int] = []
    monkeypatch.setattr("billing.jobs.backfill.backfill", lambda config, days, *args: asked.append(len(days)) or [])
    for extra in ([], ["--yes"]):
        first = "2025-11-20" if not extra else "2006-11-20"
        assert invoke("backfill", "--from", first, "--to", "2026-11-20", "--config", path, *extra).exit_code == 0
    assert asked == [366, 7306]


def test_a_backfill_against_an_unreachable_prometheus_names_it_and_fails(write_config, tmp_path):
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retries": 0}}
    path = str(write_config(clusters=[cluster], database=f"sqlite:///{tmp_path}/ledger.db"))
    result = invoke("backfill", "--from", "2026-11-18", "--to", "2026-11-20", "--config", path)
    assert result.exit_code == 1 and "3 of 3 days failed" in result.output
    assert "Prometheus of cluster jaguar at http://127.0.0.1:" in result.output


def report_config(write_config, tmp_path, **changes) -> str:
    """A config whose ledger holds tests/helpers/report_ledger.py's days."""
    return str(write_config(database=write_ledger(tmp_path / "ledger.db"), currency="USD", **changes))


REPORT = ["report", "--team", "robotics", "--from", "2026-11-19", "--to", "2026-11-20", "--format", "json"]


def test_global_options_before_and_after_the_command_the_commands_own_winning(write_config, tmp_path):
    path = report_config(write_config, tmp_path)
    missing = str(tmp_path / "missing.yaml")
    before = invoke("--config", path, *REPORT)
    assert before.exit_code == 0, before.output
    assert json.loads(before.stdout)["total_cost"] == pytest.approx(12.00 + 32.60)  # report_ledger's figures
    after = invoke(*REPORT, "--config", path)
    assert (after.exit_code, after.stdout) == (0, before.stdout)
    assert invoke("--config", missing, *REPORT, "--config", path).stdout == before.stdout
    refused = invoke("--config", path, *REPORT, "--config", missing)
    assert refused.exit_code == 2 and f"cannot read config file {missing}" in refused.stderr
    upgraded = invoke("db", "--config", path, "upgrade")
    assert upgraded.exit_code == 0 and "already at revision" in upgraded.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_log_format_json_before_or_after_the_command(tmp_path, where):
    """A program of its own: logging is set up once per process."""
    options = ["--log-format", "json", "--config", str(tmp_path / "missing.yaml")]
    command = ["report", "--team", "robotics"]
    args = [*options, *command] if where == "before" else [*command, *options]
    result = subprocess.run([sys.executable, "-m", "billing", *args], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert json.loads(line)["message"] == f"cannot read config file {tmp_path / 'missing.yaml'}: No such file or directory"


@pytest.mark.parametrize("command", [[], ["report"], ["db"], ["db", "upgrade"], ["backfill"]])
def test_h_is_help(command):
    short, long = invoke(*command, "-h"), invoke(*command, "--help")
    assert short.exit_code == 0 and short.output == long.output and "Usage: " in short.output


def test_reading_the_ledger_needs_no_secret_a_run_needs_every_one(write_config, tmp_path, monkeypatch):
    for name in ("NO_TOKEN", "NO_LDAP_PASSWORD", "NO_SMTP_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": f"http://127.0.0.1:{free_port()}",
                                                               "bearer_token_env": "NO_TOKEN"}}
    path = report_config(write_config, tmp_path, clusters=[cluster],
                         directory={"url": "ldap://127.0.0.1", "bind_password_env": "NO_LDAP_PASSWORD"},
                         email={"enabled": True, "smtp_host": "127.0.0.1", "password_env": "NO_SMTP_PASSWORD"})
    for command in (REPORT, ["statement", "--month", "2026-11"], ["export", "--from", "2026-11-20", "--to", "2026-11-20"]):
        result = invoke(*command, "--config", path)
        assert result.exit_code == 0, (command, result.output)

    ledger = (tmp_path / "ledger.db").read_bytes()
    result = invoke("run", "--date", "2026-11-20", "--config", path)
    assert result.exit_code == 2
    assert result.stderr == (
        "billing: clusters[0].prometheus: bearer_token_env names the environment variable NO_TOKEN, which is not set; "
        "directory: bind_password_env names the environment variable NO_LDAP_PASSWORD, which is not set; "
        "email: password_env names the environment variable NO_SMTP_PASSWORD, which is not set\n")
    assert (tmp_path / "ledger.db").read_bytes() == ledger


# robotics' rows of HELD by hand: alice's 0.5 H100-hours at 2.40, and her 4 core-h with bob's robotics half of 4/3 (0.048 +
# 0.008 USD), mostly ContainerCreating; in the order the table gives them (per resource, by name)
HELD_LINES = ["held before running: 4.67 core-h, 0.06 USD, shown, not charged; mostly ContainerCreating",
              "held before running: 0.50 GPU-h, 1.20 USD, shown, not charged; mostly ContainerCreating"]


def test_csv_keeps_its_rows_adding_up_and_says_what_was_held_on_stderr(write_config, tmp_path):
    path = str(write_config(database=write_held_ledger(tmp_path / "ledger.db"), currency="USD"))
    result = invoke("report", "--team", "robotics", "--from", "2026-11-20", "--to", "2026-11-20", "--format", "csv",
                    "--config", path)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert sum(float(row["cost"]) for row in rows) == pytest.approx(32.60)  # the team's day, held not added: not charged
    assert result.stderr.splitlines() == [f"billing: {line}" for line in HELD_LINES]


def test_html_says_what_was_held_as_the_table_does(write_config, tmp_path):
    path = str(write_config(database=write_held_ledger(tmp_path / "ledger.db"), currency="USD"))
    asked = ["report", "--team", "robotics", "--from", "2026-11-20", "--to", "2026-11-20", "--config", path]
    table = " ".join(invoke(*asked).stdout.split())  # its lines wrapped at 80 columns
    assert all(line in table for line in HELD_LINES)
    page = invoke(*asked, "--format", "html")
    assert page.exit_code == 0 and page.stderr == "", page.output
    said = re.search(r'<p class="note" id="held-before-running">(.*?)</p>', page.stdout, re.S)
    assert said and said[1].split("<br>") == [f"H{line[1:]}." for line in HELD_LINES]


@pytest.mark.parametrize("form", ["table", "csv", "json", "html"])
def test_a_range_of_which_no_day_was_ever_run_fails_naming_the_days(write_config, tmp_path, form):
    path = report_config(write_config, tmp_path)
    result = invoke("report", "--team", "robotics", "--from", "2026-11-02", "--to", "2026-11-09", "--format", form,
                    "--config", path)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == ("billing: no day in this range was ever run (2026-11-02 to 2026-11-09): "
                             "run them with billing run or billing backfill first\n")
    export = invoke("export", "--from", "2026-11-02", "--to", "2026-11-09", "--config", path)
    assert (export.exit_code, export.stdout, export.stderr) == (1, "", result.stderr)


def test_a_range_with_some_days_run_lists_the_missing_ones(write_config, tmp_path):
    path = report_config(write_config, tmp_path)
    result = invoke("report", "--team", "robotics", "--from", "2026-11-09", "--to", "2026-11-11", "--format", "json",
                    "--config", path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["missing_days"] == ["2026-11-09", "2026-11-11"]
    assert json.loads(result.stdout)["total_cost"] == 0  # 2026-11-10 was run and nothing was used


def test_recorded_answers_are_found_beside_the_config_and_a_missing_directory_is_named(write_config, tmp_path,
                                                                                      monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"replay": "recorded/jaguar"}}
    path = write_config(clusters=[cluster], database="sqlite:///ledger.db")
    result = invoke("run", "--date", "2026-11-20", "--config", str(path))
    assert result.exit_code == 1
    assert result.stderr == (f"billing: the recorded answers directory {tmp_path / 'recorded' / 'jaguar'} of cluster "
                             "jaguar does not exist (relative paths in the config are resolved against the config "
                             "file's directory)\n")
    assert list(elsewhere.iterdir()) == []  # the ledger and pages, too, are beside the config, not in the cwd
    check = invoke("check", "--config", str(path))
    assert check.exit_code == 1 and "the recorded answers directory" in check.stdout


@pytest.mark.parametrize("command", [
    ["report", "--team", "robotics", "--from", "2026-11-19", "--to", "2026-11-20", "--format", "csv"],
    ["statement", "--month", "2026-11"],
    ["export", "--from", "2026-11-19", "--to", "2026-11-20"],
], ids=["report", "statement", "export"])
def test_a_reader_that_stops_early_ends_the_command_quietly(write_config, tmp_path, command):
    """`billing export ... | head -1`: the reader closed the pipe before the command wrote; that is the reader's
    choice, not a failure: status 0, and nothing on stderr but what the command says anyway (no traceback, no
    'cannot write')."""
    path = report_config(write_config, tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "billing", *command, "--config", path], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stdout is not None
    process.stdout.close()  # before the command has started writing: every write finds the pipe closed
    _, said = process.communicate(timeout=60)
    assert process.returncode == 0, said
    assert "Traceback" not in said and "Broken pipe" not in said and "cannot write" not in said, said
