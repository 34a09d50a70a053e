"""Judging the flags DeepSpeed's op builders give the compilers, before anything compiles.

:mod:`.op_flags` holds the flags as data (what the builders hand torch), :mod:`.record` the
recorded flags of every release (``dswheels/op_flags.json``); :mod:`.gcc`, :mod:`.msvc` and
:mod:`.nvcc` say what each compiler does with a flag (:mod:`.issue`: fatal or a warning);
:mod:`.judge` judges one op on its platform and :mod:`.screen` drops or keeps a cell's ops
at plan time.
"""
