"""A ledger holding rows in two currencies shows each currency's total, never their sum (docs/spec.md "Rounding: one
figure everywhere", "Currencies").

The ledger is tests/helpers/report_ledger.py's with cluster ibis priced in EUR (as after the installation's currency
changed, or a cluster billed in another currency); jaguar stays in USD. By hand, November 1 to 20, by team:
robotics 12.00 + 12.00 + 24.00 + 1.20 + 1.50 = 50.70 USD and bob's half on ibis 5.90 EUR; vision 2.95 + 5.90 =
8.85 EUR; unallocated 1.70 EUR; platform 0.12 USD. In all 50.82 USD and 16.45 EUR (with USD, 67.27: report_ledger's
MONTH_TOTAL, the figure that must never show).
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from prometheus_client import CollectorRegistry
from sqlalchemy import update

from billing.cli import main
from billing.config import load_config
from billing.ledger.database import open_ledger
from billing.ledger.tables import bound_pending, chargeback
from billing.money import cents
from billing.notify.letters import person_letter
from billing.publish.answers import personal_digests
from billing.publish.cost_metrics import add_cost_metrics, read_cost_figures
from billing.publish.dayview import RenderError, read_archive
from billing.publish.pages import render_template
from billing.publish.report import Subject, build_report
from billing.publish.report_formats import html as report_html
from billing.publish.report_formats import json_text, table
from billing.web.app import create_app
from billing.web.mcp_server import build_server
from tests.helpers.html_tables import read_page
from tests.helpers.report_ledger import DAY, write_held_ledger, write_ledger
from tests.helpers.serve import RANGE, get, serve_config, store_directory, web_config

BY_TEAM = {("robotics", "USD"): 50.70, ("robotics", "EUR"): 5.90, ("vision", "EUR"): 8.85,
           ("unallocated", "EUR"): 1.70, ("platform", "USD"): 0.12}
TOTALS = {"EUR": 16.45, "USD": 50.82}
NOVEMBER = ["--from", "2026-11-01", "--to", "2026-11-20"]


def priced_in_two(url: str) -> str:
    """The ledger at `url` with ibis's rows in EUR."""
    engine = open_ledger(url)
    with engine.begin() as conn:
        conn.execute(update(chargeback).where(chargeback.c.cluster == "ibis").values(currency="EUR"))
    engine.dispose()
    return url


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("currencies")
    return serve_config(folder, database=priced_in_two(store_directory(write_ledger(folder / "ledger.db"))),
                        changes={"budgets": {"monthly": {"robotics": 100}}})


def report(config: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["report", "--all-teams", "--by", "team", *NOVEMBER, *args,
                                       "--config", str(config)])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_table_shows_each_currencys_rows_and_total(config):
    """Each row names its currency after its key; a total line per currency sums its own rows, hours too (EUR: vision
    1 + 2 GPU-h, bob's robotics half 2, stray's 50 core-h)."""
    lines = [line.split() for line in report(config).splitlines()]
    assert lines[1] == ["team", "currency", "GPU-h", "core-h", "GiB-h", "cost"]
    assert {(line[0], line[1]): line[-1] for line in lines[2:7]} == {key: f"{amount:.2f}" for key, amount in BY_TEAM.items()}
    assert lines[7:] == [["total", "EUR", "5.00", "50.00", "-", "16.45"],
                         ["total", "USD", "15.00", "1,110.00", "1,000.00", "50.82"]]


def test_csv_names_each_rows_currency(config):
    rows = list(csv.DictReader(io.StringIO(report(config, "--format", "csv"))))
    assert {(row["team"], row["currency"]): float(row["cost"]) for row in rows} == pytest.approx(BY_TEAM)


