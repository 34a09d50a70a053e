"""The shared effectful host: processes (:mod:`.proc`), HTTP (:mod:`.http`), files, the clock, downloads, venvs,
wheel files on disk. The ports a stage's entry is handed (:mod:`.ports`) are made of these.
"""
