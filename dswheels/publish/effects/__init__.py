"""The publish stage's effects: the wheels named on the command line, collected and checked."""
