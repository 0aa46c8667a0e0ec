"""The parts of `billing report` that need no database: ranges and formatting."""

from __future__ import annotations

from datetime import date
from zoneinfo import ZoneInfo

from billing.publish.report import Report, Subject
from billing.publish.report_formats import csv_text, day_ranges, notices, table

BERLIN = ZoneInfo("Europe/Berlin")


def grouped(rows: list[dict], by: str = "namespace") -> Report:
    return Report(
        Subject("team", "robotics"),
        date(2026, 11, 1),
        date(2026, 11, 30),
        "EUR",
        by,
        [by, "gpu_hours", "cpu_core_hours", "memory_gib_hours", "cost"],
        rows,
        [],
    )


def row(name, cost, gpu=0.0, cpu=0.0, memory=0.0, by="namespace") -> dict:
    return {by: name, "gpu_hours": gpu, "cpu_core_hours": cpu, "memory_gib_hours": memory, "cost": cost}


def test_table_fits_80_columns_with_long_names_and_large_figures():
    report = grouped([row("a-very-long-namespace-name-" * 4, 12345678.9, 1234567.25, 7654321.5, 99999999.0)])
    lines = table(report).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[2].startswith("a-very-long-namespace") and "…" in lines[2]
    assert lines[2].split()[-4:] == ["1,234,567.25", "7,654,321.50", "99,999,999.00", "12,345,678.90"]


def test_table_shows_names_without_control_characters():
    text = table(grouped([row("evil\x1b[2J\nname", 1.0)]))
    assert "\x1b" not in text and "evil?[2J?name" in text


def test_table_labels_a_team_namespace_and_cpu_rows():
    assert "(team namespaces)" in table(grouped([row(None, 1.0, by="person")], by="person"))
    assert "(none)" in table(grouped([row("", 1.0, by="gpu_model")], by="gpu_model"))


def test_csv_keeps_negative_numbers_as_numbers_and_neutralises_text():
    text = csv_text(grouped([row("@SUM(A1)", -2.5), row("+1", 1.0), row("-x", 1.0), row("\tx", 1.0)]))
    lines = text.splitlines()
    assert lines[1] == "'@SUM(A1),0,0,0,-2.5,EUR"
    assert [line.split(",")[0] for line in lines[2:]] == ["'+1", "'-x", "'\tx"]


def test_missing_days_are_joined_into_runs():
    days = [date(2026, 11, 9), date(2026, 11, 3), date(2026, 11, 4), date(2026, 11, 5)]
    assert day_ranges(days) == ["2026-11-03 to 2026-11-05", "2026-11-09"]
    report = grouped([])
    assert notices(report) == []
    assert notices(Report(**{**report.__dict__, "missing_days": days})) == [
        "4 days were never billed and are not in this report: 2026-11-03 to 2026-11-05, 2026-11-09"
    ]


def test_data_gaps_are_named_with_their_share_of_the_day():
    gaps = [(date(2026, 11, 3), "jaguar", 0.925), (date(2026, 11, 4), "ibis", 0.5)]
    assert notices(Report(**{**grouped([]).__dict__, "incomplete": gaps})) == [
        "Prometheus had no kube-state-metrics data, so pods running then were not billed, on "
        "2026-11-03 on jaguar (7.5 % of the day), 2026-11-04 on ibis (50.0 % of the day)"
    ]


def test_csv_numbers_have_no_float_noise_and_keep_small_values():
    text = csv_text(grouped([row("a", 0.1 + 0.2), row("b", 67.85000000000001), row("c", 0.000123456789)]))
    assert [line.split(",")[4] for line in text.splitlines()[1:]] == ["0.3", "67.85", "0.000123456789"]


def test_table_rows_add_up_to_the_total_and_say_so():
    # three namespaces of 1/3 each: each is 0.33 wherever it is shown, their total 1.00: a Rounding row of 0.01
    text = table(grouped([row("a", 1 / 3), row("b", 1 / 3), row("c", 1 / 3)]))
    lines = text.splitlines()[2:7]
    assert [(line.split()[0], line.split()[-1]) for line in lines] == [
        ("a", "0.33"), ("b", "0.33"), ("c", "0.33"), ("Rounding", "0.01"), ("total", "1.00")]
    assert "a Rounding row is what a table's rounded rows differ from its rounded total." in " ".join(text.split())
    assert "Rounding" not in table(grouped([row("a", 0.5), row("b", 0.25)]))  # the rows add up


