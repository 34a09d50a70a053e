"""The README's console examples are what the code prints (tests/support/readme.py).

The cheap ones run here, in-process; the expensive ones (a real build, verify's run time, smoke,
publish and index of a built wheel) are compared by the integration tests that run them for
real, and this module checks that every example has exactly one such test.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from dswheels.cli import build_parser, main
from dswheels.kernel.naming import cell_id
from dswheels.smoke.runs import render_smoke_markdown, runs_for
from dswheels.verify.static_checks import cell_from_wheel_filename
from tests.conftest import ROOT, TESTS
from tests.support.readme import check_example, examples, match_lines


def _checks(name: str) -> list[Path]:
    call = re.compile(rf"check_example\(\s*\"{re.escape(name)}\"")
    return [path for path in sorted(TESTS.rglob("test_*.py")) if call.search(path.read_text(encoding="utf-8"))]


def test_every_console_example_is_compared_with_a_real_run_by_one_test() -> None:
    found = examples()
    assert {"plan-cell", "plan-forbidden", "build", "verify", "smoke-cpu", "publish", "index"} <= set(found)
    for name in found:
        checks = _checks(name)
        assert len(checks) == 1, f"README example {name!r} is compared by {len(checks)} tests: {checks}"


def test_every_example_runs_with_the_shipped_matrix() -> None:
    """What a reader runs from a clone plans with matrix/matrix.yml: an example run with a test matrix showed
    that matrix's promises (glibc 2.36) next to prose that states the shipped ones (2.35)."""
    for example in examples().values():
        named = [a for a in example.argv if a == "--matrix" or a.startswith("--matrix=")]
        assert not named, f"README.md:{example.line}: example {example.name!r} names a matrix: {example.command}"


def test_a_console_block_must_be_named() -> None:
    with pytest.raises(ValueError, match=r"README\.md:2: a console block without"):
        examples("text\n```console\n$ dswheels plan\n```\n")
    with pytest.raises(ValueError, match="exactly one command"):
        examples("<!-- example: x -->\n```console\n$ dswheels plan\n$ dswheels index\n```\n")


def test_the_matcher_fails_on_a_difference_and_elides_only_where_told() -> None:
    real = ["a", "b 1.2s", "c", "d"]
    assert match_lines(["a", "b 1.2s", "c", "d"], real) is None
    assert match_lines(["a", "...", "d"], real) is None
    assert match_lines(["a", "b ...", "...", "c", "d"], real) is None
    assert match_lines(["...", "a", "b 1.2s", "c", "d", "..."], real) is None
    assert match_lines(["a", "c", "d"], real) == 1  # a line left out without "..."
    assert match_lines(["a", "b 1.2s", "c"], real) == 3  # the real output goes on
    assert match_lines(["a", "x", "..."], real) == 1
    assert match_lines(["a", "...", "x"], real) == 2


def _run_here(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(ROOT)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "DSWHEELS_TORCH_INDEX", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err


def test_the_plan_example(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = examples()["plan-cell"].argv[1:]
    code, output = _run_here(argv, capsys, monkeypatch)
    assert code == 0, output
    check_example("plan-cell", argv=argv, output=output)


def test_the_forbidden_combination_example_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = examples()["plan-forbidden"].argv[1:]
    code, output = _run_here(argv, capsys, monkeypatch)
    assert code == 2, output  # the README: "exits with code 2"
    check_example("plan-forbidden", argv=argv, output=output)


_ROW = re.compile(
    r"^\| (?P<name>[a-z0-9-]+) \| (?P<stage>\d) \| (?P<result>\w+) \| (?P<first>[\d.]+) -> (?P<last>[\d.]+) \| "
    r"(?P<rate>[\d.]+) \| (?P<mb>\d+) MB \|$"
)


def test_the_gpu_smoke_example_is_the_table_smoke_prints() -> None:
    """Measured on an H200 (README): not reproducible here, so its numbers are a recording; the
    command must parse, the header and table must be what smoke renders from those numbers, and
    its runs must be the ones smoke plans on a GPU for the wheel's ops."""
    example = examples()["smoke-gpu"]
    args = build_parser().parse_args(example.argv[1:])
    assert args.device == "cuda"
    cell = cell_id(cell_from_wheel_filename(Path(args.wheels[0]).name))
    start = example.output.index(f"{cell} on cuda:")
    table = example.output[start + 1 :]
    rows = [_ROW.match(line) for line in table[2:]]
    assert all(rows), table
    results = [
        {
            "name": row["name"],
            "stage": int(row["stage"]),
            "ok": row["result"] == "ok",
            "loss_first": float(row["first"]),
            "loss_last": float(row["last"]),
            "samples_per_s": float(row["rate"]),
            "peak_memory_mb": float(row["mb"]),
        }
        for row in rows
        if row
    ]
    assert render_smoke_markdown(results, []).splitlines() == list(table)
    planned, skipped = runs_for("cuda", ["cpu_adam", "fused_adam"])
    assert [r.name for r in planned] == [r["name"] for r in results]
    assert not skipped
    check_example("smoke-gpu", argv=shlex.split(example.command)[1:], output="\n".join(example.output))
