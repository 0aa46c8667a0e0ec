"""Kueue quotas as reserved capacity: docs/spec.md "Kueue quotas", its worked example figure by figure."""

from datetime import date

import pandas as pd
import pytest

from billing.charge.quotas import quota_hours, quota_rows, unlent_borrowing
from billing.collect.kueue import LENDING_LIMIT, NOMINAL, SAMPLES, USAGE
from billing.config import ClusterConfig
from fixtures.ksm import A100, H100

DAY = 86400.0 * 20412  # 2025-11-20 00:00 UTC; the arithmetic reads only the instants' order
HOURLY = 3600  # one instant per hour keeps the example's figures whole

JAGUAR = ClusterConfig(
    name="jaguar", prometheus={"url": "http://prometheus:9090"},
    prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 2.0, "gpu_models": {H100: 2.4, A100: 1.6}},
    kueue={"queues": {"robotics-cq": {"team": "robotics", "namespaces": ["team-robotics"]},
                      "vision-cq": {"team": "vision", "namespaces": ["team-vision"]},
                      "nlp-cq": {"team": "nlp", "namespaces": ["team-nlp"]}},
           "flavors": {"h100": H100, "a100": A100}})


def samples(family: str, queue: str, flavor: str, values: list[float], cohort: str = "research") -> list[tuple]:
    return [(family, cohort, queue, flavor, "nvidia.com/gpu", DAY + hour * HOURLY, value)
            for hour, value in enumerate(values)]


def example() -> pd.DataFrame:
    """The worked example's queues, hour by hour."""
    return pd.DataFrame(
        samples(NOMINAL, "robotics-cq", "h100", [8] * 12 + [16] * 12) + samples(USAGE, "robotics-cq", "h100", [8] * 24)
        + samples(LENDING_LIMIT, "robotics-cq", "h100", [float("inf")] * 24)
        + samples(NOMINAL, "vision-cq", "h100", [8] * 24) + samples(USAGE, "vision-cq", "h100", [12] * 6 + [0] * 18)
        + samples(NOMINAL, "nlp-cq", "h100", [8] * 24) + samples(USAGE, "nlp-cq", "h100", [0] * 24)
        + samples(LENDING_LIMIT, "nlp-cq", "h100", [4] * 24)
        + samples(NOMINAL, "nlp-cq", "a100", [4] * 24) + samples(USAGE, "nlp-cq", "a100", [2] * 24),
        columns=SAMPLES)


def charged(namespace: str, team: str, model: str, hours: float, price: float) -> tuple:
    return ("jaguar", namespace, team, None, "gpu", model, hours, price, hours * price, hours * price)


ROWS = pd.DataFrame([charged("team-robotics", "robotics", H100, 192, 2.4), charged("team-vision", "vision", H100, 60, 2.4),
                     charged("team-nlp", "nlp", A100, 48, 1.6), charged("scratch", "unallocated", H100, 5, 2.4)],
                    columns=["cluster", "namespace", "team", "owner", "resource", "gpu_model", "quantity", "unit_price",
                             "cost", "list_cost"])


