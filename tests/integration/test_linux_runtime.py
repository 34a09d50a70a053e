"""The glibc/libstdc++ floor on real objects: the reader against readelf, the manifest, verify.

Objects compiled here with the machine's gcc/g++, and the DeepSpeed extensions of the
session's reference builds (no extra DeepSpeed build): ``version_needs`` must read exactly
what ``readelf --version-info`` prints, the manifest must record the floor of its wheel, and
``dswheels verify`` must fail a wheel whose extensions need more than its manifest promises.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from dswheels.kernel.binaries.linux_runtime import floor_of, version_needs
from dswheels.kernel.compat import load_compat
from dswheels.kernel.manifest import parse_manifest
from tests.conftest import require
from tests.integration.conftest import Built, dswheels, record_time

pytestmark = pytest.mark.integration

COMPAT = load_compat()

C_SOURCE = """\
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
int f(const char *s) { char *d = strdup(s); int n = printf("%s", d); free(d); return n; }
"""
CXX_SOURCE = """\
#include <condition_variable>
#include <mutex>
#include <string>
#include <stdexcept>
static std::mutex m;
static std::condition_variable cv;
extern "C" int wait_for(bool (*ready)()) { std::unique_lock<std::mutex> l(m); cv.wait(l, ready); return 0; }
extern "C" unsigned long length(const char *s) {
  std::string t(s);
  if (t.empty()) throw std::runtime_error(t);
  return t.size();
}
"""


def readelf_needs(path: Path) -> dict[str, tuple[str, ...]]:
    """``readelf --version-info``'s view of ``.gnu.version_r``: library -> version names, in file order."""
    result = subprocess.run(
        ["readelf", "--wide", "--version-info", str(path)], capture_output=True, text=True, check=True
    )
    needs: dict[str, list[str]] = {}
    section = result.stdout.partition("Version needs section")[2]
    current: list[str] | None = None
    for line in section.splitlines():
        if match := re.search(r"Version: \d+\s+File: (\S+)\s+Cnt: \d+", line):
            current = needs.setdefault(match.group(1), [])
        elif (match := re.search(r"Name: (\S+)\s+Flags:", line)) and current is not None:
            current.append(match.group(1))
        elif line.strip() and "Version needs" not in line and "Addr:" not in line and current is not None:
            break  # the next section of the output
    return {lib: tuple(names) for lib, names in needs.items()}


def _require_tools() -> None:
    require(shutil.which("readelf") is not None, "readelf (binutils) is the reference")
    require(shutil.which("gcc") is not None and shutil.which("g++") is not None, "gcc and g++ build the objects")


@pytest.mark.parametrize(("compiler", "source", "suffix"), [("gcc", C_SOURCE, "c"), ("g++", CXX_SOURCE, "cpp")])
def test_the_reader_agrees_with_readelf_on_objects_built_here(
    tmp_path: Path, compiler: str, source: str, suffix: str
) -> None:
    _require_tools()
    src = tmp_path / f"obj.{suffix}"
    src.write_text(source)
    out = tmp_path / "libobj.so"
    expected: dict[str, tuple[str, ...]] = {}
    for flags in (["-O0"], ["-O2", "-s"]):  # unstripped and stripped
        subprocess.run([compiler, "-shared", "-fPIC", *flags, "-o", str(out), str(src)], check=True)
        expected = readelf_needs(out)
        assert expected, "readelf shows no version needs: the reference is empty"
        assert version_needs(out.read_bytes()) == expected
    floor = floor_of([expected])
    assert floor.glibc is not None
    if suffix == "cpp":
        assert floor.glibcxx is not None
        assert floor.cxxabi is not None


def test_the_reader_agrees_with_readelf_on_the_system_libraries() -> None:
    _require_tools()
    libs = [Path(p) for p in ("/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libm.so.6")]
    libs = [p.resolve() for p in libs if p.exists()]
    require(bool(libs), "the system libstdc++/libm (Debian/Ubuntu paths)")
    for lib in libs:
        assert version_needs(lib.read_bytes()) == readelf_needs(lib), lib


