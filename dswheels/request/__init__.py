"""Wheel requests: an issue form answered from the model, and a maintainer's label that builds the wheel."""
