"""The index stage's effects: the site's files written from what is published."""
