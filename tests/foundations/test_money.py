"""billing/money.py: amounts summed, rounded once to the cent and written as docs/spec.md's one-figure rule says."""

from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from billing.errors import UsageError
from billing.money import (
    Totals,
    cents,
    money,
    one_currency,
    plain_number,
    rest_to_largest,
    rounding,
    split,
    to_the_cent,
    total,
)


def test_money_has_currency_two_decimals_and_thousands_separators():
    assert money(1234567.891, "USD") == "1,234,567.89 USD"
    assert money(0, "EUR") == "0.00 EUR"


def test_money_rounds_half_up_on_the_decimal_a_person_reads():
    assert money(2.675, "USD") == "2.68 USD"  # the float is 2.67499999…; people expect .68
    assert money(0.125, "USD") == "0.13 USD"


def test_signed_money_shows_direction_and_never_minus_zero():
    assert money(12.3, "USD", signed=True) == "+12.30 USD"
    assert money(-4, "USD", signed=True) == "-4.00 USD"
    assert money(-0.001, "USD", signed=True) == "0.00 USD"
    assert str(cents(-0.004)) == "0.00"


def test_cents_round_half_away_from_zero_from_the_written_value_as_sql_does():
    # round(15.315::numeric, 2) is 15.32 in PostgreSQL, round(15.315, 2) 15.32 in SQLite
    assert str(cents(15.315)) == "15.32"
    assert str(cents(-15.315)) == "-15.32"  # away from zero, not up
    assert str(cents(0.005)) == "0.01" and str(cents(0.0049)) == "0.00"


def test_a_sum_is_exact_before_it_is_rounded():
    # as floats 15.3 + 0.015 could land either side of 15.315; the sum of the written values does not
    assert total([15.3, 0.015]) == 15.315 and str(cents(total([15.3, 0.015]))) == "15.32"
    assert total([0.1, 0.2]) == 0.3
    assert total([]) == 0.0


def test_rows_rounded_to_the_cent_add_up_to_the_rounded_total():
    # 3 × 1/3 = 1.00, but each rounds to 0.33: the missing cent goes to the first of the tied rows
    assert to_the_cent([1 / 3, 1 / 3, 1 / 3]) == [Decimal("0.34"), Decimal("0.33"), Decimal("0.33")]
    # 3 × 0.005 = 0.015 -> 0.02, but each rounds to 0.01 (0.03): one cent too many comes off the first
    assert to_the_cent([0.005, 0.005, 0.005]) == [Decimal("0.00"), Decimal("0.01"), Decimal("0.01")]
    # the largest remainder wins: 2.004 and 1.003 lose 0.004 and 0.003, 4.996 gains 0.004; total 8.003 -> 8.00
    # rows 2.00 + 1.00 + 5.00 = 8.00 already: nothing moves
    assert to_the_cent([2.004, 1.003, 4.996]) == [Decimal("2.00"), Decimal("1.00"), Decimal("5.00")]
    # 0.006 + 0.006 + 0.006 = 0.018 -> 0.02; rows 0.01 each = 0.03: the cent comes off the first
    assert to_the_cent([0.006, 0.006, 0.006]) == [Decimal("0.00"), Decimal("0.01"), Decimal("0.01")]
    # 1.004 + 2.003 + 0.003 = 3.010: rows 1.00 + 2.00 + 0.00 = 3.00, the cent goes to the largest remainder (1.004)
    assert to_the_cent([1.004, 2.003, 0.003]) == [Decimal("1.01"), Decimal("2.00"), Decimal("0.00")]
    # credits (negative rows): -0.005 rounds to -0.01, 1.0049 to 1.00; total 0.9999 -> 1.00: the credit gives
    assert to_the_cent([-0.005, 1.0049]) == [Decimal("0.00"), Decimal("1.00")]
    # against a total computed elsewhere (the day's cost on the page)
    assert to_the_cent([1 / 3, 2 / 3], of=1.0) == [Decimal("0.33"), Decimal("0.67")]
    assert to_the_cent([]) == []


def test_the_rounding_row_is_what_the_rounded_rows_miss_of_the_rounded_total():
    # 3 x 1/3: rows 0.33 each (0.99), total 1.00: +0.01; 3 x 1.005: rows 1.01 each (3.03), total 3.015 -> 3.02: -0.01
    assert rounding([1 / 3, 1 / 3, 1 / 3]) == Decimal("0.01")
    assert rounding([1.005, 1.005, 1.005]) == Decimal("-0.01")
    assert rounding([0.5, 0.25]) == 0 and rounding([]) == 0
    # against a total computed elsewhere (the day's cost on the page): 0.33 + 0.67 = 1.00
    assert rounding([1 / 3, 2 / 3], of=1.0) == 0


