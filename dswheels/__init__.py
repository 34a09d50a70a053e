"""dswheels: DeepSpeed wheels with every C++/CUDA op precompiled, proven, and indexed."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
