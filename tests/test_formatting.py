from billing.formatting import cents, held_gpus, money, quantity


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


def test_quantities_carry_their_units():
    assert quantity(24, "gpu") == "24.00 GPU-h"
    assert quantity(1536.25, "cpu") == "1,536.25 core-h"
    assert quantity(12, "memory") == "12.00 GiB-h"


def test_shared_gpus_are_written_in_their_own_units():
    held = [{"resource": "nvidia_com_mig_1g_10gb", "held_hours": 14.0, "gpu_hours": 2.0},
            {"resource": "nvidia_com_gpu_shared", "held_hours": 28.125, "gpu_hours": 10.5}]
    assert held_gpus(held) == "14.00 × 1g.10gb slice-h, 28.13 × nvidia_com_gpu_shared replica-h"
    assert held_gpus([]) == ""
