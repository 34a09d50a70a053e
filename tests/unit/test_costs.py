"""The cost model's data: the shipped file parses, every shipped op has a cost, and a refit rewrites it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from dswheels.core.compat import load_compat
from dswheels.core.workflow.costs import OpCost, OpSample, load_costs, parse_costs, refit_op, replace_op_lines
from dswheels.errors import ConfigError
from tests.conftest import ROOT

SHIPPED = resources.files("dswheels").joinpath("compile_times.yml").read_text(encoding="utf-8")


def test_every_op_dswheels_ships_has_a_measured_or_derived_cost() -> None:
    model = load_costs()
    compat = load_compat()
    shippable = {op.name for op in compat.ops if op.ship}
    missing = sorted(shippable - set(model.ops))
    assert not missing, f"compile_times.yml lacks {missing}"
    for name, cost in model.ops.items():
        assert cost.source, f"{name} says nowhere where its numbers come from"
    assert {"linux", "windows"} <= set(model.runners)


def test_bad_data_is_refused_with_the_key() -> None:
    data = yaml.safe_load(SHIPPED)
    data["ops"]["fused_adam"]["host"] = "fast"
    with pytest.raises(ConfigError, match=r"ops\.fused_adam: host must be a number"):
        parse_costs(data)


def test_refit_takes_the_median_and_counts_nvcc_threads() -> None:
    def sample(scale: float, where: str) -> OpSample:
        units = (("q.cpp", 40.0 * scale), ("a.cu", 30.0 * scale), ("b.cu", 30.0 * scale))
        return OpSample("quantizer", units, archs=2, nvcc_threads=2, where=where)

    samples = [sample(1, "x"), sample(1, "y"), sample(10, "z")]
    cost = refit_op(samples)
    assert cost.host == 40.0  # the median, not the slow outlier
    assert cost.device == 60.0  # 60 s of .cu wall with 2 arch threads for 2 archs: 60 core-seconds per arch
    assert cost.units == 3


def test_a_refit_rewrites_only_the_ops_it_measured() -> None:
    text = replace_op_lines(SHIPPED, {"fused_adam": OpCost(1.5, 2.5, 2, "refit"), "new_op": OpCost(3, 0, 1, "n")})
    before, after = parse_costs(yaml.safe_load(SHIPPED)), parse_costs(yaml.safe_load(text))
    assert after.ops["fused_adam"] == OpCost(1.5, 2.5, 2, "refit")
    assert after.ops["new_op"].host == 3
    assert {k: v for k, v in after.ops.items() if k not in ("fused_adam", "new_op")} == {
        k: v for k, v in before.ops.items() if k != "fused_adam"
    }
    assert "# Every measurement" in text  # the comments stay


def test_the_update_script_refits_from_a_real_manifest(tmp_path: Path) -> None:
    manifest = json.loads((ROOT / "tests" / "data" / "manifest-cuda-units.json").read_text())
    (tmp_path / "a.manifest.json").write_text(json.dumps(manifest))
    data = tmp_path / "compile_times.yml"
    data.write_text(SHIPPED)
    script = ROOT / "scripts" / "update_compile_times.py"
    result = subprocess.run(
        [sys.executable, str(script), "--data", str(data), str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    fitted = parse_costs(yaml.safe_load(data.read_text())).ops["quantizer"]
    # recorded by `nox -s bench -- release` here: quantizer for sm_80 and sm_90 with 2 nvcc threads, cold cache
    assert fitted.units == 6
    assert fitted.host == 32.9  # pt_binding.cpp
    assert fitted.device == 69.7  # its five .cu units: 69.73 s of wall, 2 threads for 2 archs
    assert fitted.source == "refit from 1 build(s): ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"
