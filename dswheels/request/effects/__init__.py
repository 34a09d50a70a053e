"""The request stage's effects: its GitHub comments."""
