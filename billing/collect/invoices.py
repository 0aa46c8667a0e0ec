"""A cloud provider's bill as its own FOCUS export (a CSV file), summed for one cluster and month.

`billing invoice import` reads the file row by row, never whole: a month of a large account is millions of
rows. A row is the cluster's when every `recover.invoice_match` entry matches it: a column's value, or with
`Tags.<key>` the value of that key in the row's `Tags` (a JSON object in FOCUS 1.x). Their BilledCost is
summed exactly, as decimals. The file is refused when it is not a FOCUS export, when a matched row is billed in
another currency than the cluster's or in another month than the one imported (its BillingPeriodStart), when no
row matches (a wrong match would recover nothing), and when a figure is not a plain decimal number of ASCII digits
or is beyond what a month's cost can be (HIGHEST_BUDGET, as `recover.monthly_cost`): a cost that is stored only
to break `billing close` later must be refused while the file is at hand. The CSV is read strictly: a quote never
closed (which would fold the rest of the file into one cell), a row with more or fewer cells than the header, or a
column named twice is refused rather than guessed at.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

from billing.config import HIGHEST_BUDGET
from billing.errors import UsageError

REQUIRED = ("BilledCost", "BillingCurrency", "BillingPeriodStart")  # FOCUS 1.x columns every export has
# a BilledCost as exports write it: ASCII digits only (Decimal would take '１２３', 'Infinity', 'NaN' and '1_000')
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)
TAGS, TAG_PREFIX = "Tags", "Tags."
LARGEST_FIELD = 16 * 2**20  # bytes of one cell: tags of a resource can be long, never this long
CHUNK = 2**20  # bytes read at a time for the checksum


class InvoiceError(UsageError):
    """The file cannot be taken as the cluster's bill for the month; the message says why."""


@dataclass(frozen=True)
class Invoice:
    billed_cost: Decimal  # BilledCost summed over the matched rows
    currency: str
    file_name: str
    sha256: str
    rows_read: int
    rows_matched: int


def read_invoice(path: Path, match: Mapping[str, str], currency: str, month: date) -> Invoice:
    """The cluster's part of a FOCUS export for `month`: the rows `match` selects, summed."""
    digest = _sha256(path)
    columns = {column: value for column, value in match.items() if not column.startswith(TAG_PREFIX)}
    tags = {column.removeprefix(TAG_PREFIX): value for column, value in match.items() if column.startswith(TAG_PREFIX)}
    total, read, matched = Decimal(0), 0, 0
    months_of: dict[str, date] = {}  # BillingPeriodStart -> its month: a file holds a few periods in millions of rows
    elsewhere: Counter[date] = Counter()  # matched rows of other months, per month
    for number, row in _rows(path, match):
        read += 1
        if any(row[column] != value for column, value in columns.items()):
            continue
        if tags and not _tags_match(_tags(row, number, path), tags):
            continue
        if row["BillingCurrency"] != currency:
            raise InvoiceError(f"{path}: row {number} is billed in {row['BillingCurrency']!r}, the configured "
                               f"currency is {currency}; billing does not convert currencies")
        period = row["BillingPeriodStart"]
        if period not in months_of:
            months_of[period] = _month_of(period, number, path)
        if months_of[period] != month:
            elsewhere[months_of[period]] += 1
        total += _cost(row["BilledCost"], number, path)
        matched += 1
    if elsewhere:
        found = ", ".join(f"{count:,} of {other:%Y-%m}" for other, count in sorted(elsewhere.items()))
        raise InvoiceError(f"{path}: {sum(elsewhere.values()):,} of the {matched:,} rows recover.invoice_match selects "
                           f"are billed in other months than {month:%Y-%m} (BillingPeriodStart: {found}); import "
                           "each month from a file of its own rows, with that month's --month")
    if not matched:
        wanted = ", ".join(f"{column} = {value!r}" for column, value in match.items())
        raise InvoiceError(f"{path}: none of its {read} rows has {wanted} (recover.invoice_match); "
                           "a cost of nothing would refund every charge")
    if not 0 <= total < HIGHEST_BUDGET:
        raise InvoiceError(f"{path}: the rows recover.invoice_match selects add up to {total:,} {currency}, which no "
                           f"month of a cluster costs (from 0 to below {HIGHEST_BUDGET:,.0f})")
    return Invoice(total, currency, path.name, digest, read, matched)


