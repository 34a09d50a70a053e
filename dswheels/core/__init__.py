"""The pure core: no subprocess, network, environment, clock or file writes.

Everything here takes data and returns data, so it is tested without a machine to build on.
"""
