"""The cost model's data: the shipped file parses, every figure says where it comes from, every shipped
op has a cost and probed units, and a refit from real manifests (Linux and the Wine host) rewrites it."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.plan.costs import (
    STATUSES,
    OpCost,
    OpSample,
    Seconds,
    Units,
    load_costs,
    parse_costs,
    refit_op,
    replace_op_lines,
)
from dswheels.plan.scopes import Scope
from tests.conftest import ROOT
from tests.support.deepspeed_standin import source_tree, write_files

SHIPPED = resources.files("dswheels").joinpath("compile_times.yml").read_text(encoding="utf-8")
SCRIPT = ROOT / "scripts" / "update_compile_times.py"


def test_every_op_dswheels_ships_has_a_cost_and_probed_units() -> None:
    model = load_costs()
    compat = load_compat()
    shippable = {op.name for op in compat.ops if op.ship}
    missing = sorted(shippable - set(model.ops))
    assert not missing, f"compile_times.yml lacks {missing}"
    for name, cost in model.ops.items():
        assert cost.linux.status in STATUSES
        assert cost.linux.source, name
        # the unit counts come from DeepSpeed's own builders, not from a hand count
        assert cost.units.status == "probed", f"{name}: units {cost.units.status} ({cost.units.source})"
    # ragged_device_ops is RaggedOpsBuilder (op_builder/ragged_ops.py: 10 .cpp, 6 .cu); ragged_ops is
    # RaggedUtilsBuilder (1 + 1): the file names mislead, the builders' NAMEs do not
    assert (model.ops["ragged_device_ops"].units.host_count, model.ops["ragged_device_ops"].units.device_count) == (
        10,
        6,
    )
    assert (model.ops["ragged_ops"].units.host_count, model.ops["ragged_ops"].units.device_count) == (1, 1)
    # quantizer's five kernels reach no torch header: every torch of a toolkit shares them
    assert model.ops["quantizer"].units.device == {Scope.TOOLKIT: 5}


def test_every_figure_says_whether_it_was_measured_or_assumed() -> None:
    model = load_costs()
    figures = [*model.workflow.figures().values(), *(f for r in model.runners.values() for f in r.figures().values())]
    for figure in figures:
        assert figure.status in STATUSES
        assert figure.source
    data = yaml.safe_load(SHIPPED)
    del data["runners"]["linux"]["setup"]["assumed"]
    with pytest.raises(ConfigError, match=r"runners\.linux\.setup: needs exactly one of measured"):
        parse_costs(data)


def test_bad_data_is_refused_with_the_key() -> None:
    data = yaml.safe_load(SHIPPED)
    data["ops"]["fused_adam"]["host"] = "fast"
    with pytest.raises(ConfigError, match=r"ops\.fused_adam\.host: must be a number"):
        parse_costs(data)
    data = yaml.safe_load(SHIPPED)
    data["ops"]["fused_adam"]["units"]["device"] = {"everywhere": 1}
    with pytest.raises(ConfigError, match=r"'everywhere' is no scope"):
        parse_costs(data)


def test_refit_takes_the_median_counts_nvcc_threads_and_a_shared_machines_share() -> None:
    def sample(scale: float, where: str, share: float = 1.0) -> OpSample:
        units = (("q.cpp", 40.0 * scale), ("a.cu", 30.0 * scale), ("b.cu", 30.0 * scale))
        return OpSample("quantizer", units, archs=2, nvcc_threads=2, where=where, cpu_share=share)

    seconds, units = refit_op([sample(1, "x"), sample(1, "y"), sample(10, "z")])
    assert seconds.host == 40.0  # the median, not the slow outlier
    assert seconds.device == 60.0  # 60 s of .cu wall with 2 arch threads for 2 archs: 60 core-seconds per arch
    assert units is None  # these builds did not probe their units' scopes
    # a build on a machine at load 10 with 2 cores: each compile had a fifth of a core
    assert refit_op([sample(5, "w", share=0.2)])[0].host == 40.0


def test_a_refit_rewrites_only_the_ops_it_measured() -> None:
    model = load_costs()
    fitted = OpCost(linux=Seconds(1.5, 2.5, "measured", "refit"), units=model.ops["fused_adam"].units)
    new = OpCost(linux=Seconds(3, 0, "measured", "n"), units=Units({Scope.CELL: 1}, {}, "probed", "p"))
    text = replace_op_lines(SHIPPED, {"fused_adam": fitted, "new_op": new})
    before, after = parse_costs(yaml.safe_load(SHIPPED)), parse_costs(yaml.safe_load(text))
    assert after.ops["fused_adam"].linux == Seconds(1.5, 2.5, "measured", "refit")
    assert after.ops["new_op"].linux.host == 3
    assert {k: v for k, v in after.ops.items() if k not in ("fused_adam", "new_op")} == {
        k: v for k, v in before.ops.items() if k != "fused_adam"
    }
    assert "# Every measurement" in text  # the comments stay


def _refit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "compile_times.yml"
    if not data.exists():
        data.write_text(SHIPPED)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data), *args], capture_output=True, text=True, check=False
    )


def test_the_update_script_refits_from_a_real_linux_manifest(tmp_path: Path) -> None:
    manifest = json.loads((ROOT / "tests" / "data" / "manifest-cuda-units.json").read_text())
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.manifest.json").write_text(json.dumps(manifest))
    result = _refit(tmp_path, str(tmp_path / "m"))
    assert result.returncode == 0, result.stdout + result.stderr
    fitted = parse_costs(yaml.safe_load((tmp_path / "compile_times.yml").read_text())).ops["quantizer"]
    # recorded by `nox -s bench -- release` here: quantizer for sm_80 and sm_90 with 2 nvcc threads, cold cache
    assert fitted.linux.host == 32.9  # pt_binding.cpp
    assert fitted.linux.device == 69.7  # its five .cu units: 69.73 s of wall, 2 threads for 2 archs
    assert fitted.linux.source == "refit from 1 build(s): ds0.19.8-torch2.14-cu130-cp311-linux_x86_64"
    assert fitted.units.count == 6


def test_a_wine_hosts_manifest_refits_the_windows_figures_scaled_by_its_share(tmp_path: Path) -> None:
    """The Wine host's Windows build (fused_adam + random_ltd for cu130's six archs, 2 cores shared with ~8
    other builds): its seconds times the share of a core each compile had become the ops' Windows figures,
    and the Windows runner's speed the ratio to the Linux figures measured for the same op."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.manifest.json").write_text((ROOT / "tests" / "data" / "manifest-wine-units.json").read_text())
    result = _refit(tmp_path, "--cpu-share", "0.2", "--measured-on", "the Wine host at load ~10", str(tmp_path / "m"))
    assert result.returncode == 0, result.stdout + result.stderr
    model = parse_costs(yaml.safe_load((tmp_path / "compile_times.yml").read_text()))
    shipped = parse_costs(yaml.safe_load(SHIPPED))
    windows = model.ops["fused_adam"].windows
    assert windows is not None
    assert windows.status == "measured"
    assert "the Wine host at load ~10" in windows.source
    assert windows.host == 59.6  # fused_adam_frontend.cpp: 297.98 s x 0.2
    assert windows.device == 45.6  # multi_tensor_adam.cu: 1368.16 s for 6 archs, 1 nvcc thread, x 0.2
    assert model.ops["fused_adam"].linux == shipped.ops["fused_adam"].linux  # Linux keeps its figures
    speed = model.runners["windows"].speed
    assert speed.status == "measured"
    assert "fused_adam" in speed.source


