"""clusters[].energy (docs/configuration.md): one set or dated sets of a kWh's price and the carbon intensity, the
price in force reaching the day's price set, and the mistakes named by their key."""

from datetime import date

import pytest

from billing.config import ConfigError, load_config
from tests.helpers.config import MINIMAL_CONFIG, assert_refused


def cluster(**changes) -> dict:
    return {**MINIMAL_CONFIG["clusters"][0], **changes}


def test_dated_sets_price_each_day_and_one_set_every_day(write_config):
    dated = [{"from": "2026-01-01", "carbon_g_per_kwh": 350}, {"from": "2026-12-01", "price_kwh": 0.28, "carbon_g_per_kwh": 240}]
    jaguar = load_config(write_config(clusters=[cluster(energy=dated)])).clusters[0]
    november, december = jaguar.energy_on(date(2026, 11, 30)), jaguar.energy_on(date(2026, 12, 1))
    assert (november.price_kwh, november.carbon_g_per_kwh) == (None, 350.0)
    assert (december.price_kwh, december.carbon_g_per_kwh) == (0.28, 240.0)
    assert (jaguar.prices_on(date(2026, 11, 30)).energy_kwh, jaguar.prices_on(date(2026, 12, 1)).energy_kwh) == (None, 0.28)
    assert jaguar.prices_on(date(2026, 12, 1)).gpu_hour == MINIMAL_CONFIG["clusters"][0]["prices"]["gpu_hour"]
    with pytest.raises(ConfigError, match=r"clusters\[0\]\.energy: no energy set is in force on 2025-12-31"):
        jaguar.energy_on(date(2025, 12, 31))
    one = load_config(write_config(clusters=[cluster(energy={"price_kwh": 0.3})])).clusters[0]
    assert one.prices_on(date(2020, 1, 1)).energy_kwh == 0.3 and one.energy_on(date(2020, 1, 1)).carbon_g_per_kwh is None
    plain = load_config(write_config()).clusters[0]
    assert plain.energy_on(date(2026, 1, 1)) is None and plain.prices_on(date(2026, 1, 1)).energy_kwh is None


@pytest.mark.parametrize(("energy", "key", "words"), [
    ({"price_kwh": True}, "clusters[0].energy.price_kwh", "expected a number, got true"),
    ({"carbon_g_per_kwh": -1}, "clusters[0].energy.carbon_g_per_kwh", "greater than or equal to 0"),
    ({"carbon_g_per_kwh": 20_000}, "clusters[0].energy.carbon_g_per_kwh", "less than 10000"),
    ([{"from": "2026-02-01"}, {"from": "2026-01-01"}], "clusters[0].energy", "is not after"),
    ({"share_unatributed": True}, "clusters[0].energy.share_unatributed", "unknown key"),
    ({"share_unattributed": "sometimes"}, "clusters[0].energy.share_unattributed", "valid boolean"),
    ([{"from": "2026-01-01", "share_unattributed": 1}], "clusters[0].energy[0].share_unattributed", "valid boolean"),
])
def test_a_mistaken_energy_set_is_named_with_its_key(write_config, energy, key, words):
    assert_refused(write_config(clusters=[cluster(energy=energy)]), key, words)


def test_sharing_the_unattributed_is_dated_and_off_by_default(write_config):
    dated = [{"from": "2026-01-01", "price_kwh": 0.3}, {"from": "2026-12-01", "price_kwh": 0.3, "share_unattributed": True}]
    jaguar = load_config(write_config(clusters=[cluster(energy=dated)])).clusters[0]
    assert [jaguar.energy_on(date(2026, 11, 30)).share_unattributed, jaguar.energy_on(date(2026, 12, 1)).share_unattributed] == [
        False, True]


def test_a_kwh_is_priced_in_energy_not_in_prices(write_config):
    prices = {**cluster()["prices"], "energy_kwh": 0.3}
    assert_refused(write_config(clusters=[cluster(prices=prices)]), "clusters[0].prices.energy_kwh", "")


def test_service_units_weigh_a_kwh_by_weights_energy_and_0_without(write_config):
    weighed = {**cluster()["prices"], "service_units": {"weights": {"gpu": 1, "energy": 0.5}}}
    plain = {**cluster()["prices"], "service_units": {"weights": {"gpu": 1}}}
    for prices, weight in ((weighed, 0.5), (plain, 0.0)):
        jaguar = load_config(write_config(clusters=[cluster(prices=prices, energy={"price_kwh": 0.3})])).clusters[0]
        assert jaguar.prices_on(date(2026, 11, 20)).su_rates().energy_kwh == weight
