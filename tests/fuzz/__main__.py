"""``python -m tests.fuzz TARGET [libFuzzer options]``: fuzz one parser with atheris.

Seeds come from the repository's own inputs (the shipped matrices, a generated index page,
DeepSpeed-shaped archives), so the fuzzer starts from valid documents and mutates them.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["dswheels"]):
    from tests.fuzz.targets import TARGETS


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: python -m tests.fuzz {{{','.join(TARGETS)}}} [libFuzzer options]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
