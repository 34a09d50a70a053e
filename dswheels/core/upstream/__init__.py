"""What the sources of dswheels' facts say, and where compat.yml disagrees (``dswheels facts check``).

Pure: :mod:`dswheels.effects.upstream` fetches the pages and files; the parsers here read
them (PyPI's JSON API, PyTorch's per-variant PEP 503 pages, DeepSpeed's op builders, the
CUDA-install action's version tables) into :mod:`~dswheels.core.upstream.seen` values, and
:mod:`~dswheels.core.upstream.compare` turns those and compat.yml into findings and edits.
"""
