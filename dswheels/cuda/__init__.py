"""``dswheels cuda install``: a CUDA toolkit from NVIDIA's redistributable archives. Pure: :mod:`.redist`;
the install in :mod:`.effects`; the entry :mod:`.step`, the command :mod:`.command`.
"""
