"""The verify stage's effects: a wheel checked statically and in a fresh venv, and read for inspect."""
