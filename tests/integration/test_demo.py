"""The README's first command: the demo runs with no servers at all; and what its pages and emails show."""

import io
import json
import re
import shutil
import stat
from datetime import date
from decimal import Decimal
from email import message_from_bytes, policy
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import create_engine

from billing.cli import main
from billing.config import CostRecovery, load_config
from billing.ledger.database import open_ledger
from billing.money import cents, total
from billing.publish.statement import close_month
from billing.web.access import Viewer
from billing.web.app import create_app
from billing.web.tools import Tools
from fixtures.demo import world as demo
from tests.helpers.demo import demo_run  # noqa: F401 (pytest fixtures)
from tests.helpers.focus13 import check_focus_13, ratio
from tests.helpers.focus14 import check_focus_14
from tests.helpers.html_tables import read_page
from tests.helpers.serve import get

MONEY = re.compile(r"^([+-]?[\d,]+\.\d\d) CHF$")


def test_the_demo_bills_three_days_from_recorded_answers(demo_run, monkeypatch):
    tmp_path = demo_run
    monkeypatch.chdir(tmp_path)

    with create_engine("sqlite:///demo-out/billing.db").connect() as conn:
        ledger = pd.read_sql("select * from chargeback", conn)
        completed = pd.read_sql("select day from completed_days", conn)
    assert sorted(ledger["day"].unique()) == ["2026-11-16", "2026-11-17", "2026-11-18"]
    assert len(completed) == 3
    assert set(ledger["cluster"]) == set(demo.CLUSTERS)
    assert set(ledger["currency"]) == {"CHF"}
    # every directory team with a namespace, the unknown team-quantum and unplaced people land somewhere
    assert set(demo.TEAMS) <= set(ledger["team"]) and "unallocated" in set(ledger["team"])
    assert {"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"} <= set(ledger["gpu_model"])
    # alice is on robotics and vision: her namespace is split half and half
    alice = ledger[(ledger["namespace"] == "alice")].groupby("team")["quantity"].sum()
    assert sorted(alice.index) == ["robotics", "vision"] and alice["robotics"] == alice["vision"]

    reports = tmp_path / "demo-out" / "reports"
    assert (reports / "2026-11-18" / "index.html").exists()
    assert len(list((reports / "2026-11-18" / "teams").glob("*.html"))) == len(set(ledger["team"]))

    outbox = list((tmp_path / "demo-out" / "outbox").glob("2026-11-18-*.eml"))
    leads = sum(len(demo.leads(team, members)) for team, members in demo.memberships().items())
    assert len(outbox) == 1 + leads  # the admin summary and one per team lead
    admin = next(message_from_bytes(p.read_bytes(), policy=policy.default) for p in outbox if "admins" in p.name)
    day_total = ledger.loc[ledger["day"] == "2026-11-18", "cost"].sum()
    assert f"{day_total:,.2f} CHF" in admin["Subject"]


def test_reports_are_for_billings_user_and_group_only(demo_run):
    """They name people and what each spent: 0644 pages in 0755 directories showed that to every local user."""
    reports = demo_run / "demo-out" / "reports"
    files = [path for path in reports.rglob("*") if path.is_file()]
    directories = [reports, *(path for path in reports.rglob("*") if path.is_dir())]
    assert files and {stat.S_IMODE(path.stat().st_mode) for path in files} == {0o640}
    assert {stat.S_IMODE(path.stat().st_mode) for path in directories} == {0o750}


def _amount(cell: str) -> Decimal | None:
    found = MONEY.match(cell)
    return Decimal(found.group(1).replace(",", "")) if found else None


def test_on_every_page_of_the_demo_rows_add_up_to_the_totals(demo_run):
    """Read back as a reader sees them: in every table with a total row, each money column's rows add up to
    its total, and the totals are the headline figures."""
    pages = sorted((demo_run / "demo-out" / "reports").glob("2026-11-1*/**/*.html"))
    assert len(pages) == 3 * 12  # the admin page and 11 team pages a day
    checked = 0
    for page_path in pages:
        page = read_page(page_path.read_text())
        for name, rows in page.tables.items():
            if rows[-1][0] != "Total":
                continue
            body, total = rows[1:-1], rows[-1]
            for column, cell in enumerate(total):
                if column == 0 or _amount(cell) is None or "Change" in rows[0][column]:
                    continue  # a change is not the sum of the rows' changes where a day before was never run
                assert sum(_amount(row[column]) for row in body) == _amount(cell), (page_path, name, rows[0][column])
                checked += 1
        headline = _amount(page.texts["day-total"])
        for name in ("teams", "usage", "owners", "team-usage", "team-namespaces"):
            if name in page.tables:
                assert _amount(page.tables[name][-1][2 if name in ("teams", "owners") else 3]) == headline, name
    assert checked > 3 * 12 * 3