def test_json_has_no_one_total_but_one_per_currency_and_each_rows_currency(config):
    document = json.loads(report(config, "--format", "json"))
    assert document["currency"] is None and document["total_cost"] is None
    assert document["total_costs"] == pytest.approx(TOTALS) and list(document["total_costs"]) == ["EUR", "USD"]
    assert {(row["team"], row["currency"]): row["cost"] for row in document["rows"]} == pytest.approx(BY_TEAM)


def test_a_range_in_one_currency_keeps_its_shape(config):
    """Existing consumers read `currency` and `total_cost`; the rows carry no currency of their own."""
    result = CliRunner().invoke(main, ["report", "--team", "robotics", "--from", "2026-11-01", "--to", "2026-11-01",
                                       "--format", "json", "--config", str(config)])
    document = json.loads(result.stdout)
    assert (document["currency"], document["total_cost"], document["total_costs"]) == ("USD", 12.0, {"USD": 12.0})
    assert all("currency" not in row for row in document["rows"])


def test_the_html_report_writes_both_totals(config):
    page = report(config, "--format", "html")
    assert "16.45 EUR + 50.82 USD" in page and "67.27" not in page


def test_serves_costs_answer_is_the_reports(config):
    app = create_app(load_config(config)).test_client()
    answer = get(app, f"/api/v1/costs?{RANGE}&by=team", "root")
    assert answer.status_code == 200, answer.text
    assert answer.json == json.loads(report(config, "--format", "json"))


def test_the_mcp_costs_answer_is_the_reports_and_matches_its_schema(config):
    """The SDK's client checks the structured answer against the tool's output schema."""
    loaded = load_config(config)
    server = build_server(loaded, open_ledger(loaded.database), lambda ctx: "root")

    async def session():
        async with Client(server) as client:
            return await client.call_tool("costs", {"by": "team", "first_day": "2026-11-01",
                                                    "last_day": "2026-11-20"})

    result = anyio.run(session)
    assert not result.is_error, result.content[0].text
    assert result.structured_content == json.loads(report(config, "--format", "json"))


def test_a_budget_is_not_compared_with_spend_in_two_currencies(config):
    """robotics' budget of 100 is one amount; its November is 50.70 USD and 5.90 EUR, which add up to no figure to
    compare it with (it read 56.60 spent, the two added): refused, naming both."""
    result = CliRunner().invoke(main, ["report", "--team", "robotics", *NOVEMBER, "--config", str(config)])
    assert result.exit_code == 2 and "EUR and USD" in result.stderr and "budget" in result.stderr, result.output


def test_each_persons_digest_is_in_their_own_rows_currency(config, tmp_path):
    """alice's namespaces ran on jaguar (USD), bob's on ibis (EUR): each letter is in its own currency (both read
    USD, the configured one, bob's 14.75 EUR among them); a person whose own rows are in two is refused, naming both."""
    engine = open_ledger(load_config(config).database)
    digests = {d.uid: d for d in personal_digests(engine, date(2026, 11, 19), DAY, "USD", "")}
    assert {uid: (d.currency, round(d.cost, 2)) for uid, d in digests.items()} == {
        "alice": ("USD", 37.20), "bob": ("EUR", 14.75)}  # 12.00 + 24.00 + 1.20; 2.95 + 5.90 + 5.90
    assert person_letter(digests["bob"]).subject == "Your cluster costs 2026-11-19 to 2026-11-20: 14.75 EUR"
    both = open_ledger(priced_in_two(write_ledger(tmp_path / "ledger.db")))
    with both.begin() as conn:
        conn.execute(update(chargeback).where(chargeback.c.owner == "alice", chargeback.c.day == DAY)
                     .values(currency="EUR"))
    with pytest.raises(RenderError, match="alice.*EUR and USD"):
        personal_digests(both, date(2026, 11, 19), DAY, "USD", "")


HALF_CENT = Decimal("0.0005")  # amounts on a grid of half a tenth of a cent: ties to round are frequent


