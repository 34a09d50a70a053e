"""The shared kernel every stage uses, pure: the model of a cell, names, versions, errors, log, compat.yml typed,
binary readers and compiler-flag knowledge. No subprocess, network, environment, clock or file writes (ruff TID251).
"""