def test_the_admin_email_text_keeps_its_columns(demo_run):
    """Plain-text tables: each amount column ends at one position on every line of its table."""
    path = next((demo_run / "demo-out" / "outbox").glob("2026-11-18-admins-*.eml"))
    text = message_from_bytes(path.read_bytes(), policy=policy.default).get_body(("plain",)).get_content()
    blocks = re.split(r"\n(?=[A-Z][A-Z ]+\b)", text)
    usage = next(b for b in blocks if b.startswith("CLUSTERS AND RESOURCES")).splitlines()[1:]
    rows = [line for line in usage if line.endswith(" CHF")]
    assert any("Reserved pool" in line for line in rows) and any("credited" in line for line in rows)
    assert len({len(line) for line in rows}) == 1  # costs end in one column
    quantities = {re.search(r"(GPU|core|GiB)-h", line).end() for line in rows if "-h " in line}
    assert len(quantities) == 1  # and quantities in another
    teams = next(b for b in blocks if b.startswith("TEAMS")).splitlines()[1:]
    ends = [tuple(m.end() for m in re.finditer(r"CHF|Month to date|Cost|Change", line)) for line in teams if line]
    columns = set(ends[0])  # the header's; a Rounding row has no change, so it has fewer
    assert len(columns) == 3 and all(set(line) <= columns for line in ends), ends
    assert re.search(r"never run: 27 days, 2026-10-20 … 2026-11-15", text)
    assert text.count("never run") == 1


def test_the_table_keeps_its_first_column_telling_rows_apart(demo_run, monkeypatch):
    """Squeezed into 80 columns, every day was `2026-11-…` and two GPU models were the same `NVIDIA-…`."""
    monkeypatch.chdir(demo_run)
    monkeypatch.setenv("COLUMNS", "80")

    def first_column(*args: str) -> list[str]:
        result = CliRunner().invoke(main, ["report", "--config", "fixtures/demo/billing.yaml", "--from", "2026-11-16",
                                           "--to", "2026-11-18", *args])
        assert result.exit_code == 0, result.output
        rows = result.stdout.splitlines()[2:]
        shown = rows[:rows.index(next(r for r in rows if r.startswith("total")))]
        return [row.split("  ")[0].strip() for row in shown if not row.startswith("Rounding")]

    assert first_column("--team", "robotics", "--by", "day") == ["2026-11-16", "2026-11-17", "2026-11-18"]
    models = first_column("--all-teams", "--by", "gpu_model")
    assert len(set(models)) == len(models) and "(none)" in models


def test_a_report_to_a_later_day_forecasts_what_the_page_of_the_last_day_run_does(demo_run, monkeypatch):
    """Up to the 25th, with the 19th to the 25th never run, the report forecast the month to date alone (the
    never-run days as zero), far from what the robotics page and email of the 18th said."""
    monkeypatch.chdir(demo_run)
    page = (demo_run / "demo-out" / "reports" / "2026-11-18" / "teams" / "robotics.html").read_text()
    on_the_page = re.search(r'id="budget-forecast">([\d,.]+) CHF<', page)
    assert on_the_page, page
    result = CliRunner().invoke(main, ["report", "--config", "fixtures/demo/billing.yaml", "--team", "robotics",
                                       "--from", "2026-11-16", "--to", "2026-11-25"])
    assert result.exit_code == 0, result.output
    assert f"forecast for November 30: {on_the_page.group(1)} CHF" in result.stdout


