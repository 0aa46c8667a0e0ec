"""A DayBill checks each frame where it crosses from charging to the ledger."""

import pandas as pd
import pytest

from billing import frames
from billing.charge.bill import DayBill


def test_a_frame_without_a_column_of_its_schema_is_refused_naming_it():
    rows = frames.ROWS.empty()
    assert DayBill(rows).workloads is None and DayBill(rows).capacity.empty
    with pytest.raises(ValueError, match="the day's ledger rows lacks the columns list_cost"):
        DayBill(rows.drop(columns="list_cost"))
    with pytest.raises(ValueError, match="waste per team lacks the columns owner"):
        DayBill(rows, wasted=pd.DataFrame(columns=["cluster", "namespace", "team", *frames.WASTE_MEASURES]))
