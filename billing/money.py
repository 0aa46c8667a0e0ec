"""Money: amounts, their currency, their rounding and how they are written; the home of the one-figure rule.

The ledger is never rounded (docs/spec.md "Rule 8: cost"). Money is summed to the billionth: each value rounded to
it, then added exactly (in whole billionths), so that a sum is the same in the database (ledger.read.money_sum) and
in Python and never a float's accident: 0.7 + 0.1 + 0.005 is 0.805, which rounds to 0.81, where a float sum gives
0.8049999999999999 (0.80). Exact below 9 million in the currency.

One rule for every figure a person reads (docs/spec.md "Rounding: one figure everywhere"): it is the exact decimal
sum of the ledger values it stands for, each to the billionth, rounded once, half away from zero on the cent (2.675
shows as 2.68, as a person expects, and as SQL's `round(numeric, 2)` gives it). So a team, a person or a day reads
the same wherever it is shown. Where a table's rounded rows do not add up to its rounded total, `rounding` is the
difference, shown as a row of its own (Rounding), so that what the table shows adds up without moving a row a cent.
Only a statement's lines, parts of their cluster's month, are moved: `to_the_cent` rounds the lines of a cluster so
that they add up to the cluster's total (largest remainder).

Every ledger row carries its currency; an installation configures one (`currency`). Amounts of two currencies are
never added: `Totals` keeps a sum per currency (a cluster priced in another currency, or rows billed before the
installation's currency changed, show each currency's total), and `one_currency` is where a reader that needs one
figure (a budget, a statement) finds the one currency of what it adds up, or refuses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only money_sums takes a frame: a report's rows are plain, and it starts without pandas
    import pandas as pd

    from billing.errors import BillingError

BILLIONTHS = 10**9
_CENT = Decimal("0.01")


def in_billionths(value: float) -> int:
    """A value in whole billionths, rounded half away from zero as SQL's round() does: how every sum of money
    takes each value (`money_sum` in the database, `total` in Python)."""
    return int(math.copysign(math.floor(abs(value) * BILLIONTHS + 0.5), value))


def exact(value: float) -> Decimal:
    """A ledger value as a decimal to the billionth, as sums count it: 15.315, not 15.3149999…, and a row shown on
    its own rounds as its total does."""
    return Decimal(in_billionths(float(value))) / BILLIONTHS


def cents(value: float) -> Decimal:
    """The value rounded half away from zero to two decimals; -0.00 becomes 0.00."""
    return exact(value).quantize(_CENT, rounding=ROUND_HALF_UP) + 0


def total(values: Iterable[float]) -> float:
    """The sum of ledger values as the database sums them (ledger.read.money_sum): each to the billionth, then
    exactly, so that 15.3 + 0.015 is 15.315 and rounds to 15.32, on a page as in `billing report`."""
    return sum(map(in_billionths, values)) / BILLIONTHS


def money_sums(frame: pd.DataFrame, keys: list[str], columns: list[str]) -> pd.DataFrame:
    """Per `keys` (sorted), the sums of `columns` as `total` sums them: a group's figure is the same on a page, in
    an email and in `billing report`, which sums in the database."""
    import numpy as np  # the frame brought pandas, and numpy with it

    # each value in whole billionths as in_billionths takes it, a column at once
    scaled = frame[keys].assign(**{column: (np.sign(frame[column]) * np.floor(np.abs(frame[column]) * BILLIONTHS + 0.5))
                                   .astype("int64") for column in columns})
    sums = scaled.groupby(keys, as_index=False, dropna=False, sort=True)[columns].sum()
    return sums.assign(**{column: sums[column] / BILLIONTHS for column in columns})


def rounding(values: Iterable[float], of: float | None = None) -> Decimal:
    """What a table's rows, each rounded on its own, miss of its total `of` (default: their exact sum) rounded:
    the amount of the table's Rounding row, where it is not 0.00."""
    values = list(values)
    return cents(total(values) if of is None else of) - sum((cents(v) for v in values), Decimal(0))


