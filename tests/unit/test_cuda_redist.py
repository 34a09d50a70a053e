"""NVIDIA's redistrib JSON, compat.yml's pins of it, and the plan's check of the component list against it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from dswheels.cuda.redist import (
    MissingComponentsError,
    archives_for,
    parse_redist,
    recorded_release,
    root_links,
)
from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.compat.read import recorded_redist
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.model import Platform, Python, Variant
from dswheels.kernel.versions import TorchMinor, parse_version
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.plan.planner import Combo, plan
from tests.conftest import ROOT

RECORDS = ROOT / "dswheels" / "cuda_redist"
RECORDED_1303 = json.loads((RECORDS / "redistrib_13.0.3.json").read_text(encoding="utf-8"))


def test_every_pin_has_its_recorded_json_and_every_recorded_json_its_pin() -> None:
    compat = load_compat()
    pinned = {t.install: t.redist_sha256 for t in compat.cuda.values() if t.redist_sha256}
    recorded = {p.name.removeprefix("redistrib_").removesuffix(".json"): p for p in RECORDS.glob("redistrib_*.json")}
    assert pinned, "compat.yml pins no redistrib JSON"
    assert set(pinned) == set(recorded)  # no orphan copy, no pin without its copy
    for release, pin in pinned.items():
        assert hashlib.sha256(recorded[release].read_bytes()).hexdigest() == pin
        toolkit = compat.cuda[parse_version(release)[:2]]
        found = recorded_release(compat, toolkit)
        assert found is not None
        assert found.label == release
        # every component of the one list has an archive for every platform the builds run on (linux-sbsa too)
        for platform in Platform:
            archives = archives_for(found, compat.components_for(toolkit.minor), platform)
            assert [a.component for a in archives] == [c.redist for c in compat.components_for(toolkit.minor)]


def test_the_recorded_13_0_3_json_reads_as_nvidia_wrote_it() -> None:
    release = parse_redist(RECORDED_1303)
    nvcc = release.archive("cuda_nvcc", "linux-x86_64")
    # the digest independent sources give for this archive (Bazel rules pinning NVIDIA's archives)
    assert nvcc.sha256 == "48e35be3cfbf4b4fbc16828eaec8a7048ee789403049dc409f7b643d6259cf7a"
    assert (nvcc.version, nvcc.size) == ("13.0.88", 26657716)
    assert nvcc.relative_path == "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz"
    # the versions of the components are those cuda-toolkit 13.0.3's wheel METADATA pins
    assert {k: release.versions[k] for k in ("libcublas", "libcusparse", "cuda_cudart")} == {
        "libcublas": "13.1.1.3",
        "libcusparse": "12.6.3.3",
        "cuda_cudart": "13.0.96",
    }
    assert release.archive("libcublas", "windows-x86_64").filename.endswith(".zip")


def test_a_component_the_json_lacks_is_named() -> None:
    data = {k: v for k, v in RECORDED_1303.items() if k != "cuda_profiler_api"}
    windows_less = dict(data["libcurand"])
    del windows_less["windows-x86_64"]
    release = parse_redist({**data, "libcurand": windows_less})
    components = load_compat().components_for((13, 0))
    with pytest.raises(MissingComponentsError) as caught:
        archives_for(release, components, "windows")
    assert caught.value.missing == ("profiler_api (cuda_profiler_api)", "curand (libcurand)")
    assert "redistrib_13.0.3.json has no windows-x86_64 archive of profiler_api" in str(caught.value)
    with pytest.raises(MissingComponentsError) as caught:
        archives_for(release, components, "linux")
    assert caught.value.missing == ("profiler_api (cuda_profiler_api)",)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"relative_path": "cuda_nvcc/../../etc/passwd.tar.xz"}, "'..' leads out of the tree"),
        ({"relative_path": "/cuda_nvcc/x.tar.xz"}, "an absolute path"),
        ({"relative_path": "libcublas/linux-x86_64/x.tar.xz"}, "an archive path cuda_nvcc/<platform>/"),
        ({"relative_path": "cuda_nvcc/linux-x86_64/x.exe"}, "an archive path"),
        ({"sha256": "ABC"}, "a sha256"),
        ({"size": "-5"}, "a size in bytes"),
        ({"size": "1e9"}, "a size in bytes"),
        ({"size": "\u00b2"}, "a size in bytes"),
        ({"size": str(9 * 1024**3)}, "a size in bytes"),
        ({"size": True}, "a size in bytes"),
    ],
)
def test_an_entry_of_the_wrong_shape_is_refused_when_used(entry: dict[str, object], expected: str) -> None:
    nvcc = dict(RECORDED_1303["cuda_nvcc"])
    nvcc["linux-x86_64"] = {**nvcc["linux-x86_64"], **entry}
    release = parse_redist({**RECORDED_1303, "cuda_nvcc": nvcc})  # read: the entry is judged when used
    with pytest.raises(ValueError, match=r"cuda_nvcc\.linux-x86_64") as caught:
        release.archive("cuda_nvcc", "linux-x86_64")
    assert expected in str(caught.value)
    release.archive("cuda_nvcc", "windows-x86_64")  # the other platforms' entries are not affected


def test_a_document_that_is_no_redistrib_json_is_refused() -> None:
    with pytest.raises(ValueError, match="release_label: expected a string"):
        parse_redist({"cuda_nvcc": {}})
    with pytest.raises(ValueError, match=r"release_label: expected a release X\.Y\.Z"):
        parse_redist({"release_label": "13.0"})
    with pytest.raises(ValueError, match=r"cuda_nvcc\.version: expected a string"):
        parse_redist({"release_label": "13.0.3", "cuda_nvcc": {"linux-x86_64": {}}})


def test_the_linux_root_gets_the_links_nvcc_profile_and_deepspeed_expect() -> None:
    # nvcc.profile: -I$(TOP)/$(_TARGET_DIR_)/include and -L$(TOP)/$(_TARGET_DIR_)/lib; DeepSpeed: -L$CUDA_HOME/lib64
    profile = (ROOT / "tests" / "data" / "cuda-redist").glob("cuda_nvcc/linux-x86_64/*.tar.xz")
    assert next(profile).is_file()
    assert dict(root_links("linux")) == {
        "lib64": "lib",
        "targets/x86_64-linux/include": "../../include",
        "targets/x86_64-linux/lib": "../../lib",
    }
    assert root_links("windows") == ()  # Windows archives already have lib/x64, as nvcc.profile and torch use


def test_a_recorded_copy_that_is_not_the_pinned_one_is_a_data_error() -> None:
    compat = load_compat()
    toolkit = compat.cuda[(13, 0)]
    other = dataclasses.replace(compat, redist_records=lambda _release: b'{"release_label": "13.0.3"}')
    with pytest.raises(ValueError, match=r"compat\.yml pins d73344"):
        recorded_release(other, toolkit)
    assert recorded_redist("13.0.3") == (RECORDS / "redistrib_13.0.3.json").read_bytes()
    assert recorded_redist("9.9.9") is None


# --- the plan ---------------------------------------------------------------------------------------

MATRIX = """\
schema: 1
deepspeed: ["0.19.8"]
torch: [{version: "2.14", variants: [cu130, cu126]}]
python: ["3.12"]
platforms: [win_amd64, linux_x86_64]
runners:
  win_amd64: {build: [windows-2022], smoke: [self-hosted]}
  linux_x86_64: {build: [ubuntu-22.04], smoke: [self-hosted]}
