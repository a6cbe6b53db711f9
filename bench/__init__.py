"""Benchmarks (not tests): each script prints one JSON line of figures; run_all.py tabulates."""
