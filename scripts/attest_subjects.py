"""The wheels the release attests, one matrix entry each: wheels.yml's subjects job runs this.

    python scripts/attest_subjects.py wheelhouse    # writes `subjects` to $GITHUB_OUTPUT (else prints it)

Each dswheels wheel under the folder (``<variant>/<wheel>``, as the build jobs' artifacts merge) becomes
``{"index", "name", "sha256", "folder"}``: the attest job signs ``name`` with ``sha256`` (one subject
per attestation, PEP 740) and places GitHub's bundle at ``provenance/<folder>/<name>.sigstore.json``,
which the release job downloads into the wheelhouse, beside the wheel. A folder with no wheel, a file
that is not a dswheels wheel, or more wheels than one matrix may hold (256) stops the release here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dswheels.host.files import sha256_file
from dswheels.host.gha import write_output
from dswheels.kernel.naming import WheelNameError, parse_wheel

MAX_JOBS = 256  # GitHub's limit on the jobs of one matrix


def subjects(wheelhouse: Path) -> list[dict[str, str]]:
    """One entry per wheel, sorted by name; ``ValueError`` says why there can be none."""
    wheels = sorted(p for p in wheelhouse.rglob("*.whl") if p.is_file() and not p.is_symlink())
    if not wheels:
        msg = f"no wheel under {wheelhouse}: nothing to attest"
        raise ValueError(msg)
    if len(wheels) > MAX_JOBS:
        msg = f"{len(wheels)} wheels: one matrix holds at most {MAX_JOBS} attest jobs; release fewer cells per tag"
        raise ValueError(msg)
    entries = []
    for index, wheel in enumerate(sorted(wheels, key=lambda p: p.name)):
        try:
            parse_wheel(wheel.name)
        except WheelNameError as exc:
            msg = f"{wheel}: {exc}"
            raise ValueError(msg) from None
        folder = wheel.parent.relative_to(wheelhouse).as_posix()
        entries.append({"index": str(index), "name": wheel.name, "sha256": sha256_file(wheel), "folder": folder})
    return entries


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheelhouse", type=Path, help="the merged wheels artifacts (<variant>/<wheel>)")
    args = parser.parse_args(argv)
    try:
        found = subjects(args.wheelhouse)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    matrix = json.dumps({"include": found}, separators=(",", ":"))
    for entry in found:
        print(f"{entry['name']}  sha256 {entry['sha256']}")
    if not write_output("subjects", matrix):
        print(matrix)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
