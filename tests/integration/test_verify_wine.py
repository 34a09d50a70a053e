"""``dswheels verify`` of a win_amd64 wheel on this Linux machine: its run-time part in a Windows venv under Wine.

The wheel is the Windows canary (``cpu_adam`` and the CUDA op ``random_ltd``, built by the real MSVC and
nvcc under Wine: tests/integration/test_windows_wine.py's ``wine_build``); the venv is one of the Windows
CPython dswheels builds from CPython's sources, filled by its own pip with torch 2.14's win_amd64 wheel
from pip's configured indexes (a CPU build: PyPI's). What a Windows user's venv would show, shown here:
``ds_report`` lists the ops, ``cpu_adam`` loads as prebuilt with JIT forbidden and steps as AdamW does,
``random_ltd`` is judged statically because torch here has no ``torch_cuda.dll``. Then the two faults only
loading finds: a ``.pyd`` where DeepSpeed does not import it from, and a DLL nothing provides. And the
Windows user's path: the line the served site shows, typed into that Windows Python's pip, then ``ds_report``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from base64 import urlsafe_b64encode
from collections.abc import Iterator
from pathlib import Path

import pytest

from dswheels.host.cache import CacheLayout
from dswheels.platforms.wine.host import wait_for_wineserver
from tests.conftest import ROOT
from tests.integration.conftest import Built, build_env, dswheels, msvc_root, require_wine

pytestmark = pytest.mark.integration

CPU_OPS = "deepspeed/ops/adam/cpu_adam_op_"  # one .pyd per ISA level: _default, _avx2, _avx512
CUDA_OP = "deepspeed/ops/random_ltd_op.cp311-win_amd64.pyd"


@pytest.fixture(autouse=True)
def _wine_settles(dswheels_cache: Path) -> Iterator[None]:
    yield
    wait_for_wineserver(CacheLayout(dswheels_cache).wine_prefix, os.environ)


def verify(wheel: Path, cache: Path, report: Path) -> tuple[int, dict[str, object], str]:
    result = dswheels(
        "verify",
        str(wheel),
        "--msvc-root",
        str(msvc_root()),
        "--torch-index",
        "pip",
        "--report",
        str(report),
        env=build_env(cache),
    )
    data = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    return result.returncode, data, result.stdout + result.stderr


def runtime_checks(data: dict[str, object]) -> dict[str, dict[str, object]]:
    wheels = data["wheels"]
    assert isinstance(wheels, list)
    assert len(wheels) == 1
    return {c["name"]: c for c in wheels[0]["runtime"]["checks"]}


def test_verify_loads_the_cpu_op_steps_adam_and_judges_the_cuda_op_statically(
    wine_build: Built, dswheels_cache: Path, tmp_path: Path
) -> None:
    require_wine()
    code, data, out = verify(wine_build.wheel, dswheels_cache, tmp_path / "report.json")
    assert code == 0, out[-6000:]
    checks = runtime_checks(data)
    assert checks["load cpu_adam"]["ok"], checks
    assert "from the wheel" in str(checks["load cpu_adam"]["detail"])
    assert checks["load random_ltd"]["ok"]
    detail = str(checks["load random_ltd"]["detail"])
    assert detail.startswith("judged statically, not loaded"), detail
    assert "c10_cuda.dll" in detail
    assert checks["no JIT"]["ok"]
    assert checks["ds_report"]["ok"], checks["ds_report"]
    adam = str(checks["cpu_adam step"]["detail"])
    assert checks["cpu_adam step"]["ok"], adam
    assert float(re.search(r"largest difference (\S+)", adam).group(1)) <= 1e-5  # type: ignore[union-attr]
    assert "built from its sources by dswheels" in str(checks["interpreter"]["detail"])
    assert not list(dswheels_cache.glob("verify/**/torch_extensions"))


def _rewrite(wheel: Path, out: Path, change: dict[str, tuple[str, bytes]]) -> Path:
    """``wheel`` with members replaced (old name -> (new name, bytes)), its RECORD rewritten to match."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as src:
        members = {n: src.read(n) for n in src.namelist()}
    for old, (new, data) in change.items():
        del members[old]
        members[new] = data
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    lines = []
    for name, data in members.items():
        if name == record:
            continue
        digest = urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    members[record] = ("\n".join([*lines, f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    return out


def test_loading_finds_a_misplaced_pyd_and_a_dll_nothing_provides(
    wine_build: Built, dswheels_cache: Path, tmp_path: Path
) -> None:
    """cpu_adam's .pyd files (one per ISA level) one folder up (DeepSpeed imports deepspeed.ops.adam.cpu_adam_op,
    which loads its variant from beside it: not found); the CUDA op's .pyd asking for c1x.dll instead of c10.dll
    (no torch provides it): both fail the loaded check, and the CUDA op is not excused as judged statically."""
    require_wine()
    with zipfile.ZipFile(wine_build.wheel) as zf:
        cpu = {n: zf.read(n) for n in zf.namelist() if n.startswith(CPU_OPS) and n.endswith(".pyd")}
        cuda = zf.read(CUDA_OP)
    assert len(cpu) == 3, sorted(cpu)
    assert cuda.count(b"c10.dll\x00") == 1
    moved = {name: (name.replace("/adam/", "/"), data) for name, data in cpu.items()}
    broken = _rewrite(
        wine_build.wheel,
        tmp_path / "broken" / wine_build.wheel.name,
        {**moved, CUDA_OP: (CUDA_OP, cuda.replace(b"c10.dll\x00", b"c1x.dll\x00"))},
    )
    code, data, out = verify(broken, dswheels_cache, tmp_path / "report.json")
    assert code == 6, out[-6000:]
    checks = runtime_checks(data)
    assert not checks["load cpu_adam"]["ok"]
    # the wheel says cpu_adam is installed, so DeepSpeed imports its module from where it belongs, and its variant
    # is not there
    assert "No module named 'deepspeed.ops.adam.cpu_adam_op_" in str(checks["load cpu_adam"]["detail"])
    assert not checks["load random_ltd"]["ok"]
    assert "DLL load failed" in str(checks["load random_ltd"]["detail"])


@pytest.mark.windows_user  # 10-17 minutes here: left out of CI's `nox -s tests` to keep it within its time
def test_a_windows_user_installs_it_with_the_line_the_served_site_shows_and_ds_report_lists_its_ops(
    wine_build: Built, dswheels_cache: Path
) -> None:
    """`dswheels publish` and `dswheels index` make a site, served on loopback as `python3 -m http.server` serves
    it; the line its page shows in Windows' form, then the same with the partition's --find-links page, is typed
    into a fresh venv of the Windows CPython under Wine (scripts/windows_user_path.py, which `nox -s windows`
    runs): pip installs the wheel from the site, and ds_report lists its ops installed."""
    require_wine()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "windows_user_path.py"),
            str(wine_build.wheel),
            "--msvc-root",
            str(msvc_root()),
            "--torch-index",
            "pip",
        ],
        env=build_env(dswheels_cache),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    version = wine_build.wheel.name.split("-")[1]
    typed = re.findall(r"^typed: (.*)$", done.stdout, flags=re.MULTILINE)
    assert len(typed) == 2, out[-3000:]
    assert typed[0].startswith(f'py -m pip install "deepspeed=={version}" --extra-index-url http://127.0.0.1:')
    assert typed[0].endswith("/simple/ --extra-index-url https://download.pytorch.org/whl/cu130")
    assert re.search(r" --find-links http://127\.0\.0\.1:[0-9]+/whl/cu130-torch2\.14/ ", typed[1]), typed[1]
    with zipfile.ZipFile(wine_build.wheel) as zf:
        ops = {Path(n).name.split("_op.")[0] for n in zf.namelist() if n.endswith(".pyd")}
    assert ops == {"cpu_adam", "random_ltd"}
    for listed in re.findall(r"ds_report lists installed: (.*)$", done.stdout, flags=re.MULTILINE):
        assert ops <= set(listed.split(", ")), listed
    assert f"installed deepspeed {version};" in done.stdout
