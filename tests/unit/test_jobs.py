"""Grouping cells into GitHub jobs: as fine as possible, never more than 256."""

from __future__ import annotations

import pytest

from dswheels.core.compat import load_compat
from dswheels.core.config import parse_matrix
from dswheels.core.model import PlannedCell
from dswheels.core.naming import cell_id
from dswheels.core.plan import plan
from dswheels.core.render_plan import group_jobs
from dswheels.errors import ConfigError

COMPAT = load_compat()
RUNNERS = """
runners:
  win_amd64: {build: [windows-2022], smoke: [gpu]}
  linux_x86_64: {build: [ubuntu-24.04, ubuntu-22.04], smoke: [gpu]}
"""


def _plan(deepspeed: str, torch: str, python: str) -> list[PlannedCell]:
    text = (
        f"""schema: 1
deepspeed: [{deepspeed}]
torch: [{torch}]
python: [{python}]
platforms: [win_amd64, linux_x86_64]
"""
        + RUNNERS
    )
    return list(plan(parse_matrix(text, "m.yml", COMPAT), COMPAT).planned)


def test_small_plans_get_one_job_per_cell() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu126, cu130]}', '"3.11", "3.12"')
    level, groups = group_jobs(planned)
    assert level == "cell"
    assert len(groups) == len(planned) == 8


def test_large_plans_are_grouped_under_the_limit_and_keep_every_cell() -> None:
    ds = ", ".join(f'"0.19.{i}"' for i in range(5, 9))
    torch = ", ".join(f'{{version: "{t}", variants: [cu126, cu130, cpu]}}' for t in ("2.12", "2.13", "2.14"))
    planned = _plan(ds, torch, '"3.10", "3.11", "3.12", "3.13", "3.14"')
    assert len(planned) > 256
    level, groups = group_jobs(planned)
    assert level == "python"
    assert len(groups) <= 256
    ids = [cell_id(item.cell) for group in groups for item in group]
    assert sorted(ids) == sorted(cell_id(item.cell) for item in planned)
    for group in groups:  # one job = one toolchain
        assert len({(i.cell.variant, i.cell.platform, i.toolchain.cuda_toolkit) for i in group}) == 1


def test_too_many_even_grouped_is_an_error_with_a_way_out() -> None:
    planned = _plan('"0.19.8"', '{version: "2.14", variants: [cu126]}', '"3.11"')
    with pytest.raises(ConfigError, match="more than 1 jobs") as info:
        group_jobs(planned * 2, limit=1)
    assert "split the selection" in (info.value.hint or "")
