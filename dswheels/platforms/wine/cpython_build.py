"""A Windows CPython made by dswheels from CPython's own sources, with the MSVC root, under Wine.

``dswheels verify`` proves a win_amd64 wheel in a fresh venv of a Windows Python, as on Windows
(:mod:`~dswheels.platforms.wine.windows_venv`). On a Linux machine that Python is made here, once
per minor and source digest, under the cache (:meth:`~dswheels.host.cache.CacheLayout.wine_cpython`):

1. CPython's source release, pinned in compat.yml ``cpython_sources`` (checked by sha256), and zlib
   and libffi (:mod:`~.cpython_externals`);
2. what each target is made of is read from the release's own ``PCbuild/*.vcxproj``
   (:mod:`~.vcxproj`): ``_freeze_module.exe`` first, which freezes the startup modules into
   ``Python/frozen_modules/*.h`` (and, where the release has it, ``deepfreeze.py`` run by this
   Python), then ``pythonXY.dll``, ``python3.dll``, ``python.exe``, the venv launcher and the
   extension modules a venv, pip, torch and DeepSpeed import (:data:`EXTENSIONS`);
3. laid out as python.org's installer does (``python.exe``, the DLLs, ``DLLs/*.pyd``, ``Lib/``,
   the launcher in ``Lib/venv/scripts/nt/``), with what Wine 8 lacks beside it (:mod:`~.wine_gaps`).

Left out, on purpose: ``_ssl``/``_hashlib`` (OpenSSL), ``_bz2``, ``_lzma``, ``_sqlite3``, ``_decimal``,
Tk. pip reads local folders and loopback HTTP here; what it installs comes through the host
(:mod:`~.windows_venv`). The compile runs ``jobs`` batches at a time; an interrupted build keeps
its objects and goes on from them next time.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dswheels.host import proc
from dswheels.host.cache import CacheLayout
from dswheels.host.clock import monotonic
from dswheels.host.downloads import Downloader
from dswheels.host.files import exclusive, staging_dir, write_text_atomic
from dswheels.host.log import format_duration, get_reporter
from dswheels.host.unpack import extract_archive
from dswheels.kernel.compat import Compat
from dswheels.kernel.compat.entries import CpythonSource
from dswheels.kernel.errors import EnvironmentMismatchError, SourceError
from dswheels.kernel.numbers import ascii_int
from dswheels.kernel.versions import VersionTuple, format_version
from dswheels.platforms.wine import cpython_externals as ext
from dswheels.platforms.wine import wine_gaps
from dswheels.platforms.wine.host import windows_path
from dswheels.platforms.wine.msvc_driver import Unit, WineMsvc, compile_units, link
from dswheels.platforms.wine.vcxproj import Project, cl_flags, link_flags, read_project, split_list
from dswheels.platforms.wine.wine_gaps import run_windows

__all__ = ["EXTENSIONS", "RECIPE", "WindowsCPython", "cpython_root", "windows_cpython"]

RECIPE = 1  # what is built and how: a change here makes a new Python, not a patched old one
# the extension modules a venv (ensurepip), pip, torch, numpy and DeepSpeed import on Windows
EXTENSIONS = (
    "_ctypes",  # torch loads its DLLs through ctypes; numpy and psutil use it
    "_socket",  # pip (urllib3, http.client), asyncio, multiprocessing
    "select",
    "unicodedata",  # pip's idna, DeepSpeed's tokenizer-free paths
    "pyexpat",  # xml.parsers.expat: plistlib, xmlrpc, setuptools
    "_elementtree",
    "_multiprocessing",  # torch.multiprocessing, DeepSpeed's launcher
    "_queue",  # queue.SimpleQueue: concurrent.futures
    "_asyncio",
    "_overlapped",  # asyncio's Windows event loop
)
_MARKER = ".dswheels-cpython.json"
_CORE_LIBS = ("kernel32.lib", "user32.lib")  # MSBuild's CoreLibraryDependencies a Python build needs


@dataclass(frozen=True, slots=True)
class WindowsCPython:
    version: str  # the source release: 3.11.2
    root: Path  # the installed layout: python.exe, DLLs/, Lib/
    extensions: tuple[str, ...]
    made_seconds: float  # how long making it took (when it was made)

    @property
    def python(self) -> Path:
        return self.root / "python.exe"

    @property
    def tag(self) -> str:
        major, minor = self.version.split(".")[:2]
        return f"{major}{minor}"


def cpython_root(cache: CacheLayout, pinned: CpythonSource) -> Path:
    return cache.wine_cpython(f"{pinned.version}-{pinned.sha256[:12]}-r{RECIPE}")


def _pinned(minor: VersionTuple, compat: Compat) -> CpythonSource:
    pinned = compat.cpython_sources.get(minor)
    if pinned is None:
        known = ", ".join(format_version(v) for v in sorted(compat.cpython_sources)) or "none"
        raise EnvironmentMismatchError(
            f"no CPython {format_version(minor)} source release is pinned for the Wine host (pinned: {known})",
            hint="add one to compat.yml `cpython_sources` (its sha256 from python.org), or verify on Windows",
        )
    return pinned


def windows_cpython(
    minor: VersionTuple,
    *,
    compat: Compat,
    tools: WineMsvc,
    cache: CacheLayout,
    env: Mapping[str, str],
    jobs: int,
) -> WindowsCPython:
    """The Windows CPython of ``minor``: the cached one, or made now (with progress; about 15 minutes on 2 cores)."""
    pinned = _pinned(minor, compat)
    target = cpython_root(cache, pinned)
    # one lock per Python: two verifies of one minor take turns, another minor's build does not hold them up
    with exclusive(target, what=f"making a Windows CPython {pinned.version}", error=EnvironmentMismatchError):
        marker = target / "python" / _MARKER
        if marker.is_file():
            recorded = json.loads(marker.read_text(encoding="utf-8"))
            return WindowsCPython(
                version=pinned.version,
                root=target / "python",
                extensions=tuple(recorded["extensions"]),
                made_seconds=float(recorded["seconds"]),
            )
        with get_reporter().group(f"Windows CPython {pinned.version} under Wine (once per cache)"):
            return _make(pinned, target, tools=tools, cache=cache, env=env, jobs=jobs)


def _make(
    pinned: CpythonSource, target: Path, *, tools: WineMsvc, cache: CacheLayout, env: Mapping[str, str], jobs: int
) -> WindowsCPython:
    start = monotonic()
    log = target / "build.log"
    target.mkdir(parents=True, exist_ok=True)
    reporter = get_reporter()
    reporter.info(f"making a Windows CPython {pinned.version} in {target} (log: {log})")
    downloader = Downloader(cache.downloads)
    src = _unpacked(target / "src", pinned.urls, pinned.sha256, downloader, what="CPython's sources")
    zlib = _unpacked(target / "zlib", ext.ZLIB.urls, ext.ZLIB.sha256, downloader, what="zlib's sources")
    libffi = _unpacked(target / "libffi", ext.LIBFFI.urls, ext.LIBFFI.sha256, downloader, what="libffi's sources")
    builder = _Builder(src=src, out=target / "out", obj=target / "obj", tools=tools, env=env, jobs=jobs, log=log)
    builder.generated_pyconfig()
    ffi_lib = builder.libffi(libffi)
    freeze = builder.project("_freeze_module")
    builder.build(Target(freeze))
    builder.freeze(freeze)
    core = builder.project("pythoncore", zlib=zlib)
    builder.build(Target(core, implib=True))
    builder.build(*(Target(builder.project(name)) for name in ("python3dll", "python", "venvlauncher")))
    # libffi.props (not read): our libffi is static, its headers ours
    ffi = (f"/I{ffi_lib.parent / 'include'}", "/DFFI_BUILDING")
    builder.build(
        *(
            Target(builder.project(name), extra_flags=ffi, extra_libs=(ffi_lib,))
            if name == "_ctypes"
            else Target(builder.project(name))
            for name in EXTENSIONS
        )
    )
    seconds = monotonic() - start
    with staging_dir(target, "python") as staged:
        _lay_out(staged, src=src, out=builder.out, tag=core.properties["PyDllName"].removeprefix("python"))
        wine_gaps.add_runtime_files(staged, tools=tools, log=log, obj=target / "obj" / "wine-gaps")
        if wine_gaps.hide_copyfile2(tools.host, staged, env, log=log):
            reporter.info("this Wine's CopyFile2 aborts: shutil is told not to call it (Lib/sitecustomize.py)")
        write_text_atomic(
            staged / _MARKER,
            json.dumps(
                {"version": pinned.version, "sha256": pinned.sha256, "extensions": list(EXTENSIONS), "seconds": seconds}
            )
            + "\n",
        )
        shutil.rmtree(target / "python", ignore_errors=True)
        staged.replace(target / "python")
    reporter.info(f"Windows CPython {pinned.version} made in {format_duration(seconds)}: {target / 'python'}")
    return WindowsCPython(version=pinned.version, root=target / "python", extensions=EXTENSIONS, made_seconds=seconds)


def _unpacked(dest: Path, urls: Sequence[str], sha256: str, downloader: Downloader, *, what: str) -> Path:
    """``dest`` holding the archive's tree (its top folder dropped); unpacked once, kept for a second attempt."""
    done = dest / ".dswheels-unpacked"
    if done.is_file() and done.read_text(encoding="utf-8").strip() == sha256:
        return dest
    failures: list[str] = []
    for url in urls:
        try:
            archive = downloader.fetch(url, sha256=sha256)[0]
        except SourceError as exc:  # the next mirror; all failures are reported together
            failures.append(f"{url}: {exc.message}")
            continue
        extract_archive(archive, dest, what=what)
        done.write_text(sha256 + "\n", encoding="utf-8")
        return dest
    raise EnvironmentMismatchError(f"{what} could not be downloaded from any pinned URL", details="\n".join(failures))


