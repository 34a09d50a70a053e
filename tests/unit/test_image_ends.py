"""The runner images as facts: their retirements recorded in compat.yml, and the plan's warnings, on a fixed day."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from dswheels.cli import main
from dswheels.kernel.compat import load_compat
from dswheels.plan.image_ends import image_end_warnings, planned_images
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import plan

COMPAT = load_compat()
OLD = COMPAT.runner_images["ubuntu-22.04"]
MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch: [{version: "2.13", variants: [cpu]}]
python: ["3.11"]
platforms: [linux_x86_64]
runners:
  linux_x86_64: {build: [IMAGE], smoke: [self-hosted]}
"""


def test_ubuntu_2204s_retirement_is_recorded_with_its_source() -> None:
    ends = OLD.ends
    assert ends is not None
    assert ends.deprecated == dt.date(2026, 9, 17)
    assert ends.brownouts == tuple(dt.date(2027, m, d) for m, d in ((3, 23), (3, 30), (4, 6), (4, 13)))
    assert ends.unsupported == dt.date(2027, 4, 17)
    assert ends.announcement == "actions/runner-images#14254"
    # the images the plan builds on now have no end announced; the container runs on ubuntu-24.04
    for name in ("ubuntu-24.04", "ubuntu-24.04-arm", "windows-2022", "windows-2025", "manylinux_2_28"):
        assert COMPAT.runner_images[name].ends is None, name
    assert COMPAT.runner_images["manylinux_2_28"].label == "ubuntu-24.04"


@pytest.mark.parametrize(
    ("today", "expected"),
    [
        (dt.date(2026, 11, 28), None),  # 115 days before the first brownout
        (dt.date(2026, 12, 23), "brownout (its jobs fail on purpose) on 2027-03-23, in 90 days"),
        (dt.date(2027, 3, 24), "brownout (its jobs fail on purpose) on 2027-03-30, in 6 days"),
        (dt.date(2027, 4, 14), "unsupported (its jobs no longer run) on 2027-04-17, in 3 days"),
        (dt.date(2027, 4, 17), "unsupported (its jobs no longer run) on 2027-04-17, in 0 days"),
        (dt.date(2027, 5, 1), "unsupported since 2027-04-17, its jobs no longer run"),
    ],
)
def test_a_warning_within_90_days_of_a_brownout_or_the_end(today: dt.date, expected: str | None) -> None:
    warnings = image_end_warnings([OLD], today)
    if expected is None:
        assert warnings == ()
        return
    (warning,) = warnings
    assert warning.startswith(f"runner image ubuntu-22.04: {expected}")
    assert "actions/runner-images#14254" in warning
    assert "move its cells to another image (runners in the matrix)" in warning


def test_only_the_images_a_plan_uses_are_judged() -> None:
    on_old = plan(parse_matrix(MATRIX.replace("IMAGE", "ubuntu-22.04"), "m.yml", COMPAT), COMPAT)
    assert [i.name for i in planned_images(on_old.planned, COMPAT.runner_images)] == ["ubuntu-22.04"]
    in_container = plan(parse_matrix(MATRIX.replace("IMAGE", "manylinux_2_28"), "m.yml", COMPAT), COMPAT)
    images = planned_images(in_container.planned, COMPAT.runner_images)
    assert [i.name for i in images] == ["manylinux_2_28", "ubuntu-24.04"]  # the container and its host
    assert image_end_warnings(images, dt.date(2027, 4, 1)) == ()
    # a host image with an end warns for the container that runs on it
    ending = dataclasses.replace(COMPAT.runner_images["ubuntu-24.04"], ends=OLD.ends)
    assert image_end_warnings([images[0], ending], dt.date(2027, 4, 1))[0].startswith("runner image ubuntu-24.04:")


def test_dswheels_plan_warns_on_a_fixed_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(MATRIX.replace("IMAGE", "ubuntu-22.04"), encoding="utf-8")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(dt.datetime(2027, 3, 1, tzinfo=dt.timezone.utc).timestamp())))
    assert main(["plan", "--matrix", str(matrix)]) == 0
    captured = capsys.readouterr()
    assert "runner image ubuntu-22.04: brownout (its jobs fail on purpose) on 2027-03-23, in 22 days" in (
        captured.out + captured.err
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc).timestamp())))
    assert main(["plan", "--matrix", str(matrix)]) == 0
    captured = capsys.readouterr()
    assert "runner image ubuntu-22.04" not in captured.out + captured.err
