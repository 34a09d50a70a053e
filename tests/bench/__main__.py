"""Run the benchmarks: `nox -s bench` (or `python -m tests.bench [NAME ...]`)."""

from __future__ import annotations

import sys

from tests.bench import build_bench, cpu_ops_bench, index_bench, plan_bench, release_bench

BENCHES = {
    "plan": plan_bench.run,
    "index": index_bench.run,
    "build": build_bench.run,
    "release": release_bench.run,
    "cpu_ops": cpu_ops_bench.run,
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"== {name}")
        for result in BENCHES[name]():
            print(result.line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
