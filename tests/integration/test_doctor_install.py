"""`dswheels doctor` on this machine for real, and `dswheels install` end to end over loopback.

doctor runs as a subprocess against real virtual environments: one with torch 2.13.0+cpu and
one with PyPI's torch 2.14.1 (CUDA 13.0, several GB; uv's cache makes a second run fast), on
this machine's real CUDA 13.0 toolkit. install picks from a PEP 503 index the test writes and
serves from 127.0.0.1, installs with pip and verifies. Its wheels are small but real
(valid zip, dist-info, RECORD), named by core.naming.wheel_filename, and carry a miniature
``deepspeed`` package laid out like a real one (tests/support/deepspeed_standin.py:
git_version_info, an OpBuilder whose load() imports the "prebuilt" module or calls jit_load,
all_ops, accelerator), so the verify step runs its real code.

Longer than most modules because its cases share the real torch environments and one served index.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

import pytest

from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.naming import cell_id, parse_wheel, partition, wheel_filename, wheel_version
from dswheels.kernel.versions import TorchMinor, format_version, parse_nvcc_version
from tests.conftest import require
from tests.support.deepspeed_standin import deepspeed_package
from tests.support.servers import StaticServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

NEWEST_DS = load_compat().deepspeed_releases[-1]
PY = Python(version=sys.version_info[:2])
CUDA_ROOT = Path("/usr/local/cuda-13.0")
FIND_LINKS = Path("/opt/wheels")


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    require(importlib.util.find_spec("uv") is not None, "uv is needed to create the test environments")
    return [sys.executable, "-m", "uv"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.pop("DSWHEELS_INDEX", None)
    return env


def _run(argv: Sequence[str], *, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=timeout, check=False)


def _make_venv(path: Path, torch: str) -> Path:
    """A venv with pip and ``torch``; torch 2.13.0 is the CPU wheel of /opt/wheels on this machine."""
    uv = _uv()
    python = path / "bin" / "python"
    done = subprocess.run([*uv, "venv", "--seed", "--python", sys.executable, str(path)], check=False, env=_env())
    assert done.returncode == 0
    extra = ["--find-links", str(FIND_LINKS)] if FIND_LINKS.is_dir() else []
    done = subprocess.run(
        [*uv, "pip", "install", "--python", str(python), *extra, f"torch=={torch}"], check=False, env=_env()
    )
    require(done.returncode == 0, f"could not install torch=={torch} (network or /opt/wheels missing)")
    return python


@pytest.fixture(scope="module")
def cpu_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_venv(tmp_path_factory.mktemp("venv-cpu") / "v", "2.13.0")


@pytest.fixture(scope="module")
def cuda_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_venv(tmp_path_factory.mktemp("venv-cuda") / "v", "2.14.1")


def _doctor(*args: str) -> tuple[int, dict[str, object], str]:
    done = _run([sys.executable, "-m", "dswheels", "doctor", "--json", *args])
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _check(data: dict[str, object], check_id: str) -> dict[str, str]:
    checks = data["checks"]
    assert isinstance(checks, list)
    found = [c for c in checks if c["id"] == check_id]
    assert len(found) == 1, found
    return dict(found[0])


def _machine_prerequisites() -> None:
    require(sys.platform.startswith("linux"), "the recorded expectations are for this Linux machine")
    require((CUDA_ROOT / "bin" / "nvcc").is_file(), f"this machine's CUDA 13.0 toolkit at {CUDA_ROOT}")


def _toolkit_assertions(facts: dict[str, object]) -> None:
    toolkits = facts["toolkits"]
    assert isinstance(toolkits, list)
    roots = {t["root"]: t for t in toolkits}
    assert str(CUDA_ROOT) in roots, roots.keys()
    assert parse_nvcc_version(roots[str(CUDA_ROOT)]["nvcc_output"]) == (13, 0)
    assert "bin/nvcc" in roots[str(CUDA_ROOT)]["files"]


def test_doctor_real_cpu_torch(cpu_python: Path) -> None:
    _machine_prerequisites()
    code, data, _ = _doctor("--python", str(cpu_python))
    assert code == 0, data["checks"]
    facts = data["facts"]
    assert isinstance(facts, dict)
    assert facts["torch"]["version"] == "2.13.0+cpu"
    assert facts["torch"]["cuda"] is None
    assert facts["python"]["executable"] == str(cpu_python)
    _toolkit_assertions(facts)
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["cell"] == f"ds{format_version(NEWEST_DS)}-torch2.13-cpu-{PY.tag}-linux_x86_64"
    assert verdict["local_build"]["status"] == "ok"
    assert "cpu_adam" in verdict["local_build"]["ops"]
    assert _check(data, "torch")["status"] == "ok"
    if shutil.which("nvidia-smi") is None:
        assert _check(data, "gpu")["status"] == "warn"
    # this machine (Debian 12: glibc 2.36, GCC 12's libstdc++) meets the published wheels' promise
    assert facts["linux_runtime"]["how"] == "loaded by torch"
    assert _check(data, "linux_runtime")["status"] == "ok"


def test_doctor_real_cuda_torch(cuda_python: Path) -> None:
    _machine_prerequisites()
    code, data, _ = _doctor("--python", str(cuda_python))
    assert code == 0, data["checks"]
    facts = data["facts"]
    assert isinstance(facts, dict)
    assert facts["torch"]["version"] == "2.14.1+cu130"
    assert facts["torch"]["cuda"] == "13.0"
    _toolkit_assertions(facts)
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["cell"] == f"ds{format_version(NEWEST_DS)}-torch2.14-cu130-{PY.tag}-linux_x86_64"
    local = verdict["local_build"]
    assert local["nvcc"] == "13.0"
    assert local["cuda_check"] == "nvcc 13.0 = torch CUDA 13.0: DeepSpeed's check passes"
    assert local["environment"]["CUDA_HOME"] == str(CUDA_ROOT)
    assert local["environment"]["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    if shutil.which("nvidia-smi") is None:
        assert local["environment"]["DS_ACCELERATOR"] == "cuda"
        assert _check(data, "gpu")["status"] == "warn"
    if "CUDA_HOME" not in os.environ and Path("/usr/local/bin/nvcc").is_file():
        # torch's own guess from the /usr/local/bin/nvcc wrapper, reported by the real torch
        assert facts["torch"]["cuda_home"] == "/usr/local"
        assert _check(data, "cuda_home")["fix"] == f"export CUDA_HOME={CUDA_ROOT}"


def test_doctor_with_a_python_that_does_not_run(tmp_path: Path) -> None:
    code, data, _ = _doctor("--python", str(tmp_path / "no-such-python"))
    assert code == 9
    python = _check(data, "python")
    assert python["status"] == "fail"
    assert "no-such-python" in python["detail"]
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["cell"] is None


# --- a small real index over loopback -----------------------------------------------------------


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(out: Path, cell: Cell, *, kind: str = "prebuilt", platform_tag: str | None = None) -> Path:
    """A real, installable wheel for ``cell`` holding a miniature deepspeed package (``platform_tag``: a Linux
    wheel's manylinux tag)."""
    version = wheel_version(cell)
    torch_minor = format_version(cell.torch)
    accelerator = "cuda" if cell.variant.is_cuda else "cpu"
    files = deepspeed_package(
        version=version, accelerator=accelerator, torch_minor=torch_minor, cuda=cell.variant.cuda_text, kind=kind
    )
    dist_info = f"deepspeed-{version}.dist-info"
    tag = f"{cell.python.interpreter_tag}-{cell.python.tag}-{platform_tag or cell.platform.value}"
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: deepspeed\nVersion: {version}\nRequires-Dist: torch=={torch_minor}.*\n"
    )
    files[f"{dist_info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: dswheels-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    record = [_record_line(name, text.encode()) for name, text in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    path = out / wheel_filename(cell, platform_tag)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def write_index(root: Path, wheels: Sequence[Path], *, wrong_sha: bool = False) -> None:
    """docs/index-layout.md: simple/deepspeed/ lists every wheel, whl/<partition>/ one partition."""
    files_dir = root / "files"
    files_dir.mkdir(parents=True, exist_ok=True)
    links: dict[str, list[str]] = {}
    for wheel in wheels:
        shutil.copy2(wheel, files_dir / wheel.name)
        digest = "0" * 64 if wrong_sha else hashlib.sha256(wheel.read_bytes()).hexdigest()
        links.setdefault("all", []).append(
            f'<a href="../../files/{quote(wheel.name)}#sha256={digest}">{wheel.name}</a>'
        )
        cell = parse_wheel(wheel.name).cell
        links.setdefault(partition(cell), []).append(
            f'<a href="../../files/{quote(wheel.name)}#sha256={digest}">{wheel.name}</a>'
        )

    def page(title: str, items: Sequence[str]) -> str:
        body = "<br>\n".join(items)
        return (
            '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">'
            f"<title>{title}</title></head><body>\n{body}\n</body></html>\n"
        )

    (root / "simple" / "deepspeed").mkdir(parents=True, exist_ok=True)
    (root / "simple" / "index.html").write_text(page("Simple index", ['<a href="deepspeed/">deepspeed</a>']))
    (root / "simple" / "deepspeed" / "index.html").write_text(page("Links for deepspeed", links["all"]))
    for name, items in links.items():
        if name != "all":
            (root / "whl" / name).mkdir(parents=True, exist_ok=True)
            (root / "whl" / name / "index.html").write_text(page(f"deepspeed {name}", items))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A directory served at http://127.0.0.1:<port>/ for the whole module."""
    root = tmp_path_factory.mktemp("served")
    with StaticServer(root) as server:
        yield root, server.base_url


def _cell(torch: tuple[int, int], variant: str, *, deepspeed: tuple[int, ...] = NEWEST_DS) -> Cell:
    return Cell(
        deepspeed=deepspeed,
        torch=TorchMinor(torch),
        variant=Variant.parse(variant),
        python=PY,
        platform=Platform.LINUX_X86_64,
    )


@pytest.fixture(scope="module")
def install_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_venv(tmp_path_factory.mktemp("venv-install") / "v", "2.13.0")


@pytest.fixture
def clean_python(install_python: Path) -> Path:
    """The install venv without any deepspeed."""
    subprocess.run(
        [*_uv(), "pip", "uninstall", "-q", "--python", str(install_python), "deepspeed"],
        capture_output=True,
        check=False,
        env=_env(),
    )
    return install_python


def _index(
    served: tuple[Path, str],
    name: str,
    cells: Sequence[Cell],
    *,
    kind: str = "prebuilt",
    wrong_sha: bool = False,
    platform_tag: str | None = None,
) -> str:
    """Write an index for ``cells`` (built as ``kind``: prebuilt, jit, stray) under the served directory; its URL."""
    root, base = served
    wheels = [build_wheel(root / f"{name}-build", cell, kind=kind, platform_tag=platform_tag) for cell in cells]
    write_index(root / name, wheels, wrong_sha=wrong_sha)
    return f"{base}/{name}"


def _install(python: Path, index: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "dswheels", "install", "--index", index, "--python", str(python), *extra])


