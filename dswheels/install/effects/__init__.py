"""The install stage's effects: the picked wheel installed into the target interpreter, its ops loaded."""