@st.composite
def two_currency_ledgers(draw) -> dict[date, list[tuple]]:
    """Up to three days of rows of a few teams on jaguar (USD) and ibis (EUR), costs on a grid that makes halves
    frequent, credits negative as the ledger writes them."""
    ledger: dict[date, list[tuple]] = {}
    for day in draw(st.lists(st.sampled_from([date(2026, 11, 18), date(2026, 11, 19), DAY]), min_size=1, unique=True)):
        keys = draw(st.lists(st.tuples(st.sampled_from(["jaguar", "ibis"]), st.sampled_from(["a", "b", "c"]),
                                       st.sampled_from(["robotics", "vision"]), st.sampled_from(["cpu", "credit-gpu"])),
                             unique=True, max_size=10))
        ledger[day] = [(cluster, namespace, team, None, resource, "", 1.0, 0.0,
                        float(draw(st.integers(0, 40_000_000)) * HALF_CENT * (-1 if resource.startswith("credit") else 1)))
                       for cluster, namespace, team, resource in keys]
    return ledger


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(ledger=two_currency_ledgers(), by=st.sampled_from(["team", "namespace", "cluster", "day"]))
def test_each_currencys_total_is_its_own_rows_sum_to_the_cent_in_every_format(tmp_path_factory, ledger, by):
    """Random ledgers in SQLite with rows in USD and EUR: each currency's total, in the report, its table, its JSON
    and its HTML, is the exact decimal sum of that currency's rows rounded once, and no other currency's; so is each
    team's month to date per currency in /metrics."""
    url = priced_in_two(write_ledger(tmp_path_factory.mktemp("ledger") / "ledger.db", ledger))
    engine = open_ledger(url)
    answer = build_report(engine, Subject("all"), date(2026, 11, 18), DAY, by, "USD")
    currency = {"jaguar": "USD", "ibis": "EUR"}
    sums: dict[str, Decimal] = {}
    teams: dict[tuple[str, str], Decimal] = {}
    for rows in ledger.values():
        for row in rows:
            sums[currency[row[0]]] = sums.get(currency[row[0]], Decimal(0)) + Decimal(repr(row[8]))
            key = (row[2], currency[row[0]])
            teams[key] = teams.get(key, Decimal(0)) + Decimal(repr(row[8]))
    figures = read_cost_figures(engine, web_config(url))
    assert figures is not None and {key: cents(amount) for key, amount in figures.month_to_date.items()} == {
        key: amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) + 0 for key, amount in teams.items()}
    expected = {c: amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) + 0 for c, amount in sorted(sums.items())}
    expected = expected or {"USD": Decimal("0.00")}
    assert {c: cents(amount) for c, amount in answer.totals.amounts.items()} == expected
    shown = [line.split() for line in table(answer).splitlines() if re.match(r"total .*\d$", line)]  # not notes
    if len(expected) > 1:
        assert {line[1]: Decimal(line[-1].replace(",", "")) for line in shown} == expected
        assert f"{' + '.join(f'{amount:,.2f} {c}' for c, amount in expected.items())}" in report_html(answer)
    else:
        assert [Decimal(line[-1].replace(",", "")) for line in shown] == list(expected.values())
    document = json.loads(json_text(answer))
    assert {c: cents(amount) for c, amount in document["total_costs"].items()} == expected


