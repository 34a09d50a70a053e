"""The GitHub workflows' decisions: what a run builds, its jobs and their cost, following upstream.

:mod:`.event` decides from a run's event (wheels.yml), :mod:`.jobs` groups cells into jobs
under GitHub's limits, :mod:`.costs` estimates runner time (:mod:`.render_costs` shows it),
:mod:`.canary` picks the Windows cell and ops that cover what breaks Windows builds, and :mod:`.follow`
decides for follow.yml.
"""
