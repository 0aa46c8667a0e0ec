"""A cloud provider's FOCUS export summed for one cluster and month, and `billing invoice import`."""

import hashlib
from datetime import date
from decimal import Decimal

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from billing.cli import main
from billing.collect.invoices import InvoiceError, read_invoice
from billing.ledger.database import fetch, open_ledger
from billing.ledger.tables import invoices
from tests.conftest import MINIMAL_CONFIG
from tests.helpers.invoices import HEADER, IBIS, NOVEMBER, row, write_export

NOV = date(2026, 11, 1)


def test_the_clusters_rows_are_summed_exactly(tmp_path):
    # by hand: 1000.10 + 0.20 + 19.70 = 1020.00 (floats would give 1020.0000000000001); the other cluster's row,
    # the other provider's and the row without tags are left out
    path = write_export(tmp_path / "bill.csv", [row("1000.10"), row("0.20"), row("5.00", cluster="jaguar"),
                                                row("7.00", provider="AWS"), row("19.70"),
                                                ("3.00", "CHF", NOVEMBER, NOVEMBER, "Microsoft", "")])
    bill = read_invoice(path, IBIS, "CHF", NOV)
    assert bill.billed_cost == Decimal("1020.00") and (bill.rows_read, bill.rows_matched) == (6, 3)
    assert bill.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and bill.file_name == "bill.csv"


def test_a_byte_order_mark_and_a_quoted_cell_spanning_lines_are_read(tmp_path):
    path = tmp_path / "bill.csv"
    path.write_text('\ufeffBilledCost,BillingCurrency,BillingPeriodStart,ProviderName,Tags,Note\n'
                    '2.50,CHF,2026-11-01T00:00:00Z,Microsoft,"{""cluster"": ""ibis""}","two\nlines"\n'
                    '2.50,CHF,2026-11-01T00:00:00Z,Microsoft,"{""cluster"": ""ibis""}",x\n', encoding="utf-8")
    assert read_invoice(path, IBIS, "CHF", NOV).billed_cost == Decimal("5.00")


def test_a_hundred_thousand_rows_streamed(tmp_path):
    # by hand, in cents: every fourth row is ibis's, costing (i % 100) CHF and (i % 7) cents
    rows = [row(f"{i % 100}.{i % 7:02d}", cluster="ibis" if i % 4 == 0 else "other") for i in range(100_000)]
    path = write_export(tmp_path / "big.csv", rows)
    cents = sum((i % 100) * 100 + i % 7 for i in range(0, 100_000, 4))
    bill = read_invoice(path, IBIS, "CHF", NOV)
    assert bill.billed_cost == Decimal(cents) / 100 and bill.rows_read == 100_000 and bill.rows_matched == 25_000


@pytest.mark.parametrize("rows, header, reason", [
    ([row("1.00")], ["Cost", "Currency", "Period", "ChargePeriodStart", "ProviderName", "Tags"],
     "is not a FOCUS export: it has no BilledCost or BillingCurrency or BillingPeriodStart column"),
    ([row("1.00", currency="USD")], HEADER, "row 2 is billed in 'USD', the configured currency is CHF"),
    ([row("1.00", cluster="jaguar")], HEADER, "none of its 1 rows has ProviderName = 'Microsoft', Tags.cluster = 'ibis'"),
    ([row("one")], HEADER, "row 2 has BilledCost 'one', not a decimal number of ASCII digits"),
    ([("1.00", "CHF", NOVEMBER, NOVEMBER, "Microsoft", "[1]")], HEADER, "row 2 has Tags that are not a JSON object"),
    ([("1.00", "CHF", NOVEMBER, NOVEMBER, "Microsoft")], HEADER[:5], "has no Tags column, which recover.invoice_match names"),
    ([row("1.00", period="November")], HEADER, "row 2 has BillingPeriodStart 'November', not an ISO 8601 date"),
    ([row("-2.00"), row("1.00")], HEADER, "the rows recover.invoice_match selects add up to -1.00 CHF, which no month "
                                          "of a cluster costs (from 0 to below 1,000,000,000,000)"),
])
def test_bad_files_are_refused_with_a_sentence(tmp_path, rows, header, reason):
    path = write_export(tmp_path / "bill.csv", rows, header)
    with pytest.raises(InvoiceError) as refused:
        read_invoice(path, IBIS, "CHF", NOV)
    assert reason in str(refused.value)


