import pandas as pd
import pytest

from billing import frames
from billing.charge.pricing import price
from billing.collect.usage import ClusterUsage
from billing.frames import require_columns


def test_a_frame_with_its_columns_passes_through_unchanged():
    frame = pd.DataFrame({"namespace": ["alice"], "quantity": [1.5], "extra": [0]})
    assert require_columns(frame, ["namespace", "quantity"], "usage") is frame


def test_a_missing_column_is_named_at_the_border_with_what_the_frame_has():
    frame = pd.DataFrame({"namespace": ["alice"], "hours": [1.5]})
    with pytest.raises(ValueError, match="usage lacks the columns quantity; it has namespace, hours"):
        require_columns(frame, ["namespace", "quantity"], "usage")


def test_collected_usage_and_pricing_check_what_they_are_handed():
    renamed = pd.DataFrame(columns=[c if c != "quantity" else "hours" for c in frames.USAGE.columns])
    with pytest.raises(ValueError, match="usage of cluster jaguar lacks the columns quantity"):
        ClusterUsage("jaguar", renamed, pods=0, queries=0, coverage=1.0)
    usage = pd.DataFrame([("jaguar", "alice", "cpu", "", "", 2.0)],
                         columns=["cluster", "namespace", "resource", "gpu_model", "priority_class", "quantity"])
    owners = pd.DataFrame([("alice", "robotics", "alice")], columns=["namespace", "team", "owner"])  # no share
    with pytest.raises(ValueError, match="ownership of namespaces lacks the columns share"):
        price(usage, owners, {})