def test_by_resource_names_unrequested_capacity_and_sums_no_units_of_different_kinds(demo_run, monkeypatch):
    """`--by resource` showed the ledger's `idle-gpu` (the only place still saying idle) and summed GPU-,
    slice- and replica-hours into one "held unit-h" total."""
    monkeypatch.chdir(demo_run)
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(main, ["report", "--config", "fixtures/demo/billing.yaml", "--team", "robotics",
                                       "--from", "2026-11-16", "--to", "2026-11-18", "--by", "resource"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "idle-" not in result.stdout and any(line.startswith("Unrequested capacity (shared), GPU")
                                                 for line in lines)
    # resource, GPU-h (physical), core-h, GiB-h, storage GiB-h, held unit-h
    assert lines[1].split()[5:9] == ["storage", "GiB-h", "held", "unit-h"]
    total = next(line for line in lines if line.startswith("total")).split()
    assert total[5] == "-"  # held unit-h: a total of slices, replicas and GPUs together is no number


def test_one_word_for_each_thing_on_pages_emails_reports_and_focus(demo_run, monkeypatch):
    """The owner-less group was "(team namespaces)" on pages and "(no owner)" in `report`; the part no workload
    requested was an unexplained "(namespace)"; FOCUS descriptions still said "idle"."""
    monkeypatch.chdir(demo_run)
    monkeypatch.setenv("COLUMNS", "200")
    texts = [path.read_text() for path in (demo_run / "demo-out" / "reports").rglob("*.html")]
    texts += [message_from_bytes(path.read_bytes(), policy=policy.default).get_body(("plain",)).get_content()
              for path in (demo_run / "demo-out" / "outbox").glob("*.eml")]
    for by in ("person", "workload"):
        result = CliRunner().invoke(main, ["report", "--config", "fixtures/demo/billing.yaml", "--team", "robotics",
                                           "--from", "2026-11-16", "--to", "2026-11-18", "--by", by])
        assert result.exit_code == 0, result.output
        texts.append(result.stdout)
    focus = CliRunner().invoke(main, ["export", "--config", "fixtures/demo/billing.yaml", "--from", "2026-11-16",
                                      "--to", "2026-11-18"])
    assert focus.exit_code == 0
    everything = "\n".join([*texts, focus.stdout])
    assert "(no owner)" not in everything and "(namespace)" not in everything
    assert "(team namespaces)" in texts[-2]  # report --by person
    assert "share of the unrequested" in focus.stdout and "share of the idle" not in focus.stdout
    shown = [text for text in texts if "(no workload)" in text]
    assert shown and all(re.search(r"\(no workload\)(</code>)? is what no pod requested", text) for text in shown)


def test_slices_sold_as_whole_gpus_count_as_the_physical_gpus_behind_them(demo_run):
    """The demo's single-strategy MIG node: one A100 in seven 1g.5gb slices all day was 168 GPU-h of capacity."""
    page = read_page((demo_run / "demo-out" / "reports" / "2026-11-18" / "index.html").read_text())
    sliced = [row for row in page.tables["capacity"] if "MIG-1g.5gb" in row[1]]
    assert [row[2] for row in sliced] == ["24.00 GPU-h"]


def test_the_demos_focus_export_passes_the_focus_13_checks(demo_run, monkeypatch):
    """Three days of a cluster sharing its unrequested capacity and renting two GPU nodes to genomics as a pool, and
    of jaguar billing its teams' Kueue quotas."""
    monkeypatch.chdir(demo_run)
    result = CliRunner().invoke(main, ["export", "--config", "fixtures/demo/billing.yaml", "--from", "2026-11-16",
                                       "--to", "2026-11-18"])
    assert result.exit_code == 0, result.output
    focus = pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, na_values=[""])
    check_focus_13(focus)
    methods = focus["AllocatedMethodId"].dropna()
    assert set(methods) == {"billing/unrequested-share", "billing/reserved-pool", "billing/kueue-quota"}
    pool = focus[focus["AllocatedMethodId"] == "billing/reserved-pool"]
    assert set(pool["BillingAccountId"]) == {"genomics"} and (pool["AllocatedMethodDetails"].map(ratio) > 0).all()
    quota = focus[focus["AllocatedMethodId"] == "billing/kueue-quota"]  # vision's, nlp's and speech's queues on jaguar
    assert set(quota["BillingAccountId"]) == {"vision", "nlp", "speech"} and set(quota["ProviderName"]) == {"jaguar"}
    assert set(quota["ResourceType"]) == {"Kueue quota"} and set(quota["ChargeCategory"]) == {"Usage"}
    # the same money as the ledger: per team, in credits, and each pool's and quota's capacity rows in its split
    with create_engine(f"sqlite:///{demo_run / 'demo-out' / 'billing.db'}").connect() as conn:
        ledger = pd.read_sql("select * from chargeback", conn)
    assert focus.groupby("BillingAccountId")["BilledCost"].sum().to_dict() == pytest.approx(
        ledger.groupby("team")["cost"].sum().to_dict())
    credits = ledger["resource"].str.startswith(("credit-", "lent-"))
    assert focus.loc[focus["ChargeCategory"] == "Credit", "BilledCost"].sum() == pytest.approx(
        ledger.loc[credits, "cost"].sum())
    capacity = ledger[ledger["resource"].str.startswith(("reserved-", "quota-"))]
    split = pd.concat([pool, quota])
    assert split.groupby("BillingAccountId")["BilledCost"].sum().to_dict() == pytest.approx(
        capacity.groupby("team")["cost"].sum().to_dict())


def test_the_demos_focus_14_datasets_pass_the_1_4_checks_and_invoice_its_statement(demo_run, monkeypatch):
    """The demo's November, open: its statement as provisional invoices, a billing period per cluster, Open."""
    monkeypatch.chdir(demo_run)

    def dataset(name: str) -> pd.DataFrame:
        result = CliRunner().invoke(main, ["export", "--config", "fixtures/demo/billing.yaml", "--from", "2026-11-16",
                                           "--to", "2026-11-18", "--focus-version", "1.4", "--dataset", name])
        assert result.exit_code == 0, result.output
        return pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, na_values=[""])

    usage, detail, periods = dataset("cost-and-usage"), dataset("invoice-detail"), dataset("billing-period")
    check_focus_14(usage, detail, periods)
    statement = CliRunner().invoke(main, ["statement", "--config", "fixtures/demo/billing.yaml", "--month", "2026-11",
                                          "--format", "json"])
    assert statement.exit_code == 0, statement.output
    teams = {team["team"]: cents(team["total"]) for team in json.loads(statement.stdout)["teams"]}
    invoiced = detail.groupby("BillingAccountId")["BilledCost"].agg(lambda amounts: cents(total(amounts)))
    assert invoiced.to_dict() == teams  # to the cent, each team's figure rounded once
    assert set(detail["InvoiceIssueStatus"]) == {"Open"} and set(periods["BillingPeriodStatus"]) == {"Open"}
    assert set(periods["InvoiceIssuerName"]) == set(usage["InvoiceIssuerName"])


