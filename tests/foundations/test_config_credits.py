"""The `credits` section and a price set's `service_units` (docs/configuration.md): each mistake named by its key
in one sentence, and the teams named handed to the directory check."""

from __future__ import annotations

import pytest

from billing.config import Prices, load_config
from tests.helpers.config import MINIMAL_CONFIG, assert_refused

PRICED_IN_SU = {"service_units": {"price": 0.12, "weights": {"gpu": 5, "cpu": 0.1}}}


def _cluster(**changes) -> dict:
    return {**MINIMAL_CONFIG["clusters"][0], **changes}


@pytest.mark.parametrize(
    "changes, key, words",
    [
        ({"credits": {"subsidies": [{"cluster": "Jaguar", "percent": 25, "from": "2026-07"}]}},
         "credits.subsidies[0].cluster", "no cluster is named 'Jaguar' (the clusters are jaguar)"),
        ({"credits": {"subsidies": [{"percent": 25, "from": "2026-07"}]}}, "credits.subsidies[0]",
         "a subsidy names a cluster, a team or both"),
        ({"credits": {"subsidies": [{"team": "vision", "percent": 125, "from": "2026-07"}]}},
         "credits.subsidies[0].percent", "less than or equal to 100"),
        ({"credits": {"subsidies": [{"team": "vision", "percent": 25, "from": "2026-07", "until": "2026-06"}]}},
         "credits.subsidies[0]", "until 2026-06 is before from 2026-07"),
        ({"credits": {"monthly": [{"team": "vision", "amount": 500, "from": "2026-13", "months": 3}]}},
         "credits.monthly[0].from", "expected a month like 2026-09, got 2026-13"),
        ({"credits": {"monthly": [{"team": "vision", "amount": 0, "from": "2026-10", "months": 3}]}},
         "credits.monthly[0].amount", "greater than 0"),
        ({"credits": {"monthly": [{"team": "vision", "amount": 500, "from": "2026-10"}]}},
         "credits.monthly[0].months", "required key is missing"),
        ({"clusters": [_cluster(prices={**PRICED_IN_SU, "gpu_hour": 1.0})]}, "clusters[0].prices",
         "gpu_hour is given and service_units.price too: set the prices per resource-hour or a price per SU"),
        ({"clusters": [_cluster(prices={"service_units": {"price": 0.1, "weights": {"GPU": 5}}})]},
         "clusters[0].prices.service_units.weights", "'GPU' is no billed resource (expected one of gpu, cpu"),
        ({"clusters": [_cluster(prices={"service_units": {"price": True, "weights": {"gpu": 5}}})]},
         "clusters[0].prices.service_units.price", "expected a number, got true"),
    ],
)
def test_each_mistake_names_its_key(write_config, changes, key, words):
    assert_refused(write_config(**changes), key, words)


def test_a_set_priced_in_service_units_and_one_showing_them_beside_its_prices(write_config):
    shown = {**MINIMAL_CONFIG["clusters"][0]["prices"], "service_units": {"weights": {"gpu": 1}}}
    config = load_config(write_config(clusters=[_cluster(prices=PRICED_IN_SU),
                                                _cluster(name="ibis", prices=shown)]))
    priced, beside = (cluster.prices for cluster in config.clusters)
    assert isinstance(priced, Prices) and isinstance(beside, Prices) and beside.service_units is not None
    assert (priced.gpu_hour, priced.cpu_core_hour, priced.memory_gib_hour) == (0.6, 0.012, 0.0)
    assert (beside.gpu_hour, beside.service_units.price) == (1.0, None)


def test_the_teams_credits_name_go_to_the_directory_check(write_config):
    config = load_config(write_config(credits={
        "monthly": [{"team": "vision", "amount": 500, "from": "2026-10", "months": 3}],
        "subsidies": [{"team": "Robotics", "percent": 10, "from": "2026-10"}, {"cluster": "jaguar", "percent": 25,
                                                                              "from": "2026-10"}]}))
    named = {(name.key, name.name) for name in config.directory_names()}
    assert {("credits.monthly[0].team", "vision"), ("credits.subsidies[0].team", "Robotics")} <= named
    assert not any(key.startswith("credits.subsidies[1]") for key, _ in named)
