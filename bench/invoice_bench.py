"""How fast, and in how much memory, does `billing invoice import` read a large cloud bill?

Writes a FOCUS CSV of ROWS rows shaped like a cloud provider's export (a quarter of them the cluster's, each
with a JSON Tags cell), then times `read_invoice` on it in a fresh process and prints its wall time, rows per
second and peak RSS. The file is streamed, so the memory must not grow with the rows.

    python bench/invoice_bench.py                  # 1,000,000 rows
    python bench/invoice_bench.py --rows 10000     # a quick try of the script itself
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATCH = {"ProviderName": "Microsoft", "Tags.cluster": "ibis"}


def write_export(path: Path, rows: int) -> None:
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["BilledCost", "BillingCurrency", "BillingPeriodStart", "ChargePeriodStart", "ProviderName",
                         "ResourceId", "Tags"])
        for i in range(rows):
            tags = {"cluster": "ibis" if i % 4 == 0 else "other", "team": f"team-{i % 60}", "env": "prod"}
            writer.writerow([f"{i % 100}.{i % 7:02d}", "CHF", "2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", "Microsoft",
                             f"/subscriptions/lab/resourceGroups/rg-{i % 300}/providers/vm-{i}", json.dumps(tags)])


def measure(path: Path) -> None:
    """In this (fresh) process: read the invoice, print the figures."""
    sys.path.insert(0, str(ROOT))
    from billing.collect.invoices import read_invoice

    started = time.monotonic()
    bill = read_invoice(path, MATCH, "CHF", date(2026, 11, 1))
    seconds = time.monotonic() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{bill.rows_read:,} rows ({path.stat().st_size / 2**20:,.0f} MiB), {bill.rows_matched:,} matched, "
          f"{bill.billed_cost:,} CHF: {seconds:.1f} s, {bill.rows_read / seconds:,.0f} rows/s, "
          f"peak RSS {peak_mib:,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process' part
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "focus.csv"
        write_export(path, args.rows)
        subprocess.run([sys.executable, __file__, "--measure", str(path)], check=True)


if __name__ == "__main__":
    main()