def to_the_cent(values: list[float], of: float | None = None) -> list[Decimal]:
    """The values rounded to the cent so that they add up to their total `of` (default: their exact sum)
    as it is shown, rounded (largest remainder): each is rounded, then the cents still missing (or too
    many) go to the values that rounding moved furthest from their exact value, ties to the earlier row."""
    exacts = [exact(v) for v in values]
    rounded = [cents(v) for v in values]
    missing = int(rounding(values, of) / _CENT)
    step = _CENT if missing > 0 else -_CENT
    remainders = sorted(range(len(values)), key=lambda i: (-(exacts[i] - rounded[i]) * step, i))
    for i in remainders[: abs(missing)]:
        rounded[i] += step
    return rounded


def rest_to_largest(parts: list[Decimal], of: Decimal) -> list[Decimal]:
    """The exact `parts` of `of` (a figure to the cent) each rounded to the cent, and what they then miss of `of`
    given to the largest part in size (the first of equal ones): the cents of a split add up to what was split,
    and the one a leftover moves is the one it moves least in proportion (docs/spec.md "Accounts")."""
    rounded = [part.quantize(_CENT, rounding=ROUND_HALF_UP) + 0 for part in parts]
    if rounded:
        largest = max(range(len(parts)), key=lambda i: (abs(parts[i]), -i))
        rounded[largest] += of - sum(rounded, Decimal(0))
    return rounded


def split(amount: float, percents: list[Decimal]) -> list[Decimal]:
    """`amount` (a ledger value) split at `percents` (adding to 100) to the cent, adding up to it rounded once."""
    whole = exact(amount)
    return rest_to_largest([whole * percent / 100 for percent in percents], cents(amount))


def money(value: float, currency: str, signed: bool = False) -> str:
    """`1,234.56 USD`; with signed=True a change: `+12.30 USD`, `-4.00 USD`."""
    amount = cents(value)
    sign = "+" if signed and amount > 0 else ""
    return f"{sign}{amount:,.2f} {currency}"


def plain_number(value: float) -> str:
    """A number for a machine (CSV) without float noise: 12 significant digits, but never less than the billionth
    that sums count (`exact`), so that the rows of a CSV sum to the total a table shows; no exponent, no trailing
    zeros (67.85000000000001 -> 67.85, 1000.004999996 stays, and so does 0.000123456789)."""
    significant = Decimal(f"{float(value):.12g}")
    number = significant if -significant.as_tuple().exponent >= 9 else exact(value)  # type: ignore[operator]
    text = format(number + 0, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def one_currency(currencies: Iterable[str], fallback: str, refuse: Callable[[str], BillingError]) -> str:
    """The one currency of the amounts a reader adds up (`fallback`, the configured one, where there are none);
    `refuse("EUR and USD")` is raised where they are in two or more, since amounts of two currencies never add."""
    found = sorted(set(currencies))
    if len(found) > 1:
        raise refuse(" and ".join(found))
    return found[0] if found else fallback


@dataclass(frozen=True)
class Totals:
    """Money that may be in several currencies: per currency (in alphabetical order), the exact sum of its amounts
    as `total` sums them, so that each currency's figure is its own rows' sum rounded once and no two currencies
    are ever added. Written `1,234.50 EUR`, or `1,234.50 EUR + 80.00 USD`."""

    amounts: Mapping[str, float]  # currency -> total

    @classmethod
    def of(cls, amounts: Iterable[tuple[str, float]], fallback: str) -> Totals:
        """The totals of (currency, amount) pairs; nothing to add is 0 in `fallback` (the configured currency)."""
        found: dict[str, int] = {}
        for currency, amount in amounts:
            found[currency] = found.get(currency, 0) + in_billionths(amount)
        if not found:
            return cls({fallback: 0.0})
        return cls({currency: found[currency] / BILLIONTHS for currency in sorted(found)})

    @property
    def currencies(self) -> list[str]:
        return list(self.amounts)

    def one(self, refuse: Callable[[str], BillingError]) -> tuple[str, float]:
        """The one currency and its total, for a figure that must be one (a budget's spend, a statement); refused
        as `one_currency` refuses where there are several."""
        currency = one_currency(self.amounts, "", refuse)
        return currency, self.amounts[currency]

    def __str__(self) -> str:
        return " + ".join(money(amount, currency) for currency, amount in self.amounts.items())
