"""``dswheels build``: every planned op of a cell compiled into a checked wheel with its manifest.

Pure modules here (environment, patches, parallelism, output reading, summary); the compile and everything
around it in :mod:`.effects`; the entry :mod:`.step` (the driver over cells); its command in :mod:`dswheels.cli`.
"""
