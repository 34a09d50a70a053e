"""``dswheels index``: the PEP 503 site of every published wheel, from what a store lists.
Pure pages (:mod:`.pages`) and yanking (:mod:`.yank`); the site written in :mod:`.effects`; entry :mod:`.step`.
"""
