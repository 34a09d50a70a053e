"""``matrix/matrix.yml``, what the user wants built: read with line numbers and checked against compat.yml.

:mod:`.parse` turns the file into a :class:`~dswheels.plan.matrix.spec.MatrixSpec` (every
problem collected first); :mod:`.yamldoc` keeps each value's line and text; :mod:`.selectors`
resolves ``{newest: N}`` and ``variants: all`` against the known facts.
"""
