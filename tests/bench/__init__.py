"""Benchmarks (``nox -s bench``): each measures one claim side by side with the naive way and prints the ratio."""
