"""Storage's arithmetic (docs/spec.md "Storage"): the store's bytes at each instant to GiB-hours per namespace,
storage class and workload, and per class what the volumes held; worked out by hand."""

import pandas as pd
import pytest

from billing import frames
from billing.collect.storage import CLAIMED, LISTED, PROVISIONED, UNCLAIMED, storage_day

GIB = 2**30


def instants(figure: str, namespace: str, workload: str, storageclass: str, gib: float, count: int) -> list[tuple]:
    """`count` instants at which the store answered `gib` GiB for one key."""
    return [(figure, namespace, workload, storageclass, gib * GIB)] * count


def test_bytes_at_each_instant_are_gib_hours_per_namespace_and_class():
    """The spec's worked example at a 60 s step: ckpt 100 GiB for 720 instants and 150 GiB for 360 (resized at noon),
    scratch 512 GiB for 1,260; pv-1 Released for the last 360 instants."""
    rows = [*instants(LISTED, "", "", "", 2 / GIB, 1440),
            *instants(CLAIMED, "vision", "", "fast-nvme", 100, 720), *instants(CLAIMED, "vision", "", "fast-nvme", 150, 360),
            *instants(CLAIMED, "vision", "", "bulk", 512, 1260),
            *instants(PROVISIONED, "", "", "fast-nvme", 100, 720), *instants(PROVISIONED, "", "", "fast-nvme", 150, 720),
            *instants(PROVISIONED, "", "", "bulk", 512, 1260), *instants(UNCLAIMED, "", "", "fast-nvme", 150, 360)]
    day = storage_day(rows, 60, None)
    expected = pd.DataFrame({"namespace": ["vision", "vision"], "resource": ["storage", "storage"],
                             "gpu_model": ["bulk", "fast-nvme"], "priority_class": ["", ""], "pool": ["", ""],
                             "quantity": [10752.0, 2100.0]})
    pd.testing.assert_frame_equal(day.usage, expected, rtol=1e-12)
    assert day.workloads is None
    classes = day.classes.set_index("storageclass")
    assert list(day.classes.columns) == frames.STORAGE_CLASSES.columns
    assert classes.loc["fast-nvme"].tolist() == pytest.approx([3000.0, 2100.0, 900.0], rel=1e-12)
    assert classes.loc["bulk"].tolist() == pytest.approx([10752.0, 10752.0, 0.0], rel=1e-12)


def test_per_workload_the_rows_add_up_to_the_namespace():
    """ckpt mounted by a Deployment's pod for 360 instants of its 1,080 at 100 GiB: 600 its, 1,200 the namespace's
    own; storage carries no cost label values."""
    rows = [*instants(LISTED, "", "", "", 1 / GIB, 1080),
            *instants(CLAIMED, "vision", "Deployment/web", "fast-nvme", 100, 360),
            *instants(CLAIMED, "vision", frames.UNATTRIBUTED, "fast-nvme", 100, 720)]
    day = storage_day(rows, 60, ["experiment"])
    assert day.workloads is not None
    got = {(r.workload, r.labels): r.quantity for r in day.workloads.itertuples()}
    assert got == pytest.approx({("(no workload)", '{"experiment": ""}'): 1200.0,
                                 ("Deployment/web", '{"experiment": ""}'): 600.0}, rel=1e-12)
    assert day.usage["quantity"].tolist() == pytest.approx([1800.0], rel=1e-12)


def test_a_day_without_claims_has_no_storage():
    """No claim listed at any instant: no rows, whatever the volumes held (a cluster without claims bills as before)."""
    day = storage_day(instants(PROVISIONED, "", "", "bulk", 100, 60), 60, ["experiment"])
    assert day.usage.empty and day.classes.empty
    assert day.workloads is not None and day.workloads.empty
    assert list(day.usage.columns) == frames.USAGE.columns