def test_a_file_that_is_not_text_or_not_there(tmp_path):
    (tmp_path / "bill.parquet").write_bytes(b"PAR1\xff\xfe\x00")
    with pytest.raises(InvoiceError, match="is not UTF-8 text"):
        read_invoice(tmp_path / "bill.parquet", IBIS, "CHF", NOV)
    with pytest.raises(InvoiceError, match="cannot read .*missing.csv: No such file or directory"):
        read_invoice(tmp_path / "missing.csv", IBIS, "CHF", NOV)


@pytest.fixture
def ledger(tmp_path):
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def invoice_import(tmp_path, write_config, ledger):
    """`billing invoice import ARGS --config …` with cluster ibis recovering its invoice."""
    ibis = {**MINIMAL_CONFIG["clusters"][0], "name": "ibis", "recover": {"invoice_match": IBIS}}
    config = str(write_config(clusters=[MINIMAL_CONFIG["clusters"][0], ibis], currency="CHF", database=ledger))

    def invoke(*args: str):
        return CliRunner().invoke(main, ["invoice", "import", *args, "--config", config])

    return invoke


def kept(ledger: str) -> list[tuple]:
    return [(r["month"], r["cluster"], r["billed_cost"], r["file_name"], r["rows_matched"])
            for r in fetch(open_ledger(ledger), select(invoices).order_by(invoices.c.imported_at))]


def test_invoice_import_records_the_month_once(tmp_path, invoice_import, ledger):
    first = write_export(tmp_path / "november.csv", [row("1000.10"), row("0.20"), row("9.99", cluster="jaguar")])
    second = write_export(tmp_path / "november-corrected.csv", [row("1100.00")])

    done = invoice_import("--cluster", "ibis", "--month", "2026-11", "--by", "finance", str(first))
    assert done.exit_code == 0, done.output
    assert "imported the invoice of cluster ibis for 2026-11: 1,000.30 CHF from 2 of 3 rows of november.csv" in done.output
    again = invoice_import("--cluster", "ibis", "--month", "2026-11", str(second))
    assert again.exit_code == 2 and "was imported from november.csv" in again.output and "--replace replaces it" in again.output
    replaced = invoice_import("--cluster", "ibis", "--month", "2026-11", "--replace", str(second))
    assert replaced.exit_code == 0, replaced.output
    assert kept(ledger) == [(NOV, "ibis", 1100.0, "november-corrected.csv", 1)]
    unmatched = invoice_import("--cluster", MINIMAL_CONFIG["clusters"][0]["name"], "--month", "2026-11", str(first))
    assert unmatched.exit_code == 2 and "has no recover.invoice_match in the config" in unmatched.output
    unknown = invoice_import("--cluster", "heron", "--month", "2026-11", str(first))
    assert unknown.exit_code == 2 and "no cluster named 'heron' in the config (--cluster)" in unknown.output


