"""The pure part of ``dswheels cibw --finish``: the job record and the manifest from plan + wheel."""

from __future__ import annotations

import json

import pytest

from dswheels.commands.build import plan_cell_ids
from dswheels.core.cibw import JOB_SCHEMA, CibwError, finished_manifest, job_record, parse_job_record
from dswheels.core.compat import load_compat
from dswheels.core.linux_runtime import RuntimeFloor
from dswheels.core.manifest import FileInfo, Manifest
from dswheels.core.naming import wheel_filename
from dswheels.core.wheelfile import InstalledInfo, builder_modules, parse_installed_info
from tests.conftest import DATA

COMPAT = load_compat()
CELL = "ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"
PLANNED = plan_cell_ids([CELL], matrix=DATA / "matrix-cpu.yml", nvcc=None, compat=COMPAT)[0]
ADAM = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"
SHM = "deepspeed/ops/comm/deepspeed_shm_comm_op.cpython-311-x86_64-linux-gnu.so"
NAMES = ("deepspeed/__init__.py", ADAM, SHM)
MODULES = {
    "cpu_adam": ("deepspeed.ops.adam.cpu_adam_op",),
    "deepspeed_shm_comm": ("deepspeed.ops.comm.deepspeed_shm_comm_op",),
}
INFO = (
    "version='0.19.8+cputorch2.13'\ninstalled_ops={'cpu_adam': True, 'deepspeed_shm_comm': True, 'fused_adam': False}\n"
    "accelerator_name='cpu'\ntorch_info={'version': '2.13', 'bf16_support': False, 'cuda_version': '0.0'}\n"
)
JOB = parse_job_record(
    job_record([PLANNED], env={"DS_BUILD_CPU_ADAM": "1"}, source=None, created="2026-11-23T00:00:00Z")
)


def _finish(info: InstalledInfo | None = None, *, filename: str = "", names: tuple[str, ...] = NAMES) -> Manifest:
    return finished_manifest(
        PLANNED,
        wheel=FileInfo(filename or wheel_filename(PLANNED.cell), 100, "ab" * 32),
        names=names,
        installed=info or parse_installed_info(INFO),
        modules=MODULES,
        sizes={ADAM: 10, SHM: 20},
        toolchain={"cxx": "c++ 12"},
        job=JOB,
        runtime=RuntimeFloor(glibc=(2, 34)),
        created="2026-11-23T01:00:00Z",
        dswheels="0.1.0",
    )


def test_the_manifest_is_the_plan_plus_what_the_wheel_says() -> None:
    manifest = _finish()
    assert manifest.producer == "cibuildwheel"
    assert [(o.name, o.env, o.extension, o.size, o.seconds) for o in manifest.ops_built] == [
        ("cpu_adam", "DS_BUILD_CPU_ADAM", ADAM, 10, None),
        ("deepspeed_shm_comm", "DS_BUILD_SHM_COMM", SHM, 20, None),
    ]
    assert manifest.env == {"DS_BUILD_CPU_ADAM": "1"}
    assert manifest.source == {}  # configured with --no-source
    assert manifest.durations == {}
    assert manifest.runtime == RuntimeFloor(glibc=(2, 34))
    assert manifest.plan["id"] == CELL
    assert manifest.torch_cuda is None


def test_a_wheel_that_is_not_the_plans_is_refused() -> None:
    with pytest.raises(CibwError, match="is not the wheel of"):
        _finish(filename="deepspeed-0.19.8+cputorch2.13-cp312-cp312-linux_x86_64.whl")
    cuda = parse_installed_info(INFO.replace("accelerator_name='cpu'", "accelerator_name='cuda'"))
    with pytest.raises(CibwError, match="DS_ACCELERATOR did not reach the build"):
        _finish(cuda)
    skipped = parse_installed_info(INFO.replace("'deepspeed_shm_comm': True", "'deepspeed_shm_comm': False"))
    with pytest.raises(CibwError, match="deepspeed_shm_comm: not in installed_ops"):
        _finish(skipped)
    with pytest.raises(CibwError, match="cpu_adam: no extension file in the wheel"):
        _finish(names=("deepspeed/__init__.py", SHM))


def test_job_records_round_trip_and_refuse_anything_else() -> None:
    text = job_record([PLANNED], env={"B": "2", "A": "1"}, source={"kind": "git-archive"}, created="t")
    data = json.loads(text)
    assert data["schema"] == JOB_SCHEMA
    assert list(data["env"]) == ["A", "B"]  # sorted: stable diffs
    job = parse_job_record(text)
    assert job.cells == (CELL,)
    assert job.source == {"kind": "git-archive"}
    for bad, words in [
        ("{", "not JSON"),
        ('{"schema": "other"}', f"not a {JOB_SCHEMA} record"),
        (json.dumps({"schema": JOB_SCHEMA, "cells": "x", "env": {}, "source": None}), "cells (a list)"),
    ]:
        with pytest.raises(CibwError, match=words.replace("(", r"\(").replace(")", r"\)")):
            parse_job_record(bad)


def test_builder_modules_read_both_accelerators_builders() -> None:
    cuda = (
        "class CPUAdamBuilder(TorchCPUOpBuilder):\n    NAME = 'cpu_adam'\n"
        "    def absolute_name(self):\n        return f'deepspeed.ops.adam.{self.NAME}_op'\n"
    )
    cpu = (
        'class CPUAdamBuilder(CPUOpBuilder):\n    NAME = "cpu_adam"\n'
        "    def absolute_name(self):\n        return 'deepspeed.ops.adam.cpu_adam_op'\n"
        "class Odd(CPUOpBuilder):\n    NAME = 'odd'\n    def absolute_name(self):\n        return self.x()\n"
    )
    found = builder_modules(
        {
            "deepspeed/ops/op_builder/cpu/cpu_adam.py": cpu,
            "deepspeed/ops/op_builder/cpu_adam.py": cuda,
            "deepspeed/ops/op_builder/broken.py": "def (",
        }
    )
    assert found == {"cpu_adam": ("deepspeed.ops.adam.cpu_adam_op",)}  # one module, named by both; odd unreadable