def test_the_update_script_probes_a_trees_units(tmp_path: Path) -> None:
    """--units: DeepSpeed's builders (the op sources probe) list each op's sources; each unit's scope is
    read from its includes. A fake tree with two ops: one kernel that reaches only its own header, one
    that reaches torch's."""
    files = source_tree()
    tree = write_files(tmp_path / "src", files)
    (tree / "csrc").mkdir(exist_ok=True)
    (tree / "csrc" / "cpu_adam.cpp").write_text('#include "k.h"\n#include <torch/extension.h>\n')
    (tree / "csrc" / "async_io.cpp").write_text('#include "k.h"\n')
    (tree / "csrc" / "k.h").write_text("#include <cstdio>\n")
    data = tmp_path / "compile_times.yml"
    data.write_text(SHIPPED)
    result = _refit(tmp_path, "--units", str(tree), "--python", sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
    model = parse_costs(yaml.safe_load(data.read_text()))
    assert model.ops["cpu_adam"].units.host == {Scope.CELL: 1}  # torch/extension.h: Python's
    assert model.ops["async_io"].units.host == {Scope.TOOLKIT: 1}  # neither
    assert "op sources probe" in model.ops["async_io"].units.source


def test_a_linux_and_a_windows_build_side_by_side_give_windows_speed(tmp_path: Path) -> None:
    """fused_adam + cpu_adam for sm_80, built for Linux and then for Windows under Wine on this machine (2
    cores shared with other builds, load ~8): the ratio of their compiles is the Windows runner's speed (the
    link MSVC's /GL leaves the code generation to is in it, in no unit); the Linux build refits its ops,
    scaled by the share of a core its compiles had (its CPU seconds over its two slots' seconds)."""
    (tmp_path / "m").mkdir()
    for os_name in ("linux", "windows"):
        manifest = (ROOT / "tests" / "data" / f"manifest-sbs-{os_name}.json").read_text()
        (tmp_path / "m" / f"{os_name}.manifest.json").write_text(manifest)
    result = _refit(tmp_path, "--measured-on", "here", str(tmp_path / "m"))
    assert result.returncode == 0, result.stdout + result.stderr
    model = parse_costs(yaml.safe_load((tmp_path / "compile_times.yml").read_text()))
    speed = model.runners["windows"].speed
    assert speed.value == round(521.94 / 316.33, 2)
    assert speed.status == "measured"
    assert "Windows 522 s, Linux 316 s" in speed.source
    fused = model.ops["fused_adam"]
    assert fused.windows is None  # the Windows build of a pair gives the speed, not op figures
    share = 148.54 / (2 * 316.33)  # compile_cpu over the jobserver's 2 slots x the compile's seconds
    assert fused.linux.host == round(124.84 * share, 1)
    assert fused.linux.device == round(170.47 * share, 1)  # one arch (8.0), one nvcc thread
    assert "x 0.23 (the share of a core" in fused.linux.source