def refused(result) -> str:
    """The one sentence of an import refused as a usage error (exit 2, no traceback)."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1, result.output
    return result.output


@pytest.mark.parametrize("cost, reason", [
    ("Infinity", "not a decimal number of ASCII digits"),
    ("-inf", "not a decimal number of ASCII digits"),
    ("NaN", "not a decimal number of ASCII digits"),
    ("１２３", "not a decimal number of ASCII digits"),  # fullwidth digits, which Decimal reads as 123
    ("١٢٣", "not a decimal number of ASCII digits"),  # Arabic-Indic digits
    ("1_000", "not a decimal number of ASCII digits"),
    ("1e400", "beyond the 1,000,000,000,000 a month of a cluster can cost"),
    ("9" * 400, "beyond the 1,000,000,000,000 a month of a cluster can cost"),
    ("1e999999999", "beyond the 1,000,000,000,000 a month of a cluster can cost"),
    ("-1e12", "beyond the 1,000,000,000,000 a month of a cluster can cost"),
])
def test_a_cost_that_is_no_finite_amount_is_refused_and_nothing_is_stored(tmp_path, invoice_import, ledger, cost, reason):
    path = write_export(tmp_path / "november.csv", [row("100.00"), row(cost)])
    result = invoice_import("--cluster", "ibis", "--month", "2026-11", str(path))
    assert f"november.csv: row 3 has BilledCost {cost[:40]!r}" in refused(result) or \
        f"november.csv: row 3 has BilledCost {cost[:40]}," in result.output
    assert reason in result.output
    assert kept(ledger) == []


def test_files_whose_costs_add_up_beyond_a_months_cost_are_refused(tmp_path, invoice_import, ledger):
    # each row below the bound, their sum (by hand 1.2e12) beyond it
    path = write_export(tmp_path / "november.csv", [row("600000000000"), row("600000000000")])
    assert "add up to 1,200,000,000,000 CHF, which no month of a cluster costs" in refused(
        invoice_import("--cluster", "ibis", "--month", "2026-11", str(path)))
    assert kept(ledger) == []


def test_a_quote_never_closed_refuses_the_file_instead_of_folding_the_rest_into_one_cell(tmp_path, invoice_import, ledger):
    good = write_export(tmp_path / "good.csv", [row("100.00")] + [row("1.00")] * 1000).read_text(encoding="utf-8")
    header, first, rest = good.split("\n", 2)
    stray = f'100,CHF,{NOVEMBER},{NOVEMBER},Microsoft,"GPU node (8x H100'  # line 3: a quote never closed
    path = tmp_path / "november.csv"
    path.write_text(f"{header}\n{first}\n{stray}\n{rest}", encoding="utf-8")
    assert "november.csv is not a CSV file a FOCUS export would be: the row from line 3 on: a quoted cell opened " \
           "there is not closed where a cell ends" in refused(invoice_import("--cluster", "ibis", "--month", "2026-11", str(path)))
    assert kept(ledger) == []
    # where no quote follows to end the cell it opened, the reading ends at the end of the file
    path.write_text(f"{header}\n{first}\n{stray}\n" + "1.00,CHF\n" * 1000, encoding="utf-8")
    with pytest.raises(InvoiceError, match=r"the row from line 3 on: a quoted cell opened there is not closed where a "
                                           r"cell ends \(unexpected end of data\)"):
        read_invoice(path, IBIS, "CHF", NOV)


def test_a_row_with_a_cell_missing_or_too_many_is_refused(tmp_path):
    last = ["ProviderName", "Tags", "BillingCurrency", "BillingPeriodStart", "BilledCost"]  # BilledCost the last cell
    short = write_export(tmp_path / "short.csv", [("Microsoft", '{"cluster": "ibis"}', "CHF", NOVEMBER)], last)
    with pytest.raises(InvoiceError, match="short.csv: row 2 has 4 cells, the header 5"):
        read_invoice(short, IBIS, "CHF", NOV)
    long = write_export(tmp_path / "long.csv", [(*row("1.00"), "extra")])
    with pytest.raises(InvoiceError, match="long.csv: row 2 has 7 cells, the header 6"):
        read_invoice(long, IBIS, "CHF", NOV)


def test_a_column_named_twice_is_refused(tmp_path):
    path = write_export(tmp_path / "bill.csv", [(*row("1.00"), "2.00")], [*HEADER, "BilledCost"])
    with pytest.raises(InvoiceError, match="bill.csv has more than one column named BilledCost"):
        read_invoice(path, IBIS, "CHF", NOV)


def test_rows_billed_in_other_months_refuse_the_file(tmp_path, invoice_import, ledger):
    quarter = [row("1000.00", period="2026-10-01T00:00:00Z"), row("2000.00"), row("3000.00"),
               row("1000.00", period="2026-12-01T00:00:00Z"), row("5.00", cluster="jaguar", period="2027-01-01T00:00:00Z")]
    path = write_export(tmp_path / "quarter.csv", quarter)
    for month in ("2026-11", "2026-06"):
        output = refused(invoice_import("--cluster", "ibis", "--month", month, str(path)))
        assert "quarter.csv: 2 of the 4 rows recover.invoice_match selects are billed in other months than 2026-11 " \
               "(BillingPeriodStart: 1 of 2026-10, 1 of 2026-12)" in output if month == "2026-11" else \
               "4 of the 4 rows recover.invoice_match selects are billed in other months than 2026-06 (BillingPeriodStart: " \
               "1 of 2026-10, 2 of 2026-11, 1 of 2026-12)" in output
    assert kept(ledger) == []
    # jaguar's January row is not ibis's: left alone; a period written with its offset is taken in UTC (November)
    november = write_export(tmp_path / "november.csv", [row("2000.00"), row("3000.00", period="2026-10-31T23:00:00-01:00"),
                                                        quarter[-1]])
    assert invoice_import("--cluster", "ibis", "--month", "2026-11", str(november)).exit_code == 0
    assert kept(ledger) == [(NOV, "ibis", 5000.0, "november.csv", 2)]


def test_a_bill_in_several_files_is_added_file_by_file_and_no_file_twice(tmp_path, invoice_import, ledger):
    parts = [write_export(tmp_path / f"part-{i}.csv", [row(cost)]) for i, cost in enumerate(["1000.10", "0.20", "7.00"], 1)]
    assert invoice_import("--cluster", "ibis", "--month", "2026-11", str(parts[0])).exit_code == 0
    added = invoice_import("--cluster", "ibis", "--month", "2026-11", "--add", str(parts[1]))
    assert added.exit_code == 0, added.output
    assert "0.20 CHF from 1 of 1 rows of part-2.csv" in added.output
    assert "the month's invoice is 1,000.30 CHF in all" in added.output  # by hand: 1000.10 + 0.20
    # the same file again (a retry) is recorded already: nothing changes
    again = invoice_import("--cluster", "ibis", "--month", "2026-11", "--add", str(parts[1]))
    assert again.exit_code == 0 and "has part-2.csv (sha256 " in again.output and "imported already" in again.output
    # its content under another name, or its name with other content, is refused: it would count twice
    (tmp_path / "copy.csv").write_bytes(parts[1].read_bytes())
    (tmp_path / "other" / "part-2.csv").parent.mkdir()
    write_export(tmp_path / "other" / "part-2.csv", [row("2.00")])
    for twice in (tmp_path / "copy.csv", tmp_path / "other" / "part-2.csv"):
        output = refused(invoice_import("--cluster", "ibis", "--month", "2026-11", "--add", str(twice)))
        assert "already has part-2.csv" in output and "a file is added once" in output
    without = refused(invoice_import("--cluster", "ibis", "--month", "2026-11", str(parts[2])))
    assert "was imported from part-1.csv" in without and "part-2.csv" in without and "--add adds this file" in without
    both = invoice_import("--cluster", "ibis", "--month", "2026-11", "--add", "--replace", str(parts[2]))
    assert both.exit_code == 2 and "--replace and --add exclude each other" in both.output
    assert [r[3] for r in kept(ledger)] == ["part-1.csv", "part-2.csv"]
    replaced = invoice_import("--cluster", "ibis", "--month", "2026-11", "--replace", str(parts[2]))
    assert replaced.exit_code == 0, replaced.output
    assert kept(ledger) == [(NOV, "ibis", 7.0, "part-3.csv", 1)]
