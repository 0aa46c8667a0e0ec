"""The one piece of allocations' arithmetic every reader shares (billing/allocations.py `draws`), by hand."""

from __future__ import annotations

from billing.allocations import draws


def test_each_night_draws_its_use_up_to_what_the_nights_before_left():
    assert draws(10.0, [4.0, 4.0, 4.0, 4.0]) == [4.0, 4.0, 2.0, 0.0]
    assert draws(10.0, [3.0, -2.0, 5.0]) == [3.0, 0.0, 5.0]  # a night credited more than charged gives nothing back
    assert draws(10.0, []) == []