def test_each_cost_metric_series_is_in_its_own_rows_currency(config):
    """/metrics labelled every series with the configured USD and added robotics' November up across currencies
    (56.60). By hand, November 20: jaguar's rows in USD, ibis' in EUR; robotics' month to date is 50.70 USD and
    5.90 EUR, one series each (BY_TEAM); robotics' budget stays in the configured currency."""
    loaded = load_config(config)
    registry = CollectorRegistry()
    figures = read_cost_figures(open_ledger(loaded.database), loaded)
    assert figures is not None
    add_cost_metrics(registry, figures)
    samples = {metric.name: [(s.labels, s.value) for s in metric.samples] for metric in registry.collect()}
    assert {(labels["cluster"], labels["team"], labels["resource"], labels["currency"]): f"{cents(value):,.2f}"
            for labels, value in samples["billing_cost"]} == {
        ("jaguar", "robotics", "gpu", "USD"): "24.00", ("jaguar", "robotics", "cpu", "USD"): "1.20",
        ("jaguar", "robotics", "memory", "USD"): "1.50", ("jaguar", "platform", "cpu", "USD"): "0.12",
        ("ibis", "robotics", "gpu", "EUR"): "5.90", ("ibis", "vision", "gpu", "EUR"): "5.90",
        ("ibis", "unallocated", "cpu", "EUR"): "1.70"}
    assert {(labels["team"], labels["currency"]): value for labels, value in samples["billing_month_to_date_cost"]
            } == pytest.approx(BY_TEAM)
    assert [(labels, value) for labels, value in samples["billing_month_budget"]] == [
        ({"team": "robotics", "currency": "USD"}, 100.0)]


def test_the_archive_shows_each_months_total_per_currency(config):
    """The archive added November's days up across currencies (67.27). By hand: November 20 is 26.82 USD
    (24 + 1.20 + 1.50 + 0.12) and 13.50 EUR (5.90 + 5.90 + 1.70), November 19 12.00 USD and 2.95 EUR, November 1
    12.00 USD: November 16.45 EUR + 50.82 USD (TOTALS); October 240.00 USD alone. A day whose currencies are not
    the day before's shows no change: there is no one figure to take from another."""
    archive = {month.month: month for month in read_archive(open_ledger(load_config(config).database), "USD")}
    november = archive[date(2026, 11, 1)]
    assert str(november.cost) == "16.45 EUR + 50.82 USD" and str(archive[date(2026, 10, 1)].cost) == "240.00 USD"
    assert [(entry.day.day, str(entry.cost)) for entry in november.days] == [
        (20, "13.50 EUR + 26.82 USD"), (19, "2.95 EUR + 12.00 USD"), (10, "0.00 USD"), (1, "12.00 USD")]
    text = render_template("archive.html.j2", archive=tuple(archive.values()), published=set())
    page = read_page(text)
    assert page.tables["month-2026-11"][1] == ["2026-11-20 Fri", "13.50 EUR + 26.82 USD", "–", "–"]
    assert page.tables["month-2026-11"][-1] == ["November", "16.45 EUR + 50.82 USD", "", ""]
    assert "16.45 EUR + 50.82 USD on the 4 of 30 days that ran" in text and "67.27" not in text


def test_what_was_held_before_running_is_per_currency(tmp_path):
    """What pods held before they ran was summed per resource whatever its currency. By hand, on November 20 (HELD):
    alice's CPU on jaguar, 4 core-h, 0.048 USD; bob's on ibis, now in EUR, 2/3 + 2/3 core-h, 0.008 + 0.008 = 0.016 EUR
    (together they read 0.06 USD); the GPUs on jaguar 1.20 + 3.20 + 112.00 = 116.40 USD."""
    engine = open_ledger(priced_in_two(write_held_ledger(tmp_path / "ledger.db")))
    with engine.begin() as conn:
        conn.execute(update(bound_pending).where(bound_pending.c.namespace == "bob").values(currency="EUR"))
    answer = build_report(engine, Subject("all"), DAY, DAY, "team", "USD")
    document = json.loads(json_text(answer))
    assert {(row["resource"], row["currency"]): (round(row["quantity"], 6), f"{cents(row['cost']):.2f}")
            for row in document["held_before_running"]} == {
        ("cpu", "USD"): (4.0, "0.05"), ("cpu", "EUR"): (round(4 / 3, 6), "0.02"), ("gpu", "USD"): (48.5, "116.40")}
    held = [line for line in table(answer).splitlines() if line.startswith("held before running")]
    assert [line.split(",")[1].strip() for line in held] == ["0.02 EUR", "0.05 USD", "116.40 USD"]
