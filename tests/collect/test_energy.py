"""Energy's arithmetic on the store's figures (docs/spec.md "Energy and carbon"): chunks added up per namespace, mJ and
joules to kWh, a node's energy beyond its pods' unattributed (never below 0), a family without a series unknown."""

import math

import pytest

from billing.collect.energy import COUNTER_HIGHEST, COUNTERS, FAMILIES, GPU, MOST_WATTS, NODE, POD, energy_day


def kwh(frame) -> dict:
    return {row.namespace: (row.gpu_kwh, row.cpu_kwh) for row in frame.itertuples()}


def test_chunks_add_up_per_namespace_and_a_nodes_rest_is_unattributed():
    day = energy_day([(GPU, "vision", "", 3.6e9), (GPU, "vision", "", 1.8e9), (GPU, "", "", 0.9e9),
                      (POD, "vision", "n1", 3.6e6), (POD, "nlp", "n1", 1.8e6), (POD, "nlp", "n2", 3.6e6),
                      (NODE, "", "n1", 9e6), (NODE, "", "n2", 1.8e6)])
    # n1: 9 MJ less its pods' 5.4 = 1 kWh; n2's pods counted more than the node (2 against 3.6 MJ): 0, not -0.5
    assert kwh(day.energy) == pytest.approx({"vision": (1.5, 1.0), "nlp": (0.0, 1.5), "": (0.25, 1.0)})
    assert day.found == {GPU, POD, NODE} and day.nodes == {"n1", "n2"}


def test_a_family_without_a_series_is_unknown_not_zero():
    day = energy_day([(GPU, "vision", "", 3.6e9)])
    (row,) = day.energy.itertuples()
    assert row.namespace == "vision" and row.gpu_kwh == 1.0 and math.isnan(row.cpu_kwh)
    assert energy_day([]).energy.empty


def test_every_billed_namespace_has_a_row_unknown_where_its_family_is_missing():
    measured = energy_day([(GPU, "vision", "", 3.6e9)]).covering({"vision", "nlp"})
    rows = {row.namespace: (row.gpu_kwh, row.cpu_kwh) for row in measured.energy.itertuples()}
    assert rows.keys() == {"vision", "nlp", ""}
    assert rows["vision"][0] == 1.0 and rows["nlp"][0] == 0.0 and rows[""][0] == 0.0  # GPUs found: none drawn
    assert all(math.isnan(cpu) for _, cpu in rows.values())  # no Kepler: unknown
    nothing = energy_day([]).covering({"vision"})
    assert len(nothing.energy) == 2 and nothing.energy[["gpu_kwh", "cpu_kwh"]].isna().all().all()


def test_the_gate_s_fix_names_the_bounds_the_query_holds_each_counter_to():
    """A refused sum says what its counter could not be: the figures of collect/energy.py's query."""
    for part, family in FAMILIES.items():
        counter = COUNTERS[part]
        assert f"above {COUNTER_HIGHEST[counter]:g} at a sample, or a step above {MOST_WATTS[counter]:g} W " in family.fix