def test_numbers_for_machines_have_no_float_noise():
    assert plain_number(67.85000000000001) == "67.85"
    assert plain_number(0.1 + 0.2) == "0.3"
    assert plain_number(24.0) == "24" and plain_number(-0.0) == "0"
    assert plain_number(0.000123456789) == "0.000123456789"  # small prices keep their digits, no exponent
    assert plain_number(241299.61234567891) == "241299.612345679"  # to the billionth, as sums count it


def test_a_row_shown_alone_rounds_as_its_total():
    """serve's /me showed one row of 266.22 GPU-h under a total of 266.23: the total was summed to the billionth,
    the row rounded from its float (266.22499999990001...)."""
    value = 266.2249999999
    assert cents(value) == cents(total([value])) == Decimal("266.23")
    assert cents(-1.005) == Decimal("-1.01") and cents(15.315) == Decimal("15.32") and str(cents(-0.0)) == "0.00"


def test_amounts_are_added_in_their_one_currency_or_refused_naming_both():
    assert one_currency(["EUR", "EUR"], "USD", UsageError) == "EUR"  # what the rows hold, not what is configured
    assert one_currency([], "USD", UsageError) == "USD"  # nothing to add: the configured currency
    with pytest.raises(UsageError, match="^EUR and USD$"):
        one_currency(["USD", "EUR", "USD"], "USD", UsageError)


def test_totals_keep_each_currency_apart_and_write_them_in_a_stable_order():
    totals = Totals.of([("USD", 80.0), ("EUR", 1000.2), ("EUR", 234.3), ("USD", 0.005)], "EUR")
    assert totals.amounts == {"EUR": 1234.5, "USD": 80.005}
    assert str(totals) == "1,234.50 EUR + 80.01 USD"  # alphabetical, each its exact sum rounded once
    assert str(Totals.of([("EUR", 1234.5)], "USD")) == "1,234.50 EUR"  # what the rows hold, not what is configured
    assert str(Totals.of([], "USD")) == "0.00 USD"  # nothing to add: the configured currency
    assert Totals.of([("EUR", 2.0), ("EUR", 0.5)], "USD").one(UsageError) == ("EUR", 2.5)
    with pytest.raises(UsageError, match="^EUR and USD$"):
        totals.one(UsageError)


CURRENCIES = ["CHF", "EUR", "USD"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(CURRENCIES), st.integers(-10**14, 10**14)), max_size=40))
def test_each_currencys_total_is_the_sum_of_its_own_rows_to_the_cent(rows):
    """Rows of amounts in whole billionths (as the ledger's sums count them; each under 100,000, a sum under the 9
    million money.py is exact below) in up to three currencies: each currency's total is the exact decimal sum of
    that currency's rows, rounded once, and no other currency's."""
    totals = Totals.of([(currency, billionths / 10**9) for currency, billionths in rows], "EUR")
    held = sorted({currency for currency, _ in rows}) or ["EUR"]
    assert totals.currencies == held
    for currency in held:
        exact_sum = sum((Decimal(b) / 10**9 for c, b in rows if c == currency), Decimal(0))
        assert cents(totals.amounts[currency]) == exact_sum.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) + 0
    assert str(totals) == " + ".join(f"{cents(totals.amounts[c]):,.2f} {c}" for c in held)


def test_a_split_gives_the_leftover_cent_to_the_largest_share():
    # 1.00 at 33.33/33.33/33.34: 0.3333, 0.3333, 0.3334 each round to 0.33; the cent they miss goes to 33.34 %
    thirds = [Decimal("33.33"), Decimal("33.33"), Decimal("33.34")]
    assert split(1.0, thirds) == [Decimal("0.33"), Decimal("0.33"), Decimal("0.34")]
    # 0.05 at 50/50: 0.025 and 0.025 each round to 0.03, one cent too many, taken from the first of the equals
    assert split(0.05, [Decimal(50), Decimal(50)]) == [Decimal("0.02"), Decimal("0.03")]
    # 150.15 at 60/40 is exact: 90.09 and 60.06 (docs/billing.md's worked month)
    assert split(150.15, [Decimal(60), Decimal(40)]) == [Decimal("90.09"), Decimal("60.06")]
    # a credit splits as a charge does, the largest in size taking the leftover
    assert split(-1.0, thirds) == [Decimal("-0.33"), Decimal("-0.33"), Decimal("-0.34")]


def test_parts_rounded_with_the_rest_to_the_largest_add_up_to_the_figure():
    # 0.335 + 0.335 + 0.33 is 1.00, rounded 0.34 + 0.34 + 0.33: the cent too many comes off the first largest
    parts = [Decimal("0.335"), Decimal("0.335"), Decimal("0.33")]
    assert rest_to_largest(parts, Decimal("1.00")) == [Decimal("0.33"), Decimal("0.34"), Decimal("0.33")]
    assert rest_to_largest([], Decimal("0.00")) == []
