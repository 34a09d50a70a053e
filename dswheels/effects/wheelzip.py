"""Open a built DeepSpeed wheel for reading, with one wording for what can be wrong with it.

Build post-processing and verify each read a wheel's members; a missing
member, a damaged archive or contents that are no DeepSpeed wheel's become the caller's
error type (BuildError on the builder, VerifyError in verify) with the same message.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dswheels.core.linux_runtime import ElfError
from dswheels.core.wheelfile import WheelContentError
from dswheels.errors import DswheelsError

__all__ = ["open_wheel"]


@contextmanager
def open_wheel(path: Path, error: type[DswheelsError]) -> Iterator[zipfile.ZipFile]:
    """``with open_wheel(path, BuildError) as zf:`` -- KeyError, bad zip or bad contents raise ``error``."""
    try:
        with zipfile.ZipFile(path) as zf:
            yield zf
    except FileNotFoundError:
        raise error(f"no such wheel: {path}") from None
    except KeyError as exc:
        raise error(f"{path.name} lacks {exc.args[0]}: not a DeepSpeed wheel") from None
    except (zipfile.BadZipFile, WheelContentError, ElfError) as exc:
        raise error(f"{path.name}: {exc}") from None
