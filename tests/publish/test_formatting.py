"""Quantities and the ledger's words as people read them (amounts: tests/foundations/test_money.py)."""

from billing.publish.formatting import held_gpus, quantity


def test_quantities_carry_their_units():
    assert quantity(24, "gpu") == "24.00 GPU-h"
    assert quantity(1536.25, "cpu") == "1,536.25 core-h"
    assert quantity(12, "memory") == "12.00 GiB-h"


def test_shared_gpus_are_written_in_their_own_units():
    held = [{"resource": "nvidia_com_mig_1g_10gb", "held_hours": 14.0, "gpu_hours": 2.0},
            {"resource": "nvidia_com_gpu_shared", "held_hours": 28.125, "gpu_hours": 10.5}]
    assert held_gpus(held) == "14.00 × 1g.10gb slice-h, 28.13 × nvidia_com_gpu_shared replica-h"
    assert held_gpus([]) == ""
