"""SU of ledger rows (docs/spec.md "Service units, credits and subsidies"), against figures worked out by hand."""

from __future__ import annotations

import math
from datetime import date

import pandas as pd

from billing.charge.service_units import service_units
from billing.config import ClusterConfig

H100 = "NVIDIA-H100-80GB-HBM3"

LAKES = ClusterConfig.model_validate({"name": "lakes", "prometheus": {"url": "http://127.0.0.1:9"}, "prices": [
    {"from": "2026-11-01", "service_units": {"price": 0.12, "weights": {"gpu": 5, "cpu": 0.1, "memory": 0.01},
                                             "gpu_models": {H100: 10, "NVIDIA-A100-SXM4-40GB": 4}}},
    {"from": "2026-11-20", "service_units": {"price": 0.12, "weights": {"gpu": 6, "cpu": 0.2}}}]})
IBIS = ClusterConfig.model_validate({"name": "ibis", "prometheus": {"url": "http://127.0.0.1:9"},
                                     "prices": {"cpu_core_hour": 0.03, "memory_gib_hour": 0.004, "gpu_hour": 2.7}})


def test_each_rows_su_is_its_quantity_times_the_weight_in_force_on_its_day():
    rows = pd.DataFrame([
        (date(2026, 11, 5), "lakes", "gpu", H100, 3.0),  # 3 x 10
        (date(2026, 11, 5), "lakes", "gpu", "NVIDIA-L4", 2.0),  # no weight of its own: weights.gpu, 2 x 5
        (date(2026, 11, 5), "lakes", "credit-gpu", H100, -1.0),  # a pool's credit weighs as its resource: -10
        (date(2026, 11, 5), "lakes", "memory", "", 100.0),  # 100 x 0.01
        (date(2026, 11, 5), "lakes", "gpu", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", 7.0),  # 7 A100-hours in slices x 4
        (date(2026, 11, 20), "lakes", "gpu", H100, 3.0),  # the new set: no H100 weight, 3 x 6
        (date(2026, 11, 20), "lakes", "memory", "", 100.0),  # memory not weighed: 0 SU
        (date(2026, 11, 20), "ibis", "gpu", "", 3.0),  # no service units on ibis: none
        (date(2026, 11, 20), "heron", "gpu", "", 3.0),  # a cluster no longer configured: none
        (date(2026, 10, 31), "lakes", "gpu", "", 3.0),  # before lakes' first set: none
    ], columns=["day", "cluster", "resource", "gpu_model", "quantity"])
    figures = service_units(rows, [LAKES, IBIS]).tolist()
    assert [round(figure, 9) for figure in figures[:7]] == [30.0, 10.0, -10.0, 1.0, 28.0, 18.0, 0.0]
    assert all(math.isnan(figure) for figure in figures[7:])


def test_no_rows_no_su():
    empty = pd.DataFrame(columns=["day", "cluster", "resource", "gpu_model", "quantity"])
    assert service_units(empty, [LAKES]).empty


def test_a_share_of_unattributed_energy_weighs_as_a_kwh():
    """weights.energy 0.5 SU a kWh: 4 kWh drawn 2 SU, a 1.5 kWh share of the unattributed 0.75 SU."""
    wren = ClusterConfig.model_validate({"name": "wren", "prometheus": {"url": "http://127.0.0.1:9"}, "prices": {
        "cpu_core_hour": 0.03, "memory_gib_hour": 0.004, "gpu_hour": 2.0,
        "service_units": {"weights": {"gpu": 1, "energy": 0.5}}}, "energy": {"price_kwh": 0.3}})
    rows = pd.DataFrame([(date(2026, 11, 5), "wren", "energy", "", 4.0),
                         (date(2026, 11, 5), "wren", "unattributed-energy", "", 1.5)],
                        columns=["day", "cluster", "resource", "gpu_model", "quantity"])
    assert service_units(rows, [wren]).tolist() == [2.0, 0.75]