def test_the_demos_newest_cluster_bills_kueue_quotas(demo_run):
    """jaguar admits its batch work through Kueue (fixtures/demo/world.py with_kueue): vision's H100 quota of 4 is
    raised to 6 at noon of the second day, nlp lends vision what it borrows in the first 8 hours of each day."""
    with create_engine(f"sqlite:///{demo_run / 'demo-out' / 'billing.db'}").connect() as conn:
        ledger = pd.read_sql("select * from chargeback where cluster = 'jaguar'", conn)
    quota = ledger[ledger["resource"] == "quota-gpu"].groupby("team")["quantity"].sum()
    assert quota.to_dict() == {"vision": 4 * 36 + 6 * 36, "nlp": 4 * 72, "speech": 2 * 72}  # GPU-hours over 3 days
    lent = ledger[ledger["resource"] == "lent-gpu"]
    assert set(lent["team"]) == {"nlp"} and set(lent["namespace"]) == {"team-vision"} and (lent["cost"] < 0).all()


DEMO_CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "billing.yaml"


def test_the_demos_check_has_its_kueue_line_from_the_recorded_answers():
    """jaguar's three ClusterQueues of the cohort research (fixtures/demo/world.py `with_kueue`), each to its team
    (fixtures/demo/billing.yaml), asked as the run asks them: the recordings answer it."""
    result = CliRunner().invoke(main, ["check", "--date", "2026-11-17", "--config", str(DEMO_CONFIG)])
    [line] = [line for line in result.stdout.splitlines() if line[6:26].strip() == "kueue jaguar"]
    assert line.rsplit(" (", 1)[0] == ("ok    kueue jaguar          ClusterQueues on 2026-11-17: nlp-gpu (cohort research) "
                                       "-> nlp; speech-gpu (cohort research) -> speech; vision-gpu (cohort research) "
                                       "-> vision")


