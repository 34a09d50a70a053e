"""What a compiled extension (``.so`` or ``.pyd``) says: GPU code, CPU instructions, what it needs to load.

:mod:`.extension` is the one record per extension file; :mod:`.pe` reads Windows PE files,
:mod:`.fatbin` the GPU code of either format, :mod:`.linux_runtime` the glibc/libstdc++
versions an ELF file needs, :mod:`.dlls` whether a ``.pyd``'s DLLs will be found, and
:mod:`.isa` whether the code stays within a CPU baseline.
"""
