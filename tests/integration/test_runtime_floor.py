"""glibc / libstdc++ before install: the verdef reader on this machine's real libraries, the probe,
and `dswheels install` / `doctor --index` refusing a wheel that needs more than this machine has.

The reader is compared with ``readelf -V`` and with the version strings in the file
(``strings | grep GLIBCXX_``) on the real ``libstdc++.so.6`` and ``libc.so.6``. The refusal
runs end to end: the session's real CPU wheel (:func:`cpu_build`) is published with its real
build manifest, once as built and once with the manifest's ``runtime`` raised above what this
machine has (the wheel's bytes untouched), indexed by the real `dswheels index --from` and
served from 127.0.0.1; `dswheels install` must install nothing and exit 9.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dswheels.doctor.effects.collect_facts import collect
from dswheels.kernel.binaries.linux_runtime import defined_maximum, version_defs
from dswheels.kernel.compat import load_compat
from dswheels.kernel.manifest import manifest_name, parse_manifest
from dswheels.kernel.versions import format_version, parse_version
from tests.conftest import require
from tests.integration.conftest import Built, record_time
from tests.support.servers import StaticServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
FIND_LINKS = Path("/opt/wheels")
_DEF = re.compile(r"Rev: \d+\s+Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.pop("DSWHEELS_INDEX", None)
    return env


def _readelf_defs(path: Path) -> list[str]:
    require(shutil.which("readelf") is not None, "binutils' readelf")
    done = subprocess.run(["readelf", "-V", "--wide", str(path)], capture_output=True, text=True, check=True)
    return [name for flags, name in _DEF.findall(done.stdout) if flags != "BASE"]


def _strings_max(path: Path, prefix: str) -> tuple[int, ...]:
    """The highest ``<prefix>_<version>`` among the file's printable strings (``strings | grep``)."""
    require(shutil.which("strings") is not None, "binutils' strings")
    done = subprocess.run(["strings", "-a", str(path)], capture_output=True, text=True, check=True)
    found = [parse_version(m) for m in re.findall(rf"^{prefix}_(\d+(?:\.\d+)+)$", done.stdout, re.MULTILINE)]
    assert found, f"no {prefix}_ string in {path}"
    return max(found)


def _linux() -> None:
    require(sys.platform.startswith("linux"), "Linux: glibc and libstdc++")
    require(LIBSTDCXX.is_file() and LIBC.is_file(), f"this machine's {LIBSTDCXX} and {LIBC}")


def test_verdef_reader_matches_readelf_on_the_real_libstdcxx() -> None:
    _linux()
    names = version_defs(LIBSTDCXX.resolve().read_bytes())
    assert names is not None
    assert list(names) == _readelf_defs(LIBSTDCXX)
    defined = defined_maximum(names)
    assert defined.glibcxx == _strings_max(LIBSTDCXX, "GLIBCXX")
    assert defined.cxxabi == _strings_max(LIBSTDCXX, "CXXABI")
    # Debian 12 (this machine): GCC 12's libstdc++
    assert (defined.glibcxx, defined.cxxabi) >= ((3, 4, 30), (1, 3, 13))


def test_verdef_reader_matches_readelf_on_the_real_libc() -> None:
    _linux()
    names = version_defs(LIBC.resolve().read_bytes())
    assert names is not None
    assert list(names) == _readelf_defs(LIBC)
    glibc = defined_maximum(names).glibc
    assert glibc == _strings_max(LIBC, "GLIBC")
    assert glibc == parse_version(os.confstr("CS_GNU_LIBC_VERSION").split()[-1])  # type: ignore[union-attr]


def test_the_probe_reads_what_this_python_loads() -> None:
    _linux()
    facts = collect(sys.executable, _env(), full=False)
    lr = facts.linux_runtime
    assert lr is not None
    assert lr.error == ""
    assert lr.glibc == os.confstr("CS_GNU_LIBC_VERSION")
    loaded = Path(lr.libstdcxx)
    assert loaded.is_absolute()
    assert loaded.name.startswith("libstdc++.so.6")
    defined = defined_maximum(_readelf_defs(loaded))
    assert lr.glibcxx == format_version(defined.glibcxx or ())
    assert lr.cxxabi == format_version(defined.cxxabi or ())


# --- install and doctor against a served index with the real wheel and its manifest ---------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("floor-sites")
    with StaticServer(root) as server:
        yield root, server.base_url


def _dswheels(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dswheels", *args], capture_output=True, text=True, env=_env(), timeout=900, check=False
    )