"""


def _combo(variant: str, platform: str) -> Combo:
    return Combo(
        deepspeed=(0, 19, 8),
        torch=TorchMinor((2, 14)),
        variant=Variant.parse(variant),
        python=Python.parse("3.12"),
        platform=Platform(platform),
    )


def _renamed(compat: Compat, name: str, redist: str) -> Compat:
    rows = tuple(dataclasses.replace(c, redist=redist) if c.name == name else c for c in compat.cuda_components)
    return dataclasses.replace(compat, cuda_components=rows)


def test_a_component_missing_from_the_pinned_json_is_refused_at_plan_time_by_name(tmp_path: Path) -> None:
    compat = _renamed(load_compat(), "profiler_api", "cuda_profiler")  # NVIDIA renamed it, say
    spec = parse_matrix(MATRIX, "matrix.yml", compat)
    with pytest.raises(ConfigError) as caught:
        plan(spec, compat, combo=_combo("cu130", "win_amd64"))
    details = caught.value.render()
    assert "[cuda-redist] CUDA 13.0.3: redistrib_13.0.3.json has no windows-x86_64 archive of" in details
    assert "profiler_api (cuda_profiler)" in details
    # the whole matrix: every cell with that toolkit is dropped with the reason, on both OSes, before any job
    result = plan(spec, _renamed(load_compat(), "crt", "cuda_crt_v2"))
    dropped = {d.cell.variant.name + "-" + d.cell.platform.value: d.reasons[0] for d in result.dropped}
    assert set(dropped) == {"cu130-win_amd64", "cu130-linux_x86_64"}
    assert all(r.rule == "cuda-redist" and "crt (cuda_crt_v2)" in r.message for r in dropped.values())
    assert {p.cell.variant.name for p in result.planned} == {"cu126"}  # CUDA 12.6 has no crt of its own


def test_a_toolkit_without_a_pinned_json_is_noted_and_dropped_where_the_jobs_install_it() -> None:
    compat = load_compat()
    assert not compat.cuda[(13, 1)].redist_sha256  # 13.1.2's JSON is not recorded
    spec = parse_matrix(MATRIX + 'toolkits: {cu130: "13.1"}\n', "matrix.yml", compat)
    (cell,) = plan(spec, compat, combo=_combo("cu130", "linux_x86_64")).planned
    assert cell.toolchain.cuda_toolkit == "13.1.2"
    assert any("pins no redistrib_13.1.2.json" in note and "ci plan` drops" in note for note in cell.toolchain.notes)
    with pytest.raises(ConfigError) as caught:
        plan(spec, compat, combo=_combo("cu130", "linux_x86_64"), redist_required=True)
    assert "[cuda-redist] CUDA 13.1.2: compat.yml pins no redistrib_13.1.2.json" in caught.value.render()
    # a pinned toolkit plans the same either way, its components listed for the job
    spec = parse_matrix(MATRIX, "matrix.yml", compat)
    (pinned,) = plan(spec, compat, combo=_combo("cu130", "linux_x86_64"), redist_required=True).planned
    assert pinned.toolchain.cuda_components == tuple(c.redist for c in compat.components_for((13, 0)))
    assert not [n for n in pinned.toolchain.notes if "redistrib" in n]
