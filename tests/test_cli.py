"""Exit statuses and messages of the command line (SPEC.md: 0 ok, 1 run failed, 2 usage/config)."""


import pytest
from click.testing import CliRunner

from billing.cli import main
from fixtures.servers import free_port
from tests.conftest import MINIMAL_CONFIG


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


def test_a_backfill_of_more_than_366_days_asks_for_yes(write_config, tmp_path):
    """2025-11-20 to 2026-11-20 is 366 days (no 29 February between them): it runs; one day more asks first."""
    cluster = {**MINIMAL_CONFIG["clusters"][0], "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retries": 0}}
    path = str(write_config(clusters=[cluster], database=f"sqlite:///{tmp_path}/ledger.db"))

    result = invoke("backfill", "--from", "2006-11-20", "--to", "2026-11-20", "--config", path)
    assert result.exit_code == 2
    assert result.output == ("billing: --from 2006-11-20 --to 2026-11-20 is 7,306 days, more than 366: "
                             "add --yes to bill every one of them\n")
    assert not (tmp_path / "ledger.db").exists()
    assert invoke("backfill", "--from", "2025-11-19", "--to", "2026-11-20", "--config", path).exit_code == 2

    # 366 days, or more with --yes, start: the first day fails on the unreachable Prometheus
    for extra in ([], ["--yes"]):
        first = "2025-11-20" if not extra else "2006-11-20"
        result = invoke("backfill", "--from", first, "--to", "2026-11-20", "--config", path, *extra)
        assert result.exit_code == 1 and "Prometheus of cluster jaguar at http://127.0.0.1:" in result.output