def test_the_worked_example_quota_hours_borrowing_and_lending():
    hours, lent = quota_hours(example(), HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    got = hours.set_index(["cluster_queue", "gpu_model"])[["nominal", "used", "borrowed"]]
    assert got.loc[("robotics-cq", H100)].tolist() == [288, 192, 0]
    assert got.loc[("vision-cq", H100)].tolist() == [192, 72, 24]
    assert got.loc[("nlp-cq", H100)].tolist() == [192, 0, 0]
    assert got.loc[("nlp-cq", A100)].tolist() == [96, 48, 0]
    # robotics had nothing idle while vision borrowed; nlp could lend min(8, 4) = 4, all of it
    assert lent[["lender", "cluster_queue", "gpu_model", "lent"]].values.tolist() == [["nlp-cq", "vision-cq", H100, 24]]


def test_the_worked_example_ledger():
    hours, lent = quota_hours(example(), HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    rows = quota_rows(hours, lent, ROWS, JAGUAR, JAGUAR.prices_on(date(2026, 11, 20)))
    quota = rows[rows["resource"] == "quota-gpu"].groupby("namespace")["cost"].sum()
    assert quota.to_dict() == pytest.approx({"quota:robotics-cq": 691.2, "quota:vision-cq": 460.8,
                                             "quota:nlp-cq": 460.8 + 153.6})
    credits = rows[rows["resource"] == "credit-gpu"].set_index(["namespace", "team"])["cost"]
    assert credits.to_dict() == pytest.approx({("team-robotics", "robotics"): -460.8, ("team-vision", "vision"): -96.0,
                                               ("team-nlp", "nlp"): -76.8})
    lending = rows[rows["resource"] == "lent-gpu"]
    assert lending[["namespace", "team"]].values.tolist() == [["team-vision", "nlp"]]
    assert lending["cost"].tolist() == pytest.approx([-48.0]) and lending["quantity"].tolist() == pytest.approx([-20.0])
    day = pd.concat([ROWS[ROWS["namespace"] != "scratch"], rows]).groupby("team")["cost"].sum()
    assert day.to_dict() == pytest.approx({"robotics": 691.2, "vision": 508.8, "nlp": 566.4})
    assert "scratch" not in set(rows["namespace"])  # no queue names it: charged by requests alone


def test_a_cohorts_borrowing_is_lent_in_proportion_to_what_each_queue_could_lend():
    """vision borrows 3; robotics has 2 idle and no limit, nlp 8 idle but lends 4 at most: 3 x 2/6 and 3 x 4/6."""
    frame = pd.DataFrame(
        samples(NOMINAL, "robotics-cq", "h100", [8]) + samples(USAGE, "robotics-cq", "h100", [6])
        + samples(NOMINAL, "vision-cq", "h100", [8]) + samples(USAGE, "vision-cq", "h100", [11])
        + samples(NOMINAL, "nlp-cq", "h100", [8]) + samples(USAGE, "nlp-cq", "h100", [0])
        + samples(LENDING_LIMIT, "nlp-cq", "h100", [4])
        + samples(NOMINAL, "solo-cq", "h100", [8], cohort="") + samples(USAGE, "solo-cq", "h100", [0]),
        columns=SAMPLES)
    _, lent = quota_hours(frame, HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    assert dict(zip(lent["lender"], lent["lent"])) == pytest.approx({"robotics-cq": 1.0, "nlp-cq": 2.0})


def test_borrowing_beyond_what_the_cohort_could_lend_is_lent_by_nobody():
    frame = pd.DataFrame(
        samples(NOMINAL, "vision-cq", "h100", [8]) + samples(USAGE, "vision-cq", "h100", [14])
        + samples(NOMINAL, "nlp-cq", "h100", [8]) + samples(USAGE, "nlp-cq", "h100", [6]), columns=SAMPLES)
    _, lent = quota_hours(frame, HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    assert lent["lent"].tolist() == pytest.approx([2.0])  # of 6 borrowed, nlp had 2 to lend


def test_cpu_in_cores_memory_in_gib_and_unbilled_resources_left_out():
    frame = pd.DataFrame([(NOMINAL, "", "vision-cq", "h100", "cpu", DAY, 64.0),
                          (NOMINAL, "", "vision-cq", "h100", "memory", DAY, 512.0 * 2**30),
                          (NOMINAL, "", "vision-cq", "h100", "pods", DAY, 100.0)], columns=SAMPLES)
    hours, _ = quota_hours(frame, HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    assert dict(zip(hours["resource"], hours["nominal"])) == {"cpu": 64.0, "memory": 512.0}
    assert set(hours["gpu_model"]) == {""}


def test_use_beyond_what_kueue_admitted_is_charged_by_requests():
    """vision's pods ran 60 GPU-h but Kueue admitted 30 (all within its quota): the other 30, work Kueue did not
    admit in its namespace, are charged as any namespace's, so half of the 144.00 is credited."""
    frame = pd.DataFrame(samples(NOMINAL, "vision-cq", "h100", [8] * 24) + samples(USAGE, "vision-cq", "h100", [1.25] * 24),
                         columns=SAMPLES)
    hours, lent = quota_hours(frame, HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    rows = quota_rows(hours, lent, ROWS, JAGUAR, JAGUAR.prices_on(date(2026, 11, 20)))
    credit = rows[rows["resource"] == "credit-gpu"]
    assert credit[["namespace", "team"]].values.tolist() == [["team-vision", "vision"]]
    assert credit["quantity"].tolist() == pytest.approx([-30.0]) and credit["cost"].tolist() == pytest.approx([-72.0])


def test_a_namespace_whose_queue_kueue_saw_no_use_of_is_charged_by_requests():
    frame = pd.DataFrame(samples(NOMINAL, "vision-cq", "h100", [8] * 24), columns=SAMPLES)
    hours, lent = quota_hours(frame, HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    rows = quota_rows(hours, lent, ROWS, JAGUAR, JAGUAR.prices_on(date(2026, 11, 20)))
    assert set(rows["resource"]) == {"quota-gpu"}


def test_borrowing_no_queue_could_lend_stays_with_the_borrower_and_is_shown():
    """vision borrows 6 for an hour, nlp lends the 2 it has idle: of vision's 14 admitted GPU-h, 8 within its quota,
    2 lent by nlp, 4 lent by nobody. Its 7 Running GPU-h (a = 1): 4 within, 1 lent, 2 borrowed beyond what the cohort
    could lend, which it keeps paying at 2.40 (4.80) and nobody is credited."""
    frame = pd.DataFrame(
        samples(NOMINAL, "vision-cq", "h100", [8]) + samples(USAGE, "vision-cq", "h100", [14])
        + samples(NOMINAL, "nlp-cq", "h100", [8]) + samples(USAGE, "nlp-cq", "h100", [6]), columns=SAMPLES)
    hours, lent = quota_hours(frame, HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0})
    used = pd.DataFrame([charged("team-vision", "vision", H100, 7, 2.4)], columns=ROWS.columns)
    rows = quota_rows(hours, lent, used, JAGUAR, JAGUAR.prices_on(date(2026, 11, 20))).set_index("resource")
    assert rows.loc["credit-gpu", "quantity"] == pytest.approx(-4.0) and rows.loc["lent-gpu", "quantity"] == pytest.approx(-1.0)
    unlent = unlent_borrowing(hours, lent, used, JAGUAR)
    assert unlent[["namespace", "team", "gpu_model"]].values.tolist() == [["team-vision", "vision", H100]]
    assert unlent["quantity"].tolist() == pytest.approx([2.0]) and unlent["cost"].tolist() == pytest.approx([4.8])
    assert unlent_borrowing(*quota_hours(example(), HOURLY, JAGUAR.kueue, {"nvidia_com_gpu": 1.0}), ROWS, JAGUAR).empty
