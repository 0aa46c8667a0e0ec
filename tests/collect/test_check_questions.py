"""What `billing check` asks beyond a run: the request rule's hours worked out from the store's sums, through the
gate like every figure read from a store."""

from datetime import date
from zoneinfo import ZoneInfo

import pytest

from billing.collect.check_questions import ESTIMATE_STEP, SCHEDULER_TERM, added_by_rule
from billing.collect.context import cluster_day
from billing.collect.figures import ImpossibleFigure
from billing.collect.stores import DEFAULT_STORE
from billing.config import ClusterConfig
from billing.days import billing_day

CLUSTER = ClusterConfig(name="jaguar", prometheus={"url": "http://prometheus:9090"},
                        prices={"cpu_core_hour": 0.01, "memory_gib_hour": 0.001, "gpu_hour": 1.0})
DAY = billing_day(date(2026, 11, 20), ZoneInfo("UTC"))
INSTANTS = 24 * 3600 // ESTIMATE_STEP  # 288 instants, 5 minutes apart


class Sums:
    """A store whose rule query answers per term `values` (summed over the day's instants), and no odd pod."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def instant(self, query: str, at: float) -> list[dict]:
        if "label_replace" not in query:
            return []
        return [{"metric": {"resource": "cpu", "term": term}, "value": [at, value]} for term, value in self.values.items()]


def rule_on(values: dict[str, str]):
    return added_by_rule(cluster_day(CLUSTER, DAY, 60, ["nvidia_com_gpu"], Sums(values), DEFAULT_STORE))


def test_the_rule_adds_what_each_term_holds_over_app_containers_in_core_hours():
    """App containers request 2 cores all day (48 core-h); the larger of app and init containers is 3 cores for
    the day's first 6 hours (6 more core-h); a pod's overhead is a quarter core all day (6 core-h)."""
    rule = rule_on({"app": str(2 * INSTANTS), "containers": str(2 * INSTANTS + 72), "overhead-cpu": str(INSTANTS / 4)})
    cpu = rule.added["cpu"]
    assert cpu.app == pytest.approx(48.0)
    assert cpu.parts == pytest.approx({"init containers": 6.0, "sidecars": 0.0, "overhead": 6.0,
                                       "GPUs held through DRA": 0.0})
    assert cpu.more == pytest.approx(12.0) and SCHEDULER_TERM not in cpu.parts
    assert (rule.unbillable.sidecars, rule.unbillable.pod_level) == (0, 0)


@pytest.mark.parametrize("value", ["NaN", "-1", "+Inf"])
def test_an_impossible_sum_is_refused_naming_its_series_not_worded(value):
    with pytest.raises(ImpossibleFigure, match=r'^cluster jaguar: kube_pod_container_resource_requests\{resource="cpu", '
                                               r'term="app"\} is '):
        rule_on({"app": value})
