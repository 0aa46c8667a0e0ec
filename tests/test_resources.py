from billing.publish.focus import PRICING_UNITS, RESOURCE_WORDS
from billing.publish.formatting import RESOURCE_NAMES, quantity
from billing.resources import LEDGER_RESOURCES, RESOURCES, UNITS, base


def test_every_ledger_resource_has_its_base_a_unit_and_a_name():
    assert len(LEDGER_RESOURCES) == 12
    assert [base(r) for r in ("gpu", "idle-gpu", "reserved-memory", "credit-cpu")] == ["gpu", "gpu", "memory", "cpu"]
    assert UNITS["credit-memory"] == "GiB-h" and UNITS["idle-gpu"] == "GPU-h" and UNITS["cpu"] == "core-h"
    assert set(RESOURCE_NAMES) == set(UNITS) == set(LEDGER_RESOURCES)
    assert set(PRICING_UNITS) == set(RESOURCE_WORDS) == set(RESOURCES)
    assert quantity(1536.245, "reserved-cpu") == "1,536.25 core-h"