def test_the_demos_check_passes_on_a_recorded_day():
    """A new user's `billing check` of the demo failed its `series` and `storage` lines on every recorded day: they
    ask questions of their own, which no recording holds. Lines the recordings cannot answer say so, as `requests`
    and `held` do; the database, not created yet, is the one warning."""
    result = CliRunner().invoke(main, ["check", "--date", "2026-11-17", "--config", str(DEMO_CONFIG)])
    statuses = {line[6:26].strip(): line[:5].strip() for line in result.stdout.splitlines()}
    assert result.exit_code == 0 and {name for name, status in statuses.items() if status != "ok"} <= {"database"}
    assert {statuses[f"{line} {cluster}"] for line in ("series", "storage") for cluster in ("jaguar", "ibis")} == {"ok"}


def test_the_demo_without_its_flavor_refuses_the_day_instead_of_billing_its_quotas_twice(tmp_path):
    """Without `h100: NVIDIA-H100-80GB-HBM3` the day was billed 12,319.96 instead of 12,579.16: the quotas at gpu_hour
    under no model, the queues' H100 use no longer credited. Now run and check name flavor, queues and key."""
    settings = yaml.safe_load(DEMO_CONFIG.read_text())
    for cluster in settings["clusters"]:
        cluster["prometheus"]["replay"] = str(DEMO_CONFIG.parent / cluster["prometheus"]["replay"])
    del settings["clusters"][0]["kueue"]["flavors"]
    settings.update(database=f"sqlite:///{tmp_path / 'ledger.db'}", output_dir=str(tmp_path / "reports"),
                    directory={**settings["directory"], "ldif": str(DEMO_CONFIG.parent / "directory.ldif")},
                    email={"enabled": False})
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))  # gpu_resources in order: the recorded questions'
    sentence = ("ClusterQueues nlp-gpu, speech-gpu and vision-gpu hold GPUs of flavor h100, which "
                "clusters[0].kueue.flavors does not name: add h100 with the GPU model its nodes have")

    run = CliRunner().invoke(main, ["run", "--date", "2026-11-17", "--config", str(path)])
    checked = CliRunner().invoke(main, ["check", "--date", "2026-11-17", "--config", str(path)])

    assert run.exit_code == 1 and run.stderr.splitlines()[-1] == (
        f"billing: cluster jaguar on 2026-11-17: {sentence}; nothing was billed and the day stays missing")
    assert not (tmp_path / "ledger.db").exists() or pd.read_sql(
        "select * from chargeback", create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")).empty
    [line] = [line for line in checked.stdout.splitlines() if line[6:26].strip() == "kueue jaguar"]
    assert checked.exit_code == 1 and line.startswith("FAIL") and sentence in line


@pytest.mark.parametrize(("cluster", "key", "name", "written"), [
    (1, "gpu_models", "NVIDIA-H100-80GB-HBM3", "nvidia-h100-80gb-hbm3"),
    (0, "priority_classes", "batch-low", "Batch-Low"),
])
def test_a_price_keyed_by_a_name_in_another_case_refuses_the_day(tmp_path, cluster, key, name, written):
    """With ibis' H100 price keyed `nvidia-h100-80gb-hbm3` the day was billed with exit 0, its H100-hours at
    gpu_hour instead of 4.10; with jaguar's `Batch-Low: 0.5` its batch pods paid full price. The store's names are
    Kubernetes' (node labels, PriorityClass objects), case-sensitive: a key differing only in case is a typo."""
    settings = yaml.safe_load(DEMO_CONFIG.read_text())
    for each in settings["clusters"]:
        each["prometheus"]["replay"] = str(DEMO_CONFIG.parent / each["prometheus"]["replay"])
    prices = settings["clusters"][cluster]["prices"]
    prices[key] = {written if key_name == name else key_name: value for key_name, value in prices[key].items()}
    settings.update(database=f"sqlite:///{tmp_path / 'ledger.db'}", output_dir=str(tmp_path / "reports"),
                    directory={**settings["directory"], "ldif": str(DEMO_CONFIG.parent / "directory.ldif")},
                    email={"enabled": False})
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    words = {"gpu_models": "GPU model", "priority_classes": "priority class"}[key]

    run = CliRunner().invoke(main, ["run", "--date", "2026-11-17", "--config", str(path)])
    checked = CliRunner().invoke(main, ["check", "--date", "2026-11-17", "--config", str(path)])

    sentence = (f"{words} {name} is not in clusters[{cluster}].prices.{key}, which names {written}: names are "
                f"case-sensitive, write it as the store does ({name})")
    name_of = settings["clusters"][cluster]["name"]
    assert run.exit_code == 1 and run.stderr.splitlines()[-1] == (
        f"billing: cluster {name_of} on 2026-11-17: {sentence}; nothing was billed and the day stays missing")
    if key == "gpu_models":  # the nodes' models are in what the check asks of capacity
        [line] = [line for line in checked.stdout.splitlines() if line[6:26].strip() == f"figures {name_of}"]
        assert line.startswith("WARN") and f"{sentence} (the run refuses a day on which a pod uses it)" in line


def demo_copy(demo_run: Path, tmp_path: Path, **settings_changed) -> Path:
    """The demo's config and a copy of its billed ledger in `tmp_path`, with some keys replaced; returns the
    config's path."""
    shutil.copy(demo_run / "demo-out" / "billing.db", tmp_path / "billing.db")
    settings = yaml.safe_load((demo_run / "fixtures" / "demo" / "billing.yaml").read_text())
    settings |= {"database": f"sqlite:///{tmp_path / 'billing.db'}", "output_dir": str(tmp_path / "reports"),
                 **settings_changed}
    settings["directory"]["ldif"] = str(demo_run / "fixtures" / "demo" / "directory.ldif")
    for cluster in settings["clusters"]:
        cluster["prometheus"]["replay"] = str(demo_run / "fixtures" / "demo" / cluster["prometheus"]["replay"])
    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(settings))
    return tmp_path / "billing.yaml"


