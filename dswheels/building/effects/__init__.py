"""The build stage's effects: one cell's source tree, tools, compile, checks, post-processing and manifest."""
