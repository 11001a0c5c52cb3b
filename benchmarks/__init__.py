"""Benchmarks: `python -m benchmarks` prints a table of figures measured in one run on this machine."""
