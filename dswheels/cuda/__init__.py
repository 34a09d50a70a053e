"""``dswheels cuda install``: a CUDA toolkit from NVIDIA's redistributable archives. Pure: :mod:`.redist`;
the install in :mod:`.effects`; the entry :mod:`.step`; its command in :mod:`dswheels.cli`.
"""
