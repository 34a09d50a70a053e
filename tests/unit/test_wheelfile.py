"""METADATA pin, RECORD, installed-ops parsing: pure functions over the bytes of a wheel."""

from __future__ import annotations

import base64
import csv
import hashlib
import io

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from dswheels.kernel.wheel_contents import (
    WheelContentError,
    dist_info_dir,
    extension_for_module,
    parse_installed_info,
    pin_requirement,
    record_hash,
    render_record,
    torch_pin,
)

# The header of DeepSpeed 0.19.8's real METADATA (abridged description)
METADATA = """\
Metadata-Version: 2.4
Name: deepspeed
Version: 0.19.8+cu130torch2.14
Summary: DeepSpeed library
Home-page: http://deepspeed.ai
Author: DeepSpeed Team
License: Apache Software License 2.0
Requires-Dist: einops
Requires-Dist: hjson
Requires-Dist: ninja
Requires-Dist: numpy
Requires-Dist: packaging>=20.0
Requires-Dist: psutil
Requires-Dist: py-cpuinfo
Requires-Dist: pydantic>=2.0.0
Requires-Dist: torch>=2.0.0
Requires-Dist: tqdm
Requires-Dist: nvidia-ml-py
Provides-Extra: dev
Requires-Dist: torch-einops-utils; extra == "dev"
Dynamic: author

DeepSpeed README. Install with Requires-Dist: torch>=1.0 in the text.
"""


def _requires(text: str) -> list[Requirement]:
    head = text.partition("\n\n")[0]
    return [
        Requirement(line.split(":", 1)[1].strip()) for line in head.splitlines() if line.startswith("Requires-Dist:")
    ]


def test_pin_torch_replaces_the_requirement() -> None:
    out = pin_requirement(METADATA, project="torch", requirement=torch_pin((2, 14)))
    reqs = {r.name: r for r in _requires(out)}
    torch = reqs["torch"]
    assert str(torch.specifier) == "==2.14.*"
    assert torch.specifier.contains(Version("2.14.1+cu130"))
    assert not torch.specifier.contains(Version("2.15.0"))
    assert not torch.specifier.contains(Version("2.13.1"))
    # nothing else moved; torch-einops-utils is another project; the description is untouched
    assert [r.name for r in _requires(out)] == [r.name for r in _requires(METADATA)]
    assert out.partition("\n\n")[2] == METADATA.partition("\n\n")[2]
    assert out.count("torch==2.14.*") == 1


def test_pin_keeps_markers_and_adds_when_missing() -> None:
    md = "Name: x\nRequires-Dist: Torch ; python_version >= '3.9'\nRequires-Dist: tqdm\n\nbody\n"
    assert "Requires-Dist: torch==2.13.*; python_version >= '3.9'\n" in pin_requirement(
        md, project="torch", requirement="torch==2.13.*"
    )
    md = "Name: x\nRequires-Dist: tqdm\nProvides-Extra: dev\n\nbody\n"
    out = pin_requirement(md, project="torch", requirement="torch==2.13.*")
    assert out.splitlines()[:3] == ["Name: x", "Requires-Dist: tqdm", "Requires-Dist: torch==2.13.*"]


def test_record_matches_the_wheel_spec() -> None:
    files = [("deepspeed/__init__.py", b"x = 1\n"), ("deepspeed-0.19.8.dist-info/METADATA", b"Name: deepspeed\n")]
    text = render_record(files, record_path="deepspeed-0.19.8.dist-info/RECORD")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[-1] == ["deepspeed-0.19.8.dist-info/RECORD", "", ""]
    for (name, data), row in zip(files, rows, strict=False):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert row == [name, f"sha256={digest}", str(len(data))]
    assert record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


def test_record_quotes_odd_names() -> None:
    text = render_record([("a,b.py", b"")], record_path="x.dist-info/RECORD")
    assert text.startswith('"a,b.py",')


def test_installed_info_of_a_real_build() -> None:
    # as DeepSpeed 0.19.8's setup.py writes it (CUDA accelerator, fused_adam only)
    text = (
        "version='0.19.8+cu130torch2.14'\ngit_hash='unknown'\ngit_branch='unknown'\n"
        "installed_ops={'async_io': False, 'fused_adam': 1, 'cpu_adam': False}\n"
        "accelerator_name='cuda'\n"
        "torch_info={'version': '2.14', 'bf16_support': False, 'cuda_version': '13.0', 'nccl_version': '2.30', "
        "'hip_version': '0.0'}\n"
    )
    info = parse_installed_info(text)
    assert info.built_ops == ("fused_adam",)
    assert info.accelerator_name == "cuda"
    assert info.torch_info["cuda_version"] == "13.0"
    assert info.version == "0.19.8+cu130torch2.14"


def test_installed_info_errors() -> None:
    with pytest.raises(WheelContentError, match="no installed_ops"):
        parse_installed_info("version='1'\n")
    with pytest.raises(WheelContentError, match="not Python"):
        parse_installed_info("installed_ops = {")


def test_dist_info_and_extensions() -> None:
    names = [
        "deepspeed/inference/v2/kernelsinference_core_ops.cpython-311-x86_64-linux-gnu.so",
        "deepspeed/ops/adam/cpu_adam_op.cp311-win_amd64.pyd",
        "deepspeed-0.19.8.dist-info/METADATA",
    ]
    assert dist_info_dir(names) == "deepspeed-0.19.8.dist-info"
    # DeepSpeed's missing dot in InferenceCoreBuilder.absolute_name() is kept as it is
    assert extension_for_module("deepspeed.inference.v2.kernelsinference_core_ops", names) == names[0]
    assert extension_for_module("deepspeed.ops.adam.cpu_adam_op", names) == names[1]
    assert extension_for_module("deepspeed.ops.adam.fused_adam_op", names) is None
    with pytest.raises(WheelContentError):
        dist_info_dir(["a/b"])