def _installed(python: Path) -> str:
    done = _run([str(python), "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"])
    return done.stdout.strip() if done.returncode == 0 else ""


def test_install_picks_the_exact_wheel_and_verifies(served: tuple[Path, str], clean_python: Path) -> None:
    require(sys.platform.startswith("linux"), "the test wheels are linux_x86_64")
    exact = _cell((2, 13), "cpu")
    index = _index(
        served,
        "exact",
        [
            exact,
            _cell((2, 13), "cpu", deepspeed=(0, 19, 7)),
            _cell((2, 14), "cu130"),
            _cell((2, 12), "cpu"),
        ],
    )
    done = _install(clean_python, index)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _installed(clean_python) == wheel_version(exact)
    assert f"this environment is {cell_id(exact)}: {wheel_filename(exact)}" in done.stdout
    assert "2 prebuilt ops load without JIT (cpu_adam, fused_adam)" in done.stdout
    # doctor now sees the installed wheel and the published one
    code, data, _ = _doctor("--python", str(clean_python), "--index", index)
    deepspeed = _check(data, "deepspeed")
    assert deepspeed["status"] == "ok", deepspeed
    assert deepspeed["title"].startswith(f"DeepSpeed {wheel_version(exact)} (cpu accelerator, 2 prebuilt ops)")
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["published"]["filename"] == wheel_filename(exact)
    assert _check(data, "index")["status"] == "ok"
    assert code == 0


