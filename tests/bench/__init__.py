"""Benchmarks (`nox -s bench`): each measures our way and the naive way side by side, in one run,
and prints the ratio. Not part of the test suite: timings belong here, not in assertions."""
