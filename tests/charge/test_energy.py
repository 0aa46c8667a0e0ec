"""The unattributed energy shared (billing/charge/energy.py; docs/spec.md "Energy and carbon"): each part over the
namespaces in proportion to their own kWh of it, the shares adding up to what was unattributed, and a part that nobody
drew, or that is unknown, left unattributed."""

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from billing.charge.energy import share_unattributed


def energy(cluster: str, rows: dict[str, tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame([(cluster, namespace, gpu, cpu) for namespace, (gpu, cpu) in rows.items()],
                        columns=["cluster", "namespace", "gpu_kwh", "cpu_kwh"])


def shared(frame: pd.DataFrame, sharing: list[str]) -> dict[tuple[str, str], float]:
    out = share_unattributed(frame, sharing)
    return dict(zip(zip(out["cluster"], out["namespace"]), out["shared_kwh"]))


def test_each_part_is_shared_by_that_part_alone_and_only_on_a_cluster_that_shares():
    """lynx: 2 kWh of idle GPUs over GPU kWh 3 : 1 (1.5, 0.5), 1 kWh of CPU over CPU kWh 0 : 4 (0, 1): the CPU-only
    namespace pays no idle GPU. ibis, the same figures, does not share: 0 everywhere."""
    rows = {"a": (3.0, 0.0), "b": (1.0, 4.0), "": (2.0, 1.0)}
    frame = pd.concat([energy("lynx", rows), energy("ibis", rows)], ignore_index=True)
    assert shared(frame, ["lynx"]) == pytest.approx({("lynx", "a"): 1.5, ("lynx", "b"): 1.5, ("lynx", ""): -3.0,
                                                      ("ibis", "a"): 0.0, ("ibis", "b"): 0.0, ("ibis", ""): 0.0})


def test_a_day_with_unattributed_but_no_attributed_energy_keeps_it_unattributed():
    """No pod held a GPU (every GPU idle) and Kepler counted no pod: nobody to share with, so nothing is shared and the
    whole 5 kWh stays the cluster's unattributed, shown; a namespace without energy gets no share."""
    assert shared(energy("lynx", {"a": (0.0, 0.0), "": (3.0, 2.0)}), ["lynx"]) == {("lynx", "a"): 0.0, ("lynx", ""): 0.0}
    # no pod held a GPU, but pods drew CPU: only the CPU part is shared
    assert shared(energy("lynx", {"a": (0.0, 1.0), "": (3.0, 2.0)}), ["lynx"]) == {("lynx", "a"): 2.0, ("lynx", ""): -2.0}


def test_an_unknown_part_is_not_shared_and_the_known_one_is():
    """Kepler not scraped (shown only): the CPU part is unknown (NaN) for everyone; the GPUs' unattributed is shared."""
    nan = math.nan
    assert shared(energy("lynx", {"a": (1.0, nan), "b": (3.0, nan), "": (2.0, nan)}), ["lynx"]) == pytest.approx(
        {("lynx", "a"): 0.5, ("lynx", "b"): 1.5, ("lynx", ""): -2.0})


kwh = st.floats(0.0, 1e6, allow_nan=False)


@given(attributed=st.lists(st.tuples(kwh, kwh), min_size=1, max_size=30), unattributed=st.tuples(kwh, kwh))
def test_the_shares_add_up_to_what_was_unattributed(attributed, unattributed):
    """Whatever the namespaces drew: no share is negative, each part's shares add up to that part's unattributed where
    some namespace drew it (else it stays), and the cluster's shared kWh, the unattributed row's among them, add up
    to 0: its rows add up to what the counters counted."""
    rows = {f"ns-{number}": figures for number, figures in enumerate(attributed)} | {"": unattributed}
    out = share_unattributed(energy("lynx", rows), ["lynx"]).set_index("namespace")["shared_kwh"]
    drew = [sum(figures[part] for figures in attributed) > 0 for part in (0, 1)]
    given_away = sum(part for part, anyone in zip(unattributed, drew) if anyone)
    assert (out.drop("") >= 0).all()
    assert out.drop("").sum() == pytest.approx(given_away, rel=1e-12, abs=1e-9)
    assert out[""] == -given_away
