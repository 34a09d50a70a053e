"""The smoke stage's effects: the training runs in the target interpreter."""