def test_a_closed_november_with_cost_recovery_reads_as_its_statement_everywhere(demo_run, tmp_path):
    """Issue 52, on the demo's ledger: November closed with jaguar recovering 20,000.00 CHF, robotics' November read
    one figure in the statement and FOCUS and another in `billing report`, serve, MCP and its budget ("91.9% spent",
    and a forecast for a month that had ended). Now each is the statement's, and says cost recovery is in it."""
    config = load_config(demo_copy(demo_run, tmp_path, web={"admins": ["root"]}))
    close_month(open_ledger(config.database), date(2026, 11, 1), "finance", date(2026, 12, 20), "CHF", {},
                allow_missing=True, recover={"jaguar": CostRecovery(monthly_cost=20000)})

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, [*args, "--config", str(tmp_path / "billing.yaml")])
        assert result.exit_code == 0, result.output
        return result.stdout

    november = ["--from", "2026-11-01", "--to", "2026-11-30"]
    statement = json.loads(cli("statement", "--month", "2026-11", "--team", "robotics", "--format", "json"))
    figure = f"{Decimal(repr(statement['total'])).quantize(Decimal('0.01')):,.2f}"
    focus = pd.read_csv(io.StringIO(cli("export", *november, "--format", "focus")))
    assert f"{focus.loc[focus['BillingAccountId'] == 'robotics', 'BilledCost'].sum():,.2f}" == figure
    report = json.loads(cli("report", "--team", "robotics", *november, "--format", "json"))
    assert f"{report['total_cost']:,.2f}" == f"{report['month_to_date']:,.2f}" == figure
    assert report["month_closed"] is True and report["forecast"] is None
    table = cli("report", "--team", "robotics", *november)
    assert "cost recovery included" in table and "Cost recovery (2026-11) is in these figures" in table
    client = create_app(config).test_client()
    api = get(client, "/api/v1/costs?from=2026-11-01&to=2026-11-30&team=robotics", "root").json
    page = read_page(get(client, "/teams/robotics?from=2026-11-01&to=2026-11-30", "root").text)
    assert f"{api['total_cost']:,.2f}" == page.texts["range-total"].split()[0] == figure
    budget = Tools(open_ledger(config.database), config).budget(Viewer("root", True, ()), "robotics", "2026-11-30")
    assert (f"{budget['month_to_date']:,.2f}", budget["month_closed"], budget["forecast"]) == (figure, True, None)


