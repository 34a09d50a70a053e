"""``dswheels install``: the published wheel for this environment picked (:mod:`.pick`), installed and verified.
Entry :mod:`.step`; its command in :mod:`dswheels.cli`.
"""
