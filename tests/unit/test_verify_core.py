"""Static verification, ds_report parsing and the smoke configs (pure parts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dswheels.kernel.binaries.fatbin import GpuCode
from dswheels.kernel.naming import parse_cell_id
from dswheels.kernel.wheel_contents import PORTABLE_MARK, parse_installed_info, parse_metadata
from dswheels.smoke.runs import deepspeed_config, render_smoke_markdown, runs_for
from dswheels.verify import static_checks
from dswheels.verify.ds_report import parse_ds_report
from dswheels.verify.registry import Check
from dswheels.verify.static_checks import BUILDER, Expected, cell_from_wheel_filename
from tests.support.verify_facts import run_check, wheel_facts, with_gpu

DATA = Path(__file__).parent.parent / "data"
CPU = "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
SO = "deepspeed/ops/adam/cpu_adam_op.cpython-311-x86_64-linux-gnu.so"
METADATA = (
    "Metadata-Version: 2.4\nName: deepspeed\nVersion: 0.19.8+cputorch2.13\nRequires-Dist: hjson\n"
    "Requires-Dist: torch==2.13.*\n\nbody\n"
)
INFO = (
    "version='0.19.8+cputorch2.13'\ninstalled_ops={'deepspeed_ccl_comm': False, 'cpu_adam': 1}\n"
    "accelerator_name='cpu'\ntorch_info={'version': '2.13', 'bf16_support': False, 'cuda_version': '0.0'}\n"
)


def _expected(ops: tuple[str, ...] = ("cpu_adam",)) -> Expected:
    return Expected(
        cell=parse_cell_id("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"),
        ops=ops,
        modules={"cpu_adam": "deepspeed.ops.adam.cpu_adam_op"},
        cpu_baseline="x86-64-v2",
    )


def _checks(**kw: object) -> dict[str, Check]:
    """The static checks of the wheel's files (the registry of static_checks.py), by name."""
    args: dict[str, object] = {
        "filename": CPU,
        "names": ["deepspeed/__init__.py", SO],
        "metadata": parse_metadata(METADATA),
        "installed": parse_installed_info(INFO),
        "builder_sources": {
            BUILDER: f"    def cpu_arch(self):\n        return '-march=x86-64-v2'  {PORTABLE_MARK} ...\n"
        },
    }
    args.update(kw)
    expected = args.pop("expected", _expected())
    assert isinstance(expected, Expected)
    return {c.name: c for c in static_checks.STATIC.run(wheel_facts(expected, **args))}


def test_a_good_wheel_passes() -> None:
    checks = _checks()
    assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
    assert set(checks) == {
        "filename",
        "version label",
        "torch pin",
        "accelerator",
        "torch_info",
        "installed ops",
        "extensions",
        "portable op_builder",
    }


def test_op_list_short_of_the_manifest() -> None:
    checks = _checks(expected=_expected(("cpu_adam", "cpu_lion")))
    assert not checks["installed ops"].ok
    assert "short of the manifest's list by cpu_lion" in checks["installed ops"].detail


def test_cpu_accelerator_labelled_cuda() -> None:
    name = "deepspeed-0.19.8+cu130torch2.13-cp311-cp311-linux_x86_64.whl"
    expected = Expected(cell=cell_from_wheel_filename(name), ops=("cpu_adam",))
    checks = _checks(filename=name, expected=expected)
    assert not checks["accelerator"].ok
    assert "labelled cu130torch2.13" in checks["accelerator"].detail
    assert "JIT-compiled" in checks["accelerator"].detail
    assert not checks["torch_info"].ok  # CUDA 0.0 vs 13.0 too
    assert not checks["version label"].ok


def test_torch_pin_and_extension_count() -> None:
    loose = METADATA.replace("torch==2.13.*", "torch>=2.0.0")
    assert not _checks(metadata=parse_metadata(loose))["torch pin"].ok
    extra = _checks(
        names=["deepspeed/__init__.py", SO, "deepspeed/ops/lion/cpu_lion_op.cpython-311-x86_64-linux-gnu.so"]
    )
    assert not extra["extensions"].ok
    assert "2 extension files for 1 installed ops" in extra["extensions"].detail
    assert not _checks(names=["deepspeed/__init__.py"])["extensions"].ok
    assert not _checks(builder_sources={BUILDER: "    def cpu_arch(self):\n        return '-march=native'\n"})[
        "portable op_builder"
    ].ok


def test_cell_from_wheel_filename_errors() -> None:
    with pytest.raises(ValueError, match="no dswheels label"):
        cell_from_wheel_filename("deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl")
    with pytest.raises(ValueError, match="is a wheel of torch, not of deepspeed"):
        cell_from_wheel_filename("torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl")


def test_gpu_checks() -> None:
    exp = Expected(
        cell=parse_cell_id("ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"),
        ops=("fused_adam",),
        arch_list=("7.5", "8.0+PTX"),
    )
    so = "a/fused_adam_op.so"
    good = run_check("gpu code", wheel_facts(exp, binaries={so: with_gpu(so, GpuCode(sass=(75, 80), ptx=(80,)))}))
    assert [c.ok for c in good] == [True]
    bad = run_check("gpu code", wheel_facts(exp, binaries={so: with_gpu(so, GpuCode(sass=(75, 80, 90), ptx=(75,)))}))
    assert not bad[0].ok
    assert "[90, 75]" in bad[0].detail


def test_ds_report_of_a_real_cpu_wheel() -> None:
    report = parse_ds_report((DATA / "ds_report_cpu_0.19.8.txt").read_text())
    assert report.installed == ("cpu_adam",)
    assert "deepspeed_not_implemented" in report.ops  # the long name with no dots
    assert report.ops["async_io"] == (False, False)
    assert report.torch_version == "2.13.0+cpu"
    assert report.compiled_with == "torch 2.13"
    assert report.ninja_ok is True
    assert report.as_json()["installed"] == ["cpu_adam"]
    with pytest.raises(ValueError, match="no op table"):
        parse_ds_report("Traceback (most recent call last):\n")


def test_smoke_configs_follow_the_seed_runner_shape() -> None:
    runs, skipped = runs_for("cpu", ["cpu_adam"])
    assert not skipped
    by_stage = {r.stage: deepspeed_config(r) for r in runs}
    assert set(by_stage) == {0, 1, 2, 3}
    zero3 = by_stage[3]
    assert zero3["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": False}}
    assert zero3["optimizer"]["type"] == "Adam"  # type: ignore[index]
    assert by_stage[0]["optimizer"]["params"]["torch_adam"] is True  # type: ignore[index]
    ga = next(deepspeed_config(r) for r in runs if r.grad_accum > 1)
    assert ga["gradient_accumulation_steps"] == 2
    gpu, gpu_skipped = runs_for("cuda", ["cpu_adam", "fused_adam"])
    assert not gpu_skipped
    assert any(deepspeed_config(r).get("bf16") == {"enabled": True} for r in gpu)
    none, why = runs_for("cpu", [])
    assert [r.stage for r in none] == [0]
    assert all("cpu_adam" in w for _r, w in why)
    table = render_smoke_markdown(
        [
            {
                "name": "zero1",
                "stage": 1,
                "ok": True,
                "loss_first": 1.5,
                "loss_last": 0.1,
                "samples_per_s": 800.0,
                "peak_memory_mb": 512.0,
            }
        ],
        [("gpu-zero0", "needs fused_adam")],
    )
    assert "| zero1 | 1 | ok | 1.5000 -> 0.1000 | 800.0 | 512 MB |" in table
    assert "skipped: needs fused_adam" in table
