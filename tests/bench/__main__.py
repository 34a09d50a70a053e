"""``python -m tests.bench [NAME ...]``: run the benchmarks (all by default); exit 1 if one misses its target."""

from __future__ import annotations

import argparse
import sys

from tests.bench import index


def main() -> int:
    benches = {"index": index.run}
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*benches, []], help="benchmarks to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="smaller inputs, for a smoke run")
    args = parser.parse_args()
    ok = True
    for name in args.names or list(benches):
        ok &= benches[name](quick=args.quick)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
