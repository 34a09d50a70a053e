"""Re-pin what CI installs to the newest versions allowed: ``nox -s lock`` runs this.

    python scripts/lock.py                          # requirements/nox.txt and requirements/constraints.txt
    python scripts/lock.py -- --index-url URL       # anything after -- goes to every `uv pip compile`

Each lock is one ``uv pip compile`` (universal: every platform and Python >= 3.10 CI runs):

- ``requirements/nox.txt`` from ``requirements/nox.in``: nox itself (what CI installs first);
- ``requirements/constraints.txt`` from pyproject.toml with the ``dev`` group: the package and
  every test and lint tool (nox sessions and the workflows install with ``-c`` it).

``--upgrade`` is what makes this a refresh: uv reads an existing output file as its
preferences and keeps every version pinned there that still satisfies the requirements, so a
compile without it rewrites the lock as it was (it fell behind PyPI in 16 packages that way).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_FLOOR = "3.10"  # requires-python of pyproject.toml: the oldest interpreter a lock must serve

# (input, its extra arguments, output), relative to the repository root (they appear so in the "via" notes)
LOCKS = (
    ("requirements/nox.in", (), "requirements/nox.txt"),
    ("pyproject.toml", ("--group", "dev", "--all-extras"), "requirements/constraints.txt"),
)


def lock_commands(uv: str, passthrough: list[str]) -> list[list[str]]:
    """The ``uv pip compile`` command lines, run from the repository root."""
    return [
        [
            uv,
            "pip",
            "compile",
            source,
            *extra,
            "--universal",
            "--python-version",
            PYTHON_FLOOR,
            "--no-header",
            "--upgrade",
            "-o",
            output,
            *passthrough,
        ]
        for source, extra, output in LOCKS
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to lock (default: this one)")
    parser.add_argument("--uv", default=shutil.which("uv") or "uv", help="the uv to run (default: uv on PATH)")
    parser.add_argument("passthrough", nargs="*", help="after --: arguments for every uv pip compile")
    args = parser.parse_args(argv)
    for command in lock_commands(args.uv, args.passthrough):
        print("+ " + " ".join(command), flush=True)
        done = subprocess.run(command, cwd=args.root, check=False)
        if done.returncode != 0:
            return done.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