@dataclass(frozen=True, slots=True)
class Target:
    """A project to compile and link, and what the Wine host adds to it (our static libffi for ``_ctypes``)."""

    project: Project
    implib: bool = False  # write its import library beside it (pythonXY.lib)
    extra_flags: tuple[str, ...] = ()
    extra_libs: tuple[Path, ...] = ()


@dataclass
class _Builder:
    src: Path
    out: Path  # what links: python311.dll, python.exe, *.pyd (PCbuild's amd64/)
    obj: Path
    tools: WineMsvc
    env: Mapping[str, str]
    jobs: int
    log: Path

    @property
    def pcbuild(self) -> Path:
        return self.src / "PCbuild"

    def _path(self, written: str) -> Path:
        """A path as a project writes it (relative to PCbuild/, Windows separators) on this machine."""
        path = Path(written.replace("\\", "/"))
        return path if path.is_absolute() else (self.pcbuild / path).resolve()

    def project(self, name: str, *, zlib: Path | None = None) -> Project:
        """``PCbuild/<name>.vcxproj`` evaluated for Release|x64 (with ``zlib``'s sources where it takes them)."""
        version = _version(self.src)
        int_dir = self.obj / name
        int_dir.mkdir(parents=True, exist_ok=True)
        globals_ = {
            "Configuration": "Release",
            "Platform": "x64",
            "ArchName": "amd64",
            "ProjectName": name,
            "MSBuildProjectName": name,
            "PySourcePath": f"{self.src}/",
            "IntDir": f"{int_dir}/",
            "OutDir": f"{self.out}/",
            "BuildPath": f"{self.out}/",
            "MajorVersionNumber": str(version[0]),
            "MinorVersionNumber": str(version[1]),
            "PyDllName": f"python{version[0]}{version[1]}",
            "Py3DllName": "python3",
            "PyDebugExt": "",
            "PyTestExt": "",
            "PyArchExt": "",
            "SysWinVer": f"{version[0]}.{version[1]}",
            "PyVPath": "..\\\\..",
            "PyStdlibPydExt": ".pyd",  # python.props (not read): the extension modules' suffix (3.13+)
            # 3.13+: pyconfig.h is written from PC/pyconfig.h.in into pythoncore's IntDir (see generated_pyconfig)
            "GeneratedPyConfigDir": f"{self.obj / 'pythoncore'}/",
            "zlibDir": f"{zlib}/" if zlib else "",
            "IncludeExternals": "true" if zlib else "false",
        }
        return read_project(
            name,
            (self.pcbuild / f"{name}.vcxproj").read_text(encoding="utf-8-sig"),
            globals_=globals_,
            read_import=lambda sheet: _read(self.pcbuild / sheet),
            exists=lambda written: self._path(written).exists(),
        )

    def generated_pyconfig(self) -> None:
        """3.13+ keeps ``PC/pyconfig.h.in``, which ``pythoncore.vcxproj``'s ``_UpdatePyconfig`` copies into its
        IntDir (turning ``Py_GIL_DISABLED`` on only for the free-threaded build, which this is not)."""
        template = self.src / "PC" / "pyconfig.h.in"
        if template.is_file():
            (self.obj / "pythoncore").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template, self.obj / "pythoncore" / "pyconfig.h")

    def _units(self, project: Project, extra: Sequence[str]) -> list[Unit]:
        units = []
        for item in project.compiles:
            if item.metadata.get("ExcludedFromBuild", "").lower() == "true":
                continue
            includes = [f"/I{self._path(d)}" for d in split_list(item.metadata.get("AdditionalIncludeDirectories", ""))]
            units.append(Unit(source=self._path(item.include), flags=(*cl_flags(item.metadata), *includes, *extra)))
        return units

    def build(self, *targets: Target) -> None:
        """Compile every unit of ``targets`` in one pool, then link each into :attr:`out` (its ``TargetName``)."""
        units = [self._units(t.project, t.extra_flags) for t in targets]
        names = [t.project.name for t in targets]
        label = ", ".join(names) if len(names) <= 3 else f"{len(names)} targets ({', '.join(names[:3])}, ...)"
        objects = compile_units(
            self.tools,
            [u for per in units for u in per],
            obj_root=self.obj / (targets[0].project.name if len(targets) == 1 else "extensions"),
            label=label,
            jobs=self.jobs,
            log=self.log,
        )
        start_of = 0
        for target, per in zip(targets, units, strict=True):
            self._link(target, objects[start_of : start_of + len(per)])
            start_of += len(per)

    def _link(self, target: Target, objects: Sequence[Path]) -> Path:
        project = target.project
        metadata = project.definitions.get("Link", {})
        name = project.properties.get("TargetName") or project.name
        out = self.out / f"{name}{project.target_ext}"
        flags = link_flags(metadata)
        if project.configuration_type == "DynamicLibrary":
            flags.append("/DLL")
        if definition := metadata.get("ModuleDefinitionFile"):
            flags.append(f"/DEF:{self._path(definition)}")
        libs = [*split_list(metadata.get("AdditionalDependencies", "")), *_CORE_LIBS]
        # MSBuild links a referenced project's import library (LinkLibraryDependencies); here that is the core's
        if any(r.include.lower().endswith("pythoncore.vcxproj") for r in project.of_kind("ProjectReference")):
            libs.append(f"{project.properties['PyDllName']}.lib")
        libs += [f'"{windows_path(lib)}"' for lib in target.extra_libs]
        dirs = [self.out, *(self._path(d) for d in split_list(metadata.get("AdditionalLibraryDirectories", "")))]
        start = monotonic()
        link(
            self.tools,
            objects,
            out=out,
            flags=flags,
            libs=list(dict.fromkeys(libs)),
            lib_dirs=dirs,
            log=self.log,
            implib=out.with_suffix(".lib") if target.implib else None,
        )
        get_reporter().info(
            f"{project.name}: {out.name} ({len(objects)} units, linked in {format_duration(monotonic() - start)})"
        )
        return out

    def freeze(self, freeze: Project) -> None:
        """The startup modules frozen by ``_freeze_module.exe`` into the source tree, then deep-frozen."""
        exe = self.out / f"{freeze.properties.get('TargetName') or freeze.name}.exe"
        frozen = [i for i in freeze.items if i.metadata.get("ModName") and i.metadata.get("OutFile")]
        start = monotonic()
        for item in frozen:
            out = self._path(item.metadata["OutFile"])
            out.parent.mkdir(parents=True, exist_ok=True)
            run_windows(
                self.tools.host,
                exe,
                [item.metadata["ModName"], windows_path(self._path(item.include)), windows_path(out)],
                env=self.env,
                log=self.log,
                what=f"_freeze_module {item.metadata['ModName']}",
            )
            if not out.is_file():
                raise EnvironmentMismatchError(f"_freeze_module wrote no {out.name}", hint=f"full log: {self.log}")
        get_reporter().info(f"froze {len(frozen)} modules ({format_duration(monotonic() - start)})")
        deep = next((c for name, cs in freeze.targets.items() if "DeepFr" in name for c in cs), None)
        if deep is not None:
            argv = _deepfreeze_argv(deep)
            proc.run(
                argv,
                cwd=self.pcbuild,
                log_file=self.log,
                echo=False,
                stream=False,
                error=EnvironmentMismatchError,
                what="deepfreeze.py",
                timeout=1800,
            )

    def libffi(self, root: Path) -> Path:
        """libffi as a static library (``ffi.lib``) with its headers in ``include/`` beside it."""
        build = self.obj / "libffi"
        include = build / "include"
        include.mkdir(parents=True, exist_ok=True)
        version = ext.LIBFFI.version
        (include / "ffi.h").write_text(
            ext.ffi_header((root / "include" / "ffi.h.in").read_text(encoding="utf-8"), version), encoding="utf-8"
        )
        (include / "fficonfig.h").write_text(
            ext.fficonfig_header((root / "fficonfig.h.in").read_text(encoding="utf-8"), version), encoding="utf-8"
        )
        shutil.copyfile(root / "src" / "x86" / "ffitarget.h", include / "ffitarget.h")
        flags = (
            "/O2",
            "/MD",
            "/W3",
            "/DFFI_BUILDING",
            "/DNDEBUG",
            f"/I{include}",
            f"/I{root / 'include'}",
            f"/I{root / 'src' / 'x86'}",
        )
        units = [Unit(source=root / s, flags=flags) for s in ext.LIBFFI_SOURCES]
        objects = compile_units(self.tools, units, obj_root=build / "obj", label="libffi", jobs=self.jobs, log=self.log)
        asm = build / "win64_intel.asm"
        asm_obj = build / "win64_intel.obj"
        if not asm_obj.is_file():
            proc.run(
                [
                    self.tools.tool("cl.exe"),
                    "/nologo",
                    "/EP",
                    "/P",
                    f"/Fi{asm}",
                    *flags[3:],
                    "/Tc",
                    str(root / ext.LIBFFI_ASM),
                ],
                log_file=self.log,
                echo=False,
                stream=False,
                error=EnvironmentMismatchError,
                what="cl /EP win64_intel.S",
                timeout=600,
            )
            proc.run(
                [self.tools.tool("ml64.exe"), "/nologo", "/c", f"/Fo{asm_obj}", str(asm)],
                log_file=self.log,
                echo=False,
                stream=False,
                error=EnvironmentMismatchError,
                what="ml64 win64_intel",
                timeout=600,
            )
        lib = build / "ffi.lib"
        proc.run(
            [self.tools.tool("lib.exe"), "/nologo", f"/OUT:{lib}", *(str(o) for o in objects), str(asm_obj)],
            log_file=self.log,
            echo=False,
            stream=False,
            error=EnvironmentMismatchError,
            what="lib ffi.lib",
            timeout=600,
        )
        return lib


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8-sig") if path.is_file() else None


