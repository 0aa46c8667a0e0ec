"""A cloud provider's FOCUS export summed for one cluster and month, and `billing invoice import`."""

import csv
import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from billing.cli import main
from billing.collect.invoices import InvoiceError, read_invoice
from billing.ledger.database import fetch, open_ledger
from billing.ledger.tables import invoices
from tests.conftest import MINIMAL_CONFIG

HEADER = ["BilledCost", "BillingCurrency", "ChargePeriodStart", "ProviderName", "Tags"]
IBIS = {"ProviderName": "Microsoft", "Tags.cluster": "ibis"}


def write_export(path: Path, rows: list[tuple], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def row(cost: str, cluster: str = "ibis", currency: str = "CHF", provider: str = "Microsoft") -> tuple:
    return (cost, currency, "2026-11-01T00:00:00Z", provider, json.dumps({"cluster": cluster, "team": "x"}))


def test_the_clusters_rows_are_summed_exactly(tmp_path):
    # by hand: 1000.10 + 0.20 + 19.70 = 1020.00 (floats would give 1020.0000000000001); the other cluster's row,
    # the other provider's and the row without tags are left out
    path = write_export(tmp_path / "bill.csv", [row("1000.10"), row("0.20"), row("5.00", cluster="jaguar"),
                                                row("7.00", provider="AWS"), row("19.70"),
                                                ("3.00", "CHF", "2026-11-01T00:00:00Z", "Microsoft", "")])
    bill = read_invoice(path, IBIS, "CHF")
    assert bill.billed_cost == Decimal("1020.00") and (bill.rows_read, bill.rows_matched) == (6, 3)
    assert bill.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and bill.file_name == "bill.csv"


def test_a_byte_order_mark_and_a_quoted_cell_spanning_lines_are_read(tmp_path):
    path = tmp_path / "bill.csv"
    path.write_text('\ufeffBilledCost,BillingCurrency,ProviderName,Tags,Note\n'
                    '2.50,CHF,Microsoft,"{""cluster"": ""ibis""}","two\nlines"\n'
                    '2.50,CHF,Microsoft,"{""cluster"": ""ibis""}",x\n', encoding="utf-8")
    assert read_invoice(path, IBIS, "CHF").billed_cost == Decimal("5.00")


def test_a_hundred_thousand_rows_streamed(tmp_path):
    # by hand, in cents: every fourth row is ibis's, costing (i % 100) CHF and (i % 7) cents
    rows = [row(f"{i % 100}.{i % 7:02d}", cluster="ibis" if i % 4 == 0 else "other") for i in range(100_000)]
    path = write_export(tmp_path / "big.csv", rows)
    cents = sum((i % 100) * 100 + i % 7 for i in range(0, 100_000, 4))
    bill = read_invoice(path, IBIS, "CHF")
    assert bill.billed_cost == Decimal(cents) / 100 and bill.rows_read == 100_000 and bill.rows_matched == 25_000


@pytest.mark.parametrize("rows, header, reason", [
    ([row("1.00")], ["Cost", "Currency", "ChargePeriodStart", "ProviderName", "Tags"],
     "is not a FOCUS export: it has no BilledCost or BillingCurrency column"),
    ([row("1.00", currency="USD")], HEADER, "row 2 is billed in 'USD', the configured currency is CHF"),
    ([row("1.00", cluster="jaguar")], HEADER, "none of its 1 rows has ProviderName = 'Microsoft', Tags.cluster = 'ibis'"),
    ([row("one")], HEADER, "row 2 has BilledCost 'one', not a number"),
    ([("1.00", "CHF", "2026-11-01", "Microsoft", "[1]")], HEADER, "row 2 has Tags that are not a JSON object"),
    ([("1.00", "CHF", "2026-11-01", "Microsoft")], HEADER[:4], "has no Tags column, which recover.invoice_match names"),
])
def test_bad_files_are_refused_with_a_sentence(tmp_path, rows, header, reason):
    path = write_export(tmp_path / "bill.csv", rows, header)
    with pytest.raises(InvoiceError) as refused:
        read_invoice(path, IBIS, "CHF")
    assert reason in str(refused.value)


def test_a_file_that_is_not_text_or_not_there(tmp_path):
    (tmp_path / "bill.parquet").write_bytes(b"PAR1\xff\xfe\x00")
    with pytest.raises(InvoiceError, match="is not UTF-8 text"):
        read_invoice(tmp_path / "bill.parquet", IBIS, "CHF")
    with pytest.raises(InvoiceError, match="cannot read .*missing.csv: No such file or directory"):
        read_invoice(tmp_path / "missing.csv", IBIS, "CHF")


def test_invoice_import_records_the_month_once(tmp_path, write_config):
    ibis = {**MINIMAL_CONFIG["clusters"][0], "name": "ibis", "recover": {"invoice_match": IBIS}}
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    config = str(write_config(clusters=[MINIMAL_CONFIG["clusters"][0], ibis], currency="CHF", database=database))
    first = write_export(tmp_path / "november.csv", [row("1000.10"), row("0.20"), row("9.99", cluster="jaguar")])
    second = write_export(tmp_path / "november-corrected.csv", [row("1100.00")])

    def invoke(*args: str):
        return CliRunner().invoke(main, ["invoice", "import", *args, "--config", config])

    done = invoke("--cluster", "ibis", "--month", "2026-11", "--by", "finance", str(first))
    assert done.exit_code == 0, done.output
    assert "imported the invoice of cluster ibis for 2026-11: 1,000.30 CHF from 2 of 3 rows of november.csv" in done.output
    again = invoke("--cluster", "ibis", "--month", "2026-11", str(second))
    assert again.exit_code == 2 and "was imported from november.csv" in again.output and "--replace replaces it" in again.output
    replaced = invoke("--cluster", "ibis", "--month", "2026-11", "--replace", str(second))
    assert replaced.exit_code == 0, replaced.output
    kept = fetch(open_ledger(database), select(invoices))
    assert [(r["cluster"], r["billed_cost"], r["file_name"], r["rows_matched"]) for r in kept] == [
        ("ibis", 1100.0, "november-corrected.csv", 1)]
    unmatched = invoke("--cluster", MINIMAL_CONFIG["clusters"][0]["name"], "--month", "2026-11", str(first))
    assert unmatched.exit_code == 2 and "has no recover.invoice_match in the config" in unmatched.output
