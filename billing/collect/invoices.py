"""A cloud provider's bill as its own FOCUS export (a CSV file), summed for one cluster and month.

`billing invoice import` reads the file row by row, never whole: a month of a large account is millions of
rows. A row is the cluster's when every `recover.invoice_match` entry matches it: a column's value, or with
`Tags.<key>` the value of that key in the row's `Tags` (a JSON object in FOCUS 1.x). Their BilledCost is
summed exactly, as decimals. The file is refused when it is not a FOCUS export, when a matched row is billed in
another currency than the cluster's, or when no row matches (a wrong match would recover nothing).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from billing.errors import UsageError

REQUIRED = ("BilledCost", "BillingCurrency")  # FOCUS 1.x columns every export has
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


def read_invoice(path: Path, match: Mapping[str, str], currency: str) -> Invoice:
    """The cluster's part of a FOCUS export: the rows `match` selects, summed."""
    digest = _sha256(path)
    columns = {column: value for column, value in match.items() if not column.startswith(TAG_PREFIX)}
    tags = {column.removeprefix(TAG_PREFIX): value for column, value in match.items() if column.startswith(TAG_PREFIX)}
    total, read, matched = Decimal(0), 0, 0
    for number, row in _rows(path, match):
        read += 1
        if any(row.get(column) != value for column, value in columns.items()):
            continue
        if tags and not _tags_match(_tags(row, number, path), tags):
            continue
        if row["BillingCurrency"] != currency:
            raise InvoiceError(f"{path}: row {number} is billed in {row['BillingCurrency']!r}, the configured "
                               f"currency is {currency}; billing does not convert currencies")
        try:
            total += Decimal(row["BilledCost"])
        except InvalidOperation:
            raise InvoiceError(f"{path}: row {number} has BilledCost {row['BilledCost']!r}, not a number") from None
        matched += 1
    if not matched:
        wanted = ", ".join(f"{column} = {value!r}" for column, value in match.items())
        raise InvoiceError(f"{path}: none of its {read} rows has {wanted} (recover.invoice_match); "
                           "a cost of nothing would refund every charge")
    return Invoice(total, currency, path.name, digest, read, matched)


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
    try:
        with path.open(newline="", encoding="utf-8-sig") as stream:
            reader = csv.DictReader(stream)
            header = reader.fieldnames or []
            missing = [column for column in REQUIRED if column not in header]
            if missing:
                raise InvoiceError(f"{path} is not a FOCUS export: it has no {' or '.join(missing)} column")
            needed = sorted({TAGS if c.startswith(TAG_PREFIX) else c for c in match} - set(header))
            if needed:
                raise InvoiceError(f"{path} has no {', '.join(needed)} column, which recover.invoice_match names")
            for row in reader:
                yield reader.line_num, row  # the file's line, where a quoted cell spans lines
    except UnicodeDecodeError as exc:
        raise InvoiceError(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); FOCUS exports are") from None
    except csv.Error as exc:
        raise InvoiceError(f"{path} is not a CSV file a FOCUS export would be: {exc}") from None


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