def _extensions(wheel: Path, into: Path) -> list[Path]:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".so")]
        for name in names:
            zf.extract(name, into)
    return [into / n for n in names]


@pytest.mark.parametrize("which", ["cpu_build", "cuda_build"])
def test_deepspeed_extensions_read_as_readelf_shows_them_and_the_manifest_records_the_floor(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    _require_tools()
    built: Built = request.getfixturevalue(which)
    start = time.monotonic()
    extensions = _extensions(built.wheel, tmp_path)
    assert extensions
    needs = {}
    for ext in extensions:
        ours = version_needs(ext.read_bytes())
        assert ours == readelf_needs(ext), ext.name
        needs[ext.name] = ours
    manifest = parse_manifest(built.manifest.read_text(encoding="utf-8"))
    assert manifest.runtime == floor_of(needs.values())
    assert manifest.producer == "dswheels build"
    assert manifest.runtime is not None
    assert manifest.runtime.glibc is not None
    assert "Linux runtime floor: glibc" in built.stderr + built.stdout
    record_time(f"runtime readelf comparison ({which}, after the build)", time.monotonic() - start)


def _copy(built: Built, into: Path) -> tuple[Path, Path]:
    into.mkdir()
    wheel = Path(shutil.copy2(built.wheel, into))
    manifest = Path(shutil.copy2(built.manifest, into))
    return wheel, manifest


def _promise(manifest: Path, **limit: str) -> None:
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["plan"]["toolchain"]["linux_runtime"] = limit
    manifest.write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_verify_passes_at_the_promise_and_fails_above_it(cpu_build: Built, tmp_path: Path) -> None:
    wheel, manifest = _copy(cpu_build, tmp_path / "w")
    ok = dswheels("verify", str(wheel), "--static")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    line = next(ln for ln in (ok.stdout + ok.stderr).splitlines() if "linux runtime:" in ln)
    assert line.strip().startswith("ok"), line
    # a build for this machine promises no floor of its own: its manylinux tag says what it needs
    assert "promised at most" not in line, line

    recorded = parse_manifest(manifest.read_text(encoding="utf-8")).runtime
    assert recorded is not None
    assert recorded.glibcxx is not None
    # exactly the wheel's own floor: still within the promise
    _promise(manifest, **{k: v for k, v in recorded.as_json().items() if v is not None})
    at = dswheels("verify", str(wheel), "--static")
    assert at.returncode == 0, at.stdout + at.stderr

    # a promise older than what cpu_adam needs: GCC 9.3's libstdc++, Ubuntu 20.04's glibc
    _promise(manifest, glibc="2.31", glibcxx="3.4.28", cxxabi="1.3.12")
    above = dswheels("verify", str(wheel), "--static")
    assert above.returncode == 6, above.stdout + above.stderr
    line = next(ln for ln in (above.stdout + above.stderr).splitlines() if "linux runtime:" in ln)
    assert line.strip().startswith("FAILED"), line
    assert re.search(r"cpu_adam_op_(default|avx2|avx512)\.cpython-311-x86_64-linux-gnu\.so needs", line), line
    assert re.search(r"GLIBCXX_3\.4\.(29|3\d) > 3\.4\.28", line), line
    assert "build on an older image" in line


def test_verify_fails_a_manifest_that_misrecords_the_floor(cpu_build: Built, tmp_path: Path) -> None:
    wheel, manifest = _copy(cpu_build, tmp_path / "w")
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["runtime"] = {"glibc": "2.17", "glibcxx": "3.4.21", "cxxabi": "1.3.9"}
    manifest.write_text(json.dumps(data), encoding="utf-8")
    result = dswheels("verify", str(wheel), "--static")
    assert result.returncode == 6, result.stdout + result.stderr
    assert "the manifest records glibc 2.17" in result.stdout + result.stderr
