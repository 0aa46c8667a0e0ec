"""Benchmarks that print figures (not tests): `python -m bench.collect_bench`, `python bench/report_bench.py`."""