def test_requested_and_unrequested_are_each_their_exact_sum_rounded_once():
    """--by cluster showed jaguar requested 280.66, unrequested -, cost 280.65: each column was rounded to its
    own total. By hand: costs 280.655 + 10.115 = 290.77; each rounded once, 280.66 + 10.12 is a cent over, which a
    Rounding row gives back (-0.01). Requested is its own exact sum rounded once (issue 52: it was the cost less the
    unrequested share, 290.65, a cent off the 290.66 its rows sum to in JSON and on the pages): 280.66, 10.00 and
    290.66 in all, which its rows add up to; the total row's 290.66 + 0.12 is a cent over its 290.77, as rounding
    each figure once gives it."""
    columns = ["cluster", "gpu_hours", "cpu_core_hours", "memory_gib_hours", "requested_cost", "unrequested_share",
               "cost"]
    rows = [{"cluster": "jaguar", "gpu_hours": 1.0, "cpu_core_hours": 0.0, "memory_gib_hours": 0.0,
             "requested_cost": 280.655, "unrequested_share": 0.0, "cost": 280.655},
            {"cluster": "ibis", "gpu_hours": 1.0, "cpu_core_hours": 0.0, "memory_gib_hours": 0.0,
             "requested_cost": 10.0, "unrequested_share": 0.115, "cost": 10.115}]
    report = Report(Subject("team", "robotics"), date(2026, 11, 1), date(2026, 11, 30), "EUR", "cluster", columns,
                    rows, [], [])
    lines = {line.split()[0]: line.split()[-3:] for line in table(report).splitlines()[2:6]}
    assert lines == {"jaguar": ["280.66", "-", "280.66"], "ibis": ["10.00", "0.12", "10.12"],
                     "Rounding": ["-", "-", "-0.01"], "total": ["290.66", "0.12", "290.77"]}



def test_service_units_beside_the_money_per_row_and_per_group(tmp_path):
    """docs/billing.md's recharge month: robotics 10,000 + 1,234.56 SU on lakes, vision 3,000 + 200 + 0 there and
    none on ibis, which weighs no SU (empty, not 0)."""
    import csv
    import io
    import json

    from billing.publish.report import build_report
    from billing.publish.report_formats import json_text
    from tests.helpers.recharge import IBIS, LAKES, recharge_month

    engine = recharge_month(f"sqlite:///{tmp_path}/ledger.db")
    first, last = date(2026, 11, 1), date(2026, 11, 30)
    by_team = build_report(engine, Subject("all"), first, last, "team", "USD", [LAKES, IBIS])
    assert {row["team"]: round(row["service_units"], 6) for row in by_team.rows} == {"robotics": 11234.56,
                                                                                     "vision": 3200.0}
    by_cluster = build_report(engine, Subject("all"), first, last, "cluster", "USD", [LAKES, IBIS])
    assert {row["cluster"]: row["service_units"] for row in by_cluster.rows} == {"lakes": 14434.56, "ibis": None}
    rows = build_report(engine, Subject("team", "vision"), first, last, None, "USD", [LAKES, IBIS])
    assert [(row["cluster"], row["resource"], row["service_units"]) for row in rows.rows] == [
        ("ibis", "cpu", None), ("ibis", "gpu", None), ("lakes", "cpu", 200.0), ("lakes", "gpu", 3000.0),
        ("lakes", "memory", 0.0)]
    assert [row["service_units"] for row in json.loads(json_text(by_cluster))["rows"]] == [14434.56, None]
    assert [row["service_units"] for row in csv.DictReader(io.StringIO(csv_text(by_cluster)))] == ["14434.56", ""]
    assert table(by_cluster).splitlines()[1].split()[4:6] == ["SU", "cost"]
    assert "service_units" not in build_report(engine, Subject("all"), first, last, "team", "USD", [IBIS]).columns
