"""Planning: a matrix (or one named combination) into planned cells, each with its toolchain.

:mod:`.planner` selects the cells and puts the two judgements together: :mod:`.rules` (what
forbids a cell outright) and :mod:`.toolchain` (runner image, host compiler, nvcc, arch list,
ops and flags; the compiler from :mod:`.host_compiler`, the CUDA parts from :mod:`.cuda`).
:mod:`.contract` is the plan's JSON both ways (what the build jobs read back); :mod:`.render`
shows a plan to people.
"""
