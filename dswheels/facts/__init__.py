"""``dswheels facts``: compat.yml against what its sources say (check), and following upstream (builds, dispatch,
issue). Pure comparisons here; fetching in :mod:`.effects`; entries :mod:`.step` and :mod:`.follow_step`.
"""