def _site(served: tuple[Path, str], name: str, built: Built, *, runtime: dict[str, str] | None, manifest: bool) -> str:
    """Publish the real wheel (with its manifest, ``runtime`` replaced when given) and index it."""
    root, base = served
    published = root / f"{name}-published"
    published.mkdir()
    shutil.copy2(built.wheel, published / built.wheel.name)
    if manifest:
        data = json.loads(built.manifest.read_text(encoding="utf-8"))
        if runtime is not None:
            data["runtime"] = runtime
        (published / manifest_name(built.wheel.name)).write_text(json.dumps(data, indent=2), encoding="utf-8")
    done = _dswheels("index", "--from", str(published), "--out", str(root / name))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / name / "files" / manifest_name(built.wheel.name)).is_file() == manifest
    return f"{base}/{name}"


def _installed(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def test_install_refuses_a_wheel_that_needs_a_newer_libstdcxx(
    cpu_build: Built, served: tuple[Path, str], torch_python: Path
) -> None:
    _linux()
    start = time.monotonic()
    real = parse_manifest(cpu_build.manifest.read_text(encoding="utf-8")).runtime
    assert real is not None  # the real wheel records what it needs
    assert real.glibcxx is not None
    greedy = {"glibc": "2.17", "glibcxx": "3.4.99", "cxxabi": "1.3.99"}  # more than any libstdc++ defines
    index = _site(served, "greedy", cpu_build, runtime=greedy, manifest=True)
    for extra in ((), ("--dry-run",)):
        done = _dswheels("install", "--index", index, "--python", str(torch_python), *extra)
        assert done.returncode == 9, done.stdout + done.stderr
        err = done.stderr
        assert f"{cpu_build.wheel.name} needs a newer glibc/libstdc++ than this environment loads" in err
        assert "nothing was installed" in err
        assert "its extensions need glibc 2.17, GLIBCXX 3.4.99, CXXABI 1.3.99 (its build manifest, " in err
        assert "this system has glibc 2.36; /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30 defines up to" in err
        assert "missing: GLIBCXX_3.4.99 > 3.4.30, CXXABI_1.3.99 > 1.3.13" in err
        assert "version `GLIBCXX_3.4.99' not found" in err
        assert "hint: build locally with `dswheels build`" in err
        assert "conda env whose libstdc++ is newer" in err
        assert "# download" not in done.stdout  # --dry-run prints no install command
        assert _installed(torch_python) == ""
    # doctor judges the published wheel's own need, not the promise (which this machine meets)
    done = _dswheels("doctor", "--json", "--python", str(torch_python), "--index", index)
    assert done.returncode == 9, done.stderr
    report = json.loads(done.stdout)
    (check,) = [c for c in report["checks"] if c["id"] == "linux_runtime"]
    assert check["status"] == "fail"
    assert f"the published wheel {cpu_build.wheel.name} (its build manifest) needs" in check["detail"]
    assert "GLIBCXX_3.4.99 > 3.4.30" in check["detail"]
    assert report["facts"]["linux_runtime"]["glibcxx"] == "3.4.30"
    record_time("runtime floor: install/doctor refusal (excluding the build)", time.monotonic() - start)


def test_install_goes_on_with_the_real_manifest_or_none(
    cpu_build: Built, served: tuple[Path, str], torch_python: Path
) -> None:
    _linux()
    real = parse_manifest(cpu_build.manifest.read_text(encoding="utf-8")).runtime
    assert real is not None
    index = _site(served, "honest", cpu_build, runtime=None, manifest=True)
    done = _dswheels("install", "--index", index, "--python", str(torch_python), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"glibc/libstdc++: the wheel needs {real.describe(load_compat().libstdcxx)}" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].endswith(cpu_build.wheel.name)
    done = _dswheels("doctor", "--json", "--python", str(torch_python), "--index", index)
    (check,) = [c for c in json.loads(done.stdout)["checks"] if c["id"] == "linux_runtime"]
    assert check["status"] == "ok", check
    assert f"the published wheel {cpu_build.wheel.name} (its build manifest) needs" in check["detail"]
    # no manifest beside the wheel: a notice, and the install goes on
    index = _site(served, "bare", cpu_build, runtime=None, manifest=False)
    done = _dswheels("install", "--index", index, "--python", str(torch_python), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"notice: no glibc/libstdc++ check for {cpu_build.wheel.name}: the index has no build manifest" in (
        done.stdout
    )