def _version(src: Path) -> tuple[int, int, int]:
    """MAJOR.MINOR.MICRO from ``Include/patchlevel.h`` (the tree's own word)."""
    text = (src / "Include" / "patchlevel.h").read_text(encoding="utf-8")
    parts = [re.search(rf"#define[ \t]+PY_{n}_VERSION[ \t]+([0-9]+)", text) for n in ("MAJOR", "MINOR", "MICRO")]
    if any(p is None for p in parts):
        raise EnvironmentMismatchError(f"{src} has no readable Include/patchlevel.h: not CPython's sources")
    major, minor, micro = (ascii_int(p.group(1), what="a version part") for p in parts if p is not None)
    return major, minor, micro


def _deepfreeze_argv(command: str) -> list[str]:
    """The project's deepfreeze command (``$(PythonForBuild) "...deepfreeze.py" ^ "x.h:mod" ... "-o" "...c"``)
    with this Python in front and this machine's paths."""
    # cmd's ^ line continuations (XML turned their line breaks into spaces)
    joined = re.sub(r"\s\^(?=\s)", " ", command)
    words = shlex.split(joined.replace("\\", "/"))
    if not words or "PythonForBuild" not in words[0]:
        raise EnvironmentMismatchError(f"cannot read the deepfreeze command {command[:200]!r}")
    return [sys.executable, *words[1:]]


