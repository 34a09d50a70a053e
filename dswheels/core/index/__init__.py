"""The published index: which wheel goes where, every page's text, and reading pages back.

:mod:`.files` is one file of an index (as written and as read from any PEP 503 page),
:mod:`.site` the pages of a dswheels site, :mod:`.links` its URLs and install lines,
:mod:`.yank` the yanked files, :mod:`.pick` the published wheel that fits an environment.
The layout is docs/index-layout.md.
"""
