"""The doctor stage's effects: the facts of this machine and a target interpreter, collected."""
