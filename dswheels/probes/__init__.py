"""Scripts that run inside another interpreter (the build's), by file path.

They import only the standard library (and what that interpreter has: torch, DeepSpeed's
source tree), print one ``DSWHEELS-... {json}`` line, and are run through
:mod:`dswheels.host.proc` by the effectful module that reads their answer. This folder
holds nothing else, so running a script from it puts no dswheels module on ``sys.path``.
"""
