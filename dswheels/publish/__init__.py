"""``dswheels publish``: wheels put into a store (:mod:`dswheels.stores`).
Entry :mod:`.step`; its command in :mod:`dswheels.cli`.
"""
