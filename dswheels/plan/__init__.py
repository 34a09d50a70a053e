"""``dswheels plan`` and ``dswheels ci plan``: a matrix (or one named combination) into planned cells, each with
its toolchain; a workflow run's jobs, their cost and the canary. Pure modules here; the matrix file, the selection
and what is published already in :mod:`.effects`; the entries :mod:`.step` and :mod:`.ci_step`; the commands
in :mod:`dswheels.cli`.
"""