def _lay_out(root: Path, *, src: Path, out: Path, tag: str) -> None:
    """python.org's layout: the interpreter and its DLLs, ``DLLs/*.pyd``, ``Lib/`` (no tests), the venv launcher."""
    for name in ("python.exe", f"python{tag}.dll", "python3.dll"):
        shutil.copy2(out / name, root / name)
    (root / "DLLs").mkdir()
    missing = [name for name in EXTENSIONS if not (out / f"{name}.pyd").is_file()]
    if missing:
        raise EnvironmentMismatchError(f"the build made no {', '.join(f'{m}.pyd' for m in missing)} in {out}")
    for name in EXTENSIONS:
        shutil.copy2(out / f"{name}.pyd", root / "DLLs" / f"{name}.pyd")
    (root / "libs").mkdir()
    shutil.copy2(out / f"python{tag}.lib", root / "libs" / f"python{tag}.lib")
    shutil.copytree(
        src / "Lib",
        root / "Lib",
        ignore=shutil.ignore_patterns(
            "test", "tests", "idle_test", "__pycache__", "*.pyc", "idlelib", "tkinter", "turtledemo"
        ),
    )
    (root / "Lib" / "site-packages").mkdir(exist_ok=True)
    # venv copies its python.exe from here, under the name the release's venv module looks for
    shutil.copy2(out / "venvlauncher.exe", root / "Lib" / "venv" / "scripts" / "nt" / _venv_launcher_name(src))


def _venv_launcher_name(src: Path) -> str:
    """``venvlauncher.exe`` (3.13+: ``os.path.join(scripts, f'venvlauncher{exe_d}.exe')``) or, before, ``python.exe``
    (3.11: the launcher installed as ``scripts/nt/python.exe``)."""
    text = (src / "Lib" / "venv" / "__init__.py").read_text(encoding="utf-8")
    return "venvlauncher.exe" if "f'venvlauncher{exe_d}.exe'" in text else "python.exe"
