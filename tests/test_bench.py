from bench.collect_bench import busy_seconds


def test_waiting_time_counts_overlapping_queries_once():
    # two queries overlap from 1 to 2 s, a third one is alone: 3 s + 1 s in flight
    assert busy_seconds([(1.0, 3.0), (0.0, 2.0), (5.0, 6.0)]) == 4.0
    assert busy_seconds([(0.0, 10.0), (2.0, 3.0)]) == 10.0
    assert busy_seconds([]) == 0.0
