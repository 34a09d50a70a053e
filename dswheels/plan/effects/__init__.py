"""The plan stage's effects: the matrix file read, cells selected, this machine as a cell, what is published."""
