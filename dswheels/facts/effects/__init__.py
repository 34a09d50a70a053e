"""The facts stage's effects: fetching what compat.yml's sources say, and the follow workflow's GitHub calls."""