def _cost(text: str, number: int, path: Path) -> Decimal:
    """A row's BilledCost: a plain decimal number, and no more than a month of a cluster can cost."""
    if not NUMBER.fullmatch(text):
        raise InvoiceError(f"{path}: row {number} has BilledCost {text[:40]!r}, not a decimal number of ASCII digits")
    cost = Decimal(text)
    if not -HIGHEST_BUDGET < cost < HIGHEST_BUDGET:  # compared, not abs(): 1e999999999 is beyond Decimal's context
        raise InvoiceError(f"{path}: row {number} has BilledCost {text[:40]}, beyond the {HIGHEST_BUDGET:,.0f} "
                           "a month of a cluster can cost")
    return cost


def _month_of(period: str, number: int, path: Path) -> date:
    """The month a BillingPeriodStart (ISO 8601, UTC in FOCUS) begins in."""
    try:
        start = datetime.fromisoformat(period)
    except ValueError:
        raise InvoiceError(f"{path}: row {number} has BillingPeriodStart {period[:40]!r}, not an ISO 8601 date "
                           "and time") from None
    if start.tzinfo is not None:
        start = start.astimezone(timezone.utc)
    return date(start.year, start.month, 1)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InvoiceError(f"cannot read {path}: {exc.strerror}") from None
    return digest.hexdigest()


def _rows(path: Path, match: Mapping[str, str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number in the file, cells) of each data row, after checking the header."""
    csv.field_size_limit(LARGEST_FIELD)
    start = 1  # the line the row being read starts on
    try:
        with path.open(newline="", encoding="utf-8-sig") as stream:
            reader = csv.reader(stream, strict=True)
            header = next(reader, [])
            twice = sorted(column for column, count in Counter(header).items() if count > 1)
            if twice:
                raise InvoiceError(f"{path} has more than one column named {', '.join(twice)}; a FOCUS export "
                                   "names each column once")
            missing = [column for column in REQUIRED if column not in header]
            if missing:
                raise InvoiceError(f"{path} is not a FOCUS export: it has no {' or '.join(missing)} column")
            needed = sorted({TAGS if c.startswith(TAG_PREFIX) else c for c in match} - set(header))
            if needed:
                raise InvoiceError(f"{path} has no {', '.join(needed)} column, which recover.invoice_match names")
            start = reader.line_num + 1
            for cells in reader:
                if cells and len(cells) != len(header):
                    raise InvoiceError(f"{path}: row {reader.line_num} has {len(cells)} cells, the header "
                                       f"{len(header)}")
                if cells:  # a blank line is no row
                    yield reader.line_num, dict(zip(header, cells))  # the file's line, where a quoted cell spans lines
                start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise InvoiceError(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); FOCUS exports are") from None
    except csv.Error as exc:
        # strict reading fails on a stray quote where the cell it opened would end ("',' expected after '\"'") or at
        # the end of the file ("unexpected end of data"); the other failure is a cell over LARGEST_FIELD
        reason = str(exc) if "field limit" in str(exc) else f"a quoted cell opened there is not closed where a cell ends ({exc})"
        raise InvoiceError(f"{path} is not a CSV file a FOCUS export would be: the row from line {start} on: "
                           f"{reason}") from None


def _tags(row: dict[str, str], number: int, path: Path) -> dict:
    """The row's Tags, a JSON object in FOCUS 1.x ({} where the cell is empty)."""
    try:
        tags = json.loads(row.get(TAGS) or "{}")
    except json.JSONDecodeError:
        tags = None
    if not isinstance(tags, dict):
        raise InvoiceError(f"{path}: row {number} has Tags that are not a JSON object")
    return tags


def _tags_match(tags: dict, wanted: Mapping[str, str]) -> bool:
    return all(key in tags and tags[key] is not None and str(tags[key]) == value for key, value in wanted.items())
