from billing.publish.focus import PRICING_UNITS, RESOURCE_WORDS
from billing.publish.formatting import RESOURCE_NAMES, quantity
from billing.resources import (
    LEDGER_RESOURCES,
    RESOURCES,
    UNITS,
    base,
    mig_resource,
    single_strategy_slice,
    slice_fraction,
)


def test_every_ledger_resource_has_its_base_a_unit_and_a_name():
    assert len(LEDGER_RESOURCES) == 18
    assert base("lent-gpu") == "gpu" and UNITS["quota-memory"] == "GiB-h"
    assert [base(r) for r in ("gpu", "unrequested-gpu", "reserved-memory", "credit-cpu")] == ["gpu", "gpu", "memory", "cpu"]
    assert UNITS["credit-memory"] == "GiB-h" and UNITS["unrequested-gpu"] == "GPU-h" and UNITS["cpu"] == "core-h"
    assert set(RESOURCE_NAMES) == set(UNITS) == set(LEDGER_RESOURCES)
    assert set(PRICING_UNITS) == set(RESOURCE_WORDS) == set(RESOURCES)
    assert quantity(1536.245, "reserved-cpu") == "1,536.25 core-h"


def test_a_mig_slice_is_its_compute_slices_of_its_gpu():
    """NVIDIA's MIG user guide, "Supported GPUs" and "Supported MIG Profiles": 7 compute slices on an A100 or
    H100, 4 on an A30 and an RTX PRO 6000, 2 on an RTX PRO 5000."""
    assert slice_fraction("1g.5gb", "NVIDIA-A100-SXM4-40GB") == 1 / 7
    assert slice_fraction("3g.40gb", "NVIDIA A100-SXM4-80GB") == 3 / 7  # DCGM's modelName has a space
    assert slice_fraction("7g.80gb", "NVIDIA-H100-80GB-HBM3") == 1.0
    assert slice_fraction("1g.6gb", "NVIDIA-A30") == 1 / 4
    assert slice_fraction("2g.48gb", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition") == 2 / 4
    assert slice_fraction("1g.24gb", "NVIDIA RTX PRO 5000 Blackwell") == 1 / 2
    assert slice_fraction("", "NVIDIA-A100-SXM4-40GB") == 1.0


def test_a_model_that_names_a_slice_is_single_strategy():
    assert single_strategy_slice("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == ("NVIDIA-A100-SXM4-40GB", "1g.5gb", 1 / 7)
    assert single_strategy_slice("NVIDIA-A30-MIG-2g.12gb+me") == ("NVIDIA-A30", "2g.12gb+me", 2 / 4)
    assert single_strategy_slice("NVIDIA-A100-SXM4-40GB") is None
    assert single_strategy_slice("NVIDIA-MIGHTY-1g.5gb") is None
    assert mig_resource("2g.12gb+me") == "nvidia_com_mig_2g_12gb_me"