def test_billing_close_writes_the_journal_of_the_demos_billed_november(demo_run, tmp_path, monkeypatch):
    """The demo's three days as `billing backfill` billed them, closed with robotics split 60/40 between two grants
    of which the first ends on November 16 (the department takes its 60 % from the 17th): the journal's lines
    against the figures `billing report` gives of the same days, and the statement's total."""
    accounts = {"names": {"NSF-2231": "NSF CNS-2231", "NIH-R01": "NIH R01", "DEPT": "Department", "RC": "Unfunded",
                          "REV": "Revenue"},
                "assignments": [
                    {"team": "robotics", "account": "NSF-2231", "percent": 60, "from": "2026-09-01", "to": "2026-11-16"},
                    {"team": "robotics", "account": "NIH-R01", "percent": 40, "from": "2026-09-01"},
                    {"team": "robotics", "account": "DEPT", "percent": 60, "from": "2026-11-17"}],
                "default_account": "RC", "revenue_account": "REV", "revenue_object_code": "4500",
                "default_object_code": "6400"}
    letterhead = {"issuer": "Research Computing", "address": ["4 Campus Drive"]}
    path = str(demo_copy(demo_run, tmp_path, accounts=accounts, account_invoices=letterhead))
    monkeypatch.setattr("billing.publish.answers.yesterday", lambda zone: date(2026, 12, 20))  # November has ended

    def cli(*args: str) -> str:
        result = CliRunner().invoke(main, [*args, "--config", path])
        assert result.exit_code == 0, result.output
        return result.stdout

    def robotics(first: str, last: str) -> Decimal:
        report = json.loads(cli("report", "--team", "robotics", "--from", first, "--to", last, "--format", "json"))
        return Decimal(repr(report["total_cost"]))

    statement = json.loads(cli("statement", "--month", "2026-11", "--format", "json"))
    closed = cli("close", "--month", "2026-11", "--allow-missing", "--by", "finance")
    journal = tmp_path / "reports" / "journals" / "journal-2026-11-1.csv"
    assert f"journal for finance: {journal}" in closed
    lines = pd.read_csv(journal, dtype={"object_code": str}).fillna(0)
    to_cent = Decimal("0.01")
    debits = {account: Decimal(repr(float(amount))).quantize(to_cent)
              for account, amount in lines.groupby("account")["debit"].sum().items()}
    # NSF pays 60 % of robotics' November 16, the department 60 % of the 17th and 18th, NIH 40 % of all three;
    # each account's month rounded once, the leftover cent (if any) to the largest
    parts = {"NSF-2231": robotics("2026-11-16", "2026-11-16") * 6 / 10,
             "DEPT": robotics("2026-11-17", "2026-11-18") * 6 / 10,
             "NIH-R01": robotics("2026-11-16", "2026-11-18") * 4 / 10}
    for account, part in parts.items():
        assert abs(debits[account] - part.quantize(to_cent)) <= to_cent, account
    total = Decimal(repr(statement["total"])).quantize(to_cent)
    assert sum(debits.values()) == total  # every other team's charges are the default account's
    assert debits["RC"] == total - sum(debits[account] for account in parts)
    assert list(lines["account"])[-1] == "REV" and Decimal(repr(float(lines["credit"].iloc[-1]))) == total
    assert set(lines["object_code"]) == {"6400", "4500"}  # no object codes configured: the default's
    assert list(lines["period"].unique()) == ["2026-11"]
    # an invoice per account, as HTML and PDF, each printed, each total due the journal's debit of the account
    folder = tmp_path / "reports" / "invoices" / "2026-11-1"
    charged = {account: debit for account, debit in debits.items() if account != "REV"}  # the revenue is credited
    invoices = [folder / f"{account}{suffix}" for account in sorted(charged) for suffix in (".html", ".pdf")]
    assert [line.removeprefix("invoice: ") for line in closed.splitlines() if line.startswith("invoice: ")] == [
        str(invoice) for invoice in invoices]
    for account, debit in charged.items():
        page = read_page((folder / f"{account}.html").read_text())
        assert page.texts["total"] == f"{debit:,.2f} CHF", account
        assert (folder / f"{account}.pdf").read_bytes().startswith(b"%PDF-")
    # closed again without reopening: refused, and no second journal
    again = CliRunner().invoke(main, ["close", "--month", "2026-11", "--allow-missing", "--config", path])
    assert again.exit_code == 2 and "reopen it first" in again.output
    assert [file.name for file in journal.parent.iterdir()] == ["journal-2026-11-1.csv"]
