"""`dswheels plan` over the whole history: DeepSpeed 0.14.5..newest x torch 2.0..newest x each torch's
variants x every Python x both platforms. Target: under 1 second.

Naive way: judge and resolve every cell on its own (no sharing of verdicts between cells that
differ only in Python), as a straightforward loop over `check_cell` + `resolve_cell` would.
"""

from __future__ import annotations

from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.plan_json import render_json
from dswheels.kernel.versions import format_version
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.matrix.spec import MatrixSpec
from dswheels.plan.planner import check_cell, plan, resolve_cell
from tests.bench.common import Result, best_of


def history_matrix(compat: Compat) -> MatrixSpec:
    deepspeed = [format_version(v) for v in compat.deepspeed_releases if v >= (0, 14, 5)]
    torch = []
    for minor in compat.torch_minors:  # every variant each torch has on either platform
        release = compat.torch[minor]
        variants = sorted({v.name for os in release.variants for v in release.variants_for(os)})
        torch.append(f'  - {{version: "{format_version(minor)}", variants: [{", ".join(variants)}]}}')
    pythons = sorted({str(p) for r in compat.torch.values() for ps in r.python.values() for p in ps})
    text = "\n".join(
        [
            "schema: 1",
            f"deepspeed: [{', '.join(repr(d) for d in deepspeed)}]",
            "torch:",
            *torch,
            f"python: [{', '.join(repr(p) for p in pythons)}]",
            "platforms: [win_amd64, linux_x86_64]",
            "runners:",
            "  win_amd64: {build: [windows-2022], smoke: [gpu]}",
            "  linux_x86_64: {build: [ubuntu-24.04, ubuntu-22.04], smoke: [gpu]}",
        ]
    )
    return parse_matrix(text, "history.yml", compat)


def run() -> list[Result]:
    compat = load_compat()
    spec = history_matrix(compat)
    cells = spec.axis_cells()
    result = plan(spec, compat)
    print(f"history: {len(cells)} cells, {len(result.planned)} buildable, {len(result.dropped)} dropped")

    def naive() -> None:
        for cell in cells:
            if not check_cell(cell, compat):
                resolve_cell(cell, compat, spec)

    ours = best_of(lambda: plan(spec, compat))
    naive_time = best_of(naive, repeat=1)
    with_json = best_of(lambda: render_json(plan(spec, compat), version="bench"))
    return [
        Result("plan: whole history", ours, naive_time, target="< 1 s"),
        Result("plan + JSON contract: whole history", with_json, naive_time),
    ]