def test_install_takes_a_manylinux_wheel_and_leaves_out_one_above_this_glibc(
    served: tuple[Path, str], clean_python: Path
) -> None:
    """A Linux wheel's name carries its floor: install takes one this system's glibc allows, and for one that asks
    for a newer glibc says so (pip and uv would refuse it too) instead of installing it."""
    require(sys.platform.startswith("linux"), "the test wheels are Linux wheels")
    exact = _cell((2, 13), "cpu")
    torch_floor = wheel_filename(exact, "manylinux_2_28_x86_64")
    done = _install(clean_python, _index(served, "floor", [exact], platform_tag="manylinux_2_28_x86_64"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"this environment is {cell_id(exact)}: {torch_floor}" in done.stdout
    assert _installed(clean_python) == wheel_version(exact)
    _run([*_uv(), "pip", "uninstall", "-q", "--python", str(clean_python), "deepspeed"])
    above = wheel_filename(exact, "manylinux_2_99_x86_64")
    done = _install(clean_python, _index(served, "above", [exact], platform_tag="manylinux_2_99_x86_64"))
    assert done.returncode == 9, done.stdout + done.stderr
    assert f"{above}, the wheel for this environment, needs glibc >= 2.99 (its tag)" in done.stderr
    assert "pip and uv refuse it (no matching distribution)" in done.stderr
    assert _installed(clean_python) == ""


def test_install_dry_run_prints_the_command(served: tuple[Path, str], clean_python: Path) -> None:
    exact = _cell((2, 13), "cpu")
    index = _index(served, "dry", [exact])
    done = _install(clean_python, index, "--dry-run")
    assert done.returncode == 0, done.stderr
    comment, command = done.stdout.strip().splitlines()[-2:]
    digest = hashlib.sha256((served[0] / "dry" / "files" / wheel_filename(exact)).read_bytes()).hexdigest()
    assert comment == f"# download {index}/files/{quote(wheel_filename(exact))} (sha256 {digest}), then:"
    assert shlex.split(command) == [
        str(clean_python),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        wheel_filename(exact),
    ]
    assert _installed(clean_python) == ""


def test_install_without_a_fitting_wheel_names_the_nearest(served: tuple[Path, str], clean_python: Path) -> None:
    index = _index(served, "nofit", [_cell((2, 12), "cpu"), _cell((2, 14), "cpu"), _cell((2, 14), "cu130")])
    done = _install(clean_python, index)
    assert done.returncode == 9, done.stdout + done.stderr
    assert f"no published wheel fits this environment ({cell_id(_cell((2, 13), 'cpu'))})" in done.stderr
    expected = f"torch 2.13 is installed; wheels exist for torch 2.12 and 2.14 with cpu (Python {PY}, linux_x86_64)"
    assert expected in done.stderr
    assert _installed(clean_python) == ""


def test_install_catches_a_wheel_that_jit_compiles(served: tuple[Path, str], clean_python: Path) -> None:
    """The verify step forbids DeepSpeed's jit_load: an op it would compile fails at once, nothing is built."""
    index = _index(served, "jit", [_cell((2, 13), "cpu")], kind="jit")
    done = _install(clean_python, index)
    assert done.returncode == 6, done.stdout + done.stderr
    assert "verify failed: the installed wheel does not load its prebuilt ops" in done.stderr
    assert "cpu_adam: load() raised WouldJitError: cpu_adam would be JIT-compiled" in done.stderr
    assert "TORCH_EXTENSIONS_DIR is not empty" not in done.stderr


def test_install_catches_an_op_compiled_behind_jit_loads_back(served: tuple[Path, str], clean_python: Path) -> None:
    """An op that compiles without jit_load is still caught: not the prebuilt module, and files where none may be."""
    index = _index(served, "stray", [_cell((2, 13), "cpu")], kind="stray")
    done = _install(clean_python, index)
    assert done.returncode == 6, done.stdout + done.stderr
    assert "verify failed: the installed wheel does not load its prebuilt ops" in done.stderr
    assert "cpu_adam: loaded cpu_adam instead of the prebuilt deepspeed.ops.adam.cpu_adam_op" in done.stderr
    assert "TORCH_EXTENSIONS_DIR is not empty after loading" in done.stderr


def test_install_refuses_a_wheel_whose_hash_differs(served: tuple[Path, str], clean_python: Path) -> None:
    index = _index(served, "badhash", [_cell((2, 13), "cpu")], wrong_sha=True)
    done = _install(clean_python, index)
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"source error: sha256 mismatch for {wheel_filename(_cell((2, 13), 'cpu'))}" in done.stderr
    assert f"the index says {'0' * 64}" in done.stderr
    assert _installed(clean_python) == ""


def test_install_needs_an_index(clean_python: Path) -> None:
    done = _run([sys.executable, "-m", "dswheels", "install", "--python", str(clean_python)])
    assert done.returncode == 2
    assert "no index given" in done.stderr


def test_index_from_a_directory(served: tuple[Path, str], clean_python: Path) -> None:
    """--index also takes the site as a local directory (file URLs in the page)."""
    root, _base = served
    exact = _cell((2, 13), "cpu")
    _index(served, "local", [exact])
    done = _install(clean_python, str(root / "local"), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert (root / "local" / "files").as_uri() in done.stdout


def test_install_with_uv_into_an_environment_without_pip(served: tuple[Path, str], tmp_path: Path) -> None:
    """auto picks uv where the target has no pip (uv venvs have none); a local index works the same."""
    require(shutil.which("uv") is not None, "uv on PATH (the test group installs it)")
    uv = _uv()
    assert (
        subprocess.run([*uv, "venv", "-q", "--python", sys.executable, str(tmp_path / "v")], check=False).returncode
        == 0
    )
    python = tmp_path / "v" / "bin" / "python"
    root, _base = served
    exact = _cell((2, 13), "cpu")
    _index(served, "uv", [exact])
    # no torch in this environment: the wheel's Requires-Dist torch==2.13.* comes from /opt/wheels
    extra = ["--find-links", str(FIND_LINKS)] if FIND_LINKS.is_dir() else []
    setup = subprocess.run([*uv, "pip", "install", "-q", "--python", str(python), *extra, "torch==2.13.0"], check=False)
    require(setup.returncode == 0, "torch 2.13.0 installable")
    done = _install(python, str(root / "uv"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ uv pip install --python" in done.stdout
    assert _installed(python) == wheel_version(exact)


def test_doctor_without_torch_prints_the_fix_that_makes_install_succeed(
    served: tuple[Path, str], tmp_path: Path
) -> None:
    """A new environment (pip, no torch) and a site whose only partition is cpu-torch2.13: the torch
    check's fix, run as printed in that environment, then `dswheels install --index SITE` succeeds."""
    require(sys.platform.startswith("linux"), "the test wheels are linux_x86_64")
    exact = _cell((2, 13), "cpu")
    index = _index(served, "onlycpu", [exact])
    venv = tmp_path / "v"
    assert (
        subprocess.run([*_uv(), "venv", "-q", "--seed", "--python", sys.executable, str(venv)], check=False).returncode
        == 0
    )
    python = venv / "bin" / "python"
    code, data, _ = _doctor("--python", str(python), "--index", index)
    assert code == 9
    torch = _check(data, "torch")
    assert torch["title"] == "torch is not installed"
    fix = shlex.split(torch["fix"])
    assert fix[:3] == ["pip", "install", f"torch=={load_compat().torch[exact.torch].latest}"], torch
    assert wheel_filename(exact) in torch["detail"]
    # run as printed, in the environment (activated: its bin/ first on PATH); download.pytorch.org, which the
    # line names, is out of reach here, so torch comes from this machine's pip configuration (/opt/wheels)
    env = {**_env(), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.update(PIP_RETRIES="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(fix, capture_output=True, text=True, env=env, timeout=900, check=False)
    # the torch above is the one the index has a wheel for (checked before this): the line can only fail here
    # for want of its index, download.pytorch.org, or of a pip configuration standing in for it (this
    # machine's: /opt/wheels and a local mirror of PyPI's files, in ~/.config/pip/pip.conf)
    require(
        done.returncode == 0,
        f"{torch['fix']}: neither download.pytorch.org nor a pip configuration with a mirror of it is reachable: "
        + done.stderr[-400:],
    )
    installed = _install(python, index)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert _installed(python) == wheel_version(exact)
