"""``python -m tests.fuzz TARGET [libFuzzer options]``: fuzz one parser with atheris.

Seeds come from the repository's own inputs (the shipped matrices, a generated index page,
DeepSpeed-shaped archives), so the fuzzer starts from valid documents and mutates them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["dswheels"]):
    from tests.fuzz.targets import SEEDS, TARGETS


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: python -m tests.fuzz {{{','.join(TARGETS)}}} [libFuzzer options]")
    target = TARGETS[sys.argv[1]]
    for arg in sys.argv[2:]:  # an empty corpus folder gets the target's seeds
        folder = Path(arg)
        if sys.argv[1] in SEEDS and folder.is_dir() and not any(folder.iterdir()):
            SEEDS[sys.argv[1]](folder)
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
