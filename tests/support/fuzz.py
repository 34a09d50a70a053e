"""How hard the property tests try: their bounded count in the normal suite, scaled up by ``nox -s fuzz``.

``DSWHEELS_FUZZ_SCALE`` (default 1) multiplies every hostile-input property test's number of
examples; the fuzz session sets it to 50.
"""

from __future__ import annotations

import os

__all__ = ["examples"]


def examples(normal: int) -> int:
    """``normal`` examples in the normal suite, times ``DSWHEELS_FUZZ_SCALE``."""
    return normal * max(1, int(os.environ.get("DSWHEELS_FUZZ_SCALE", "1")))
