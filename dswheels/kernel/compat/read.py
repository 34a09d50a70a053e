"""Reading compat.yml into :class:`~dswheels.kernel.compat.Compat`: anything of the wrong shape is a bug in the data."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources

import yaml

from dswheels.kernel.binaries.a64 import FEATURES
from dswheels.kernel.binaries.linux_runtime import LibstdcxxRelease, RuntimeFloor
from dswheels.kernel.compat.entries import (
    AARCH64_KEY,
    OSES,
    ArchListRow,
    Compat,
    Condition,
    CpuBaseline,
    CpythonSource,
    CudaComponent,
    CudaToolkit,
    ImageEnds,
    MismatchRow,
    OpInfo,
    Rule,
    RunnerImage,
    TorchRelease,
    Workaround,
)
from dswheels.kernel.digests import is_sha256
from dswheels.kernel.model import Accelerator, Python, Variant
from dswheels.kernel.numbers import DIGITS, ascii_int
from dswheels.kernel.untyped import Untyped
from dswheels.kernel.versions import (
    Range,
    TorchMinor,
    TorchVersion,
    VersionTuple,
    parse_range,
    parse_torch_release,
    parse_version,
)

__all__ = ["CompatDataError", "load_compat", "parse_compat", "recorded_redist"]


class CompatDataError(ValueError):
    """compat.yml does not have the shape the planner needs (a bug in the shipped data)."""


# --- typed getters over untyped YAML -----------------------------------------------------------


class _Reader(Untyped):
    """A value of compat.yml: anything unexpected is a bug in the shipped data."""

    __slots__ = ()

    def fail(self, expected: str) -> CompatDataError:
        return CompatDataError(f"compat.yml: {self.path}: expected {expected}, got {self.data!r}")

    def __getitem__(self, key: str) -> _Reader:
        found = self.opt(key)
        if found is None:
            raise CompatDataError(f"compat.yml: {self.path}: missing key {key!r}")
        return found

    def text(self) -> str:
        """A string; an unquoted YAML number (``12.8``) reads as its text too."""
        if isinstance(self.data, bool) or not isinstance(self.data, (str, int, float)):
            raise self.fail("a string")
        return str(self.data)

    def inferred(self) -> bool:
        """``confidence: inferred``; such an entry must say why no source settles it (``unsettled``)."""
        conf = self.opt("confidence")
        if conf is None:
            return False
        if conf.text() != "inferred":
            raise conf.fail("'inferred' (the only confidence marker)")
        if self.opt("unsettled") is None:
            raise CompatDataError(
                f"compat.yml: {self.path}: an inferred entry says why no source settles it: add `unsettled: ...`"
            )
        return True

    def source(self) -> str:
        return self["source"].text()


def _condition(reader: _Reader | None) -> Condition:
    if reader is None:
        return Condition()
    fields = dict(reader.items())
    known = {"deepspeed", "torch", "cuda", "python", "os", "variant"}
    unknown = set(fields) - known
    if unknown:
        msg = f"compat.yml: {reader.path}: unknown condition keys {sorted(unknown)}"
        raise CompatDataError(msg)

    def rng(key: str) -> Range | None:
        return parse_range(fields[key].text()) if key in fields else None

    return Condition(
        deepspeed=rng("deepspeed"),
        torch=rng("torch"),
        cuda=rng("cuda"),
        python=rng("python"),
        os=fields["os"].text() if "os" in fields else None,
        variant=fields["variant"].text() if "variant" in fields else None,
    )


def _major(reader: _Reader, key: str) -> int:
    """A CUDA major as a key (``12:``): ASCII digits (``int()`` would read ``١٢`` as 12)."""
    try:
        return ascii_int(key, what="a CUDA major")
    except ValueError as exc:
        raise CompatDataError(f"compat.yml: {reader.path}: {exc}") from None


def _gcc_major(reader: _Reader) -> str:
    """A GCC major a runner image has (``"13"``): ASCII digits, as the planner compares them as numbers."""
    if not DIGITS.fullmatch(text := reader.text()):
        raise reader.fail("a GCC major version (ASCII digits)")
    return text


def _torch_release(reader: _Reader) -> TorchVersion:
    try:
        return parse_torch_release(reader.text())
    except ValueError as exc:
        raise CompatDataError(f"compat.yml: {reader.path}: {exc}") from None


_RELEASE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_SM = re.compile(r"[0-9]{2,3}[af]?")


def _release(reader: _Reader) -> str:
    """A CUDA toolkit release X.Y.Z in ASCII digits."""
    if not _RELEASE.fullmatch(text := reader.text()):
        raise reader.fail("a CUDA release X.Y.Z (ASCII digits)")
    return text


def _sm(reader: _Reader) -> str:
    """A GPU architecture as compat.yml lists it: ``80``, ``90a``, ``100f`` (ASCII digits)."""
    if not _SM.fullmatch(text := reader.text()):
        raise reader.fail("an architecture such as 80, 90a or 100f (ASCII digits)")
    return text


def _features(entry: _Reader) -> tuple[str, ...]:
    """An AArch64 baseline's ``forbidden_features``: names the A64 reader knows."""
    reader = entry.opt("forbidden_features")
    if reader is None:
        return ()
    names = reader.strs()
    if unknown := [n for n in names if n not in FEATURES]:
        raise reader.fail(f"features of dswheels/kernel/binaries/a64.py (unknown: {unknown})")
    return names


def _per_os(reader: _Reader) -> Mapping[str, tuple[str, ...]]:
    return {os: reader[os].strs() for os in OSES}


def _parse_ops(reader: _Reader) -> tuple[OpInfo, ...]:
    ops: list[OpInfo] = []
    for key, table in reader.items():
        try:
            accelerator = Accelerator(key)
        except ValueError:
            msg = f"compat.yml: {table.path}: unknown accelerator {key!r}"
            raise CompatDataError(msg) from None
        for name, entry in table.items():
            ship = frozenset(entry["ship"].strs()) if entry.opt("ship") else frozenset()
            platforms = frozenset(p.strs()) if (p := entry.opt("platforms")) else frozenset(OSES)
            if not ship <= platforms:
                msg = f"compat.yml: {entry.path}: ships on a platform it cannot be built on"
                raise CompatDataError(msg)
            left_out_reader = entry.opt("left_out")
            left_out = {os: text.text() for os, text in left_out_reader.items()} if left_out_reader else {}
            for os in OSES:
                if os not in ship and os not in left_out:
                    msg = f"compat.yml: {entry.path}: neither shipped nor left out (with a reason) on {os}"
                    raise CompatDataError(msg)
            min_arch = entry.opt("min_arch")
            ship_versions = entry.opt("ship_versions")
            not_portable = entry.opt("not_portable")
            if (ship_versions is None) != (not_portable is None):
                msg = f"compat.yml: {entry.path}: ship_versions and not_portable go together"
                raise CompatDataError(msg)
            ops.append(
                OpInfo(
                    name=name,
                    var=entry["var"].text(),
                    accelerator=accelerator,
                    versions=parse_range(entry["versions"].text()),
                    platforms=platforms,
                    ship=ship,
                    left_out=left_out,
                    min_arch=parse_version(min_arch.text()) if min_arch else None,
                    source=entry.source(),
                    ship_versions=parse_range(ship_versions.text()) if ship_versions else None,
                    not_portable=not_portable.text() if not_portable else "",
                ),
            )
    return tuple(ops)


def _torch_releases(root: _Reader) -> dict[VersionTuple, TorchRelease]:
    """compat.yml ``torch``, with each minor's ``torch_linux_aarch64`` entry as its ``linux_aarch64`` key, and
    what PyPI's own wheels of each platform are (``torch_pypi_linux_variant``: x86_64 Linux's)."""
    aarch64 = {TorchMinor(parse_version(k)): entry for k, entry in root["torch_linux_aarch64"].items()}
    pypi_linux = {parse_version(k): v.text() for k, v in root["torch_pypi_linux_variant"].items()}
    torch: dict[VersionTuple, TorchRelease] = {}
    for minor_text, entry in root["torch"].items():
        minor = TorchMinor(parse_version(minor_text))
        python = {os: tuple(Python.parse(p) for p in pys) for os, pys in _per_os(entry["python"]).items()}
        variants = {os: tuple(Variant.parse(v) for v in vs) for os, vs in _per_os(entry["variants"]).items()}
        inferred_on: set[str] = set()
        sources_on: dict[str, str] = {}
        pypi_on: dict[str, str] = {OSES[0]: pypi_linux[minor]} if minor in pypi_linux else {}
        if (arm := aarch64.pop(minor, None)) is not None:
            python[AARCH64_KEY] = tuple(Python.parse(p) for p in arm["python"].strs())
            variants[AARCH64_KEY] = tuple(Variant.parse(v) for v in arm["variants"].strs())
            if any(v.name == "cpu" for v in variants[AARCH64_KEY]):
                raise arm["variants"].fail("CUDA variants only ('cpu' is always there)")
            pypi_on[AARCH64_KEY] = Variant.parse(arm["pypi"].text()).name
            sources_on[AARCH64_KEY] = arm.source()
            if arm.inferred():
                inferred_on.add(AARCH64_KEY)
        torch[minor] = TorchRelease(
            minor=minor,
            latest=_torch_release(entry["latest"]),
            released=entry["released"].text(),
            python=python,
            variants=variants,
            cxx_std=entry["cxx_std"].integer(),
            inferred=entry.inferred(),
            source=entry.source(),
            inferred_on=frozenset(inferred_on),
            sources_on=sources_on,
            pypi_on=pypi_on,
        )
    if aarch64:
        msg = f"compat.yml: torch_linux_aarch64 has minors torch has not: {sorted(aarch64)}"
        raise CompatDataError(msg)
    return torch


def _arch_lists(row: _Reader) -> dict[str, tuple[str, ...]]:
    """A torch_arch_lists row's lists: x86_64 Linux and Windows together, or a platform of its own."""
    lists = {key: tuple(value.text().split(";")) for key, value in row.items() if key in (*OSES, AARCH64_KEY)}
    if not lists or (set(lists) & set(OSES) and set(lists) & set(OSES) != set(OSES)):
        raise row.fail(f"a list for {' and '.join(OSES)}, or for {AARCH64_KEY}")
    return lists


def _redist_pin(entry: _Reader) -> str:
    pin = entry.opt("redist_sha256")
    if pin is None:
        return ""
    if not is_sha256(pin.text()):
        raise pin.fail("the sha256 of NVIDIA's redistrib_<install>.json (64 lowercase hex digits)")
    return pin.text()


@cache
def recorded_redist(release: str) -> bytes | None:
    """dswheels' recorded copy of NVIDIA's ``redistrib_<release>.json`` (package data ``cuda_redist/``)."""
    path = resources.files("dswheels").joinpath("cuda_redist").joinpath(f"redistrib_{release}.json")
    return path.read_bytes() if path.is_file() else None


def parse_compat(data: object, *, redist_records: Callable[[str], bytes | None] = recorded_redist) -> Compat:
    """Build the typed facts from the parsed YAML of compat.yml (``redist_records``: where the
    recorded redistrib JSONs are read from; dswheels' package data by default).

    ``CompatDataError`` for anything else, a version or Python of the wrong form included (the
    readers of versions raise a plain ``ValueError``: ``facts check --compat`` reads any file)."""
    try:
        return _parse_compat(data, redist_records=redist_records)
    except CompatDataError:
        raise
    except ValueError as exc:
        raise CompatDataError(f"compat.yml: {exc}") from None


def _parse_compat(data: object, *, redist_records: Callable[[str], bytes | None]) -> Compat:
    root = _Reader(data, "")
    torch = _torch_releases(root)
    cuda: dict[VersionTuple, CudaToolkit] = {}
    for minor_text, entry in root["cuda"].items():
        msvc = entry["msvc"].seq()
        cuda[parse_version(minor_text)] = CudaToolkit(
            minor=parse_version(minor_text),
            install=_release(entry["install"]),
            sm=frozenset(_sm(sm) for sm in entry["sm"].seq()),
            msvc=(msvc[0].integer(), msvc[1].integer()),
            gcc_max=entry["gcc_max"].integer(),
            inferred=entry.inferred(),
            source=entry.source(),
            redist_sha256=_redist_pin(entry),
        )
    images: dict[str, RunnerImage] = {}
    for name, entry in root["runner_images"].items():
        container = entry.at("container").opt_text() or ""
        if container and not _DIGEST_PINNED.search(container):
            msg = f"compat.yml: runner_images.{name}.container {container!r} is not pinned by digest (@sha256:...)"
            raise CompatDataError(msg)
        msvc_reader, gcc_reader = entry.opt("msvc"), entry.opt("gcc")
        glibc_reader, glibcxx_reader = entry.opt("glibc"), entry.opt("glibcxx")
        images[name] = RunnerImage(
            name=name,
            os=entry["os"].text(),
            msvc=msvc_reader.strs() if msvc_reader else (),
            gcc=tuple(_gcc_major(g) for g in gcc_reader.seq()) if gcc_reader else (),
            inferred=entry.inferred(),
            source=entry.source(),
            glibc=parse_version(glibc_reader.text()) if glibc_reader else None,
            glibcxx=parse_version(glibcxx_reader.text()) if glibcxx_reader else None,
            runs_on=entry.at("runs_on").opt_text() or "",
            container=container,
            gcc_toolset=bool(entry.at("gcc_toolset").opt_flag()),
            ends=_image_ends(name, ends) if (ends := entry.opt("ends")) else None,
            arch=arch.text() if (arch := entry.opt("arch")) else "x86_64",
        )
    baselines = {
        name: CpuBaseline(
            name=name,
            gcc=entry["gcc"].text(),
            msvc=entry["msvc"].text(),
            simd=entry["simd"].text(),
            forbidden_registers=regs.strs() if (regs := entry.opt("forbidden_registers")) else (),
            note=entry["note"].text(),
            torch_capability=capability.text() if (capability := entry.opt("torch_capability")) else "",
            gcc_variant_flags=tuple((op, flags.strs()) for op, flags in extra.items())
            if (extra := entry.opt("gcc_variant_flags"))
            else (),
            arch=entry["arch"].text(),
            forbidden_features=_features(entry),
            qemu_cpu=model.text() if (model := entry.opt("qemu_cpu")) else None,
        )
        for name, entry in root["cpu_baselines"].items()
    }
    defaults = {cpu: value.text() for cpu, value in root["cpu_baseline_default"].items()}
    for cpu, default in defaults.items():
        if default not in baselines or baselines[default].arch != cpu:
            msg = f"compat.yml: cpu_baseline_default.{cpu}: {default!r} is no cpu_baselines entry of {cpu}"
            raise CompatDataError(msg)
    ds = root["deepspeed"]
    mismatch_rows = tuple(
        MismatchRow(
            deepspeed=parse_range(row["deepspeed"].text()),
            lists={
                _major(vs, major): frozenset(parse_version(v) for v in vs.strs()) for major, vs in row["lists"].items()
            },
        )
        for row in ds["cuda_minor_mismatch_ok"].seq()
    )
    rules = tuple(
        Rule(
            id=row["id"].text(),
            when=_condition(row.opt("when")),
            require=_condition(row["require"]),
            why=row["why"].text(),
            fix=row["fix"].text(),
            inferred=row.inferred(),
            source=row.source(),
        )
        for row in root["rules"].seq()
    )
    workarounds = tuple(
        Workaround(
            id=row["id"].text(),
            when=_condition(row.opt("when")),
            nvcc_flags=flags.strs() if (flags := row.opt("nvcc_flags")) else (),
            note=note.text() if (note := row.opt("note")) else "",
            why=why.text() if (why := row.opt("why")) else "",
            source=row.source(),
        )
        for row in root["workarounds"].seq()
    )
    libstdcxx = tuple(
        LibstdcxxRelease(
            gcc=parse_version(row["gcc"].text()),
            glibcxx=parse_version(row["glibcxx"].text()),
            cxxabi=parse_version(row["cxxabi"].text()),
        )
        for row in root["libstdcxx_releases"].seq()
    )
    if [r.gcc for r in libstdcxx] != sorted(r.gcc for r in libstdcxx):
        msg = "compat.yml: libstdcxx_releases must be in GCC release order"
        raise CompatDataError(msg)
    promise = root["linux_runtime_floor"]
    promised_glibcxx = parse_version(promise["glibcxx"].text())
    promised_release = next((r for r in libstdcxx if r.glibcxx == promised_glibcxx), None)
    if promised_release is None:
        msg = f"compat.yml: linux_runtime_floor.glibcxx {promised_glibcxx} is not in libstdcxx_releases"
        raise CompatDataError(msg)
    return Compat(
        collected=root["collected"].text(),
        sources={key: value.text() for key, value in root["sources"].items()},
        torch=torch,
        torch_pypi_linux_variant={parse_version(k): v.text() for k, v in root["torch_pypi_linux_variant"].items()},
        platform_scope={
            AARCH64_KEY: (root["torch_linux_aarch64_scope"]["why"].text(), root["torch_linux_aarch64_scope"].source())
        },
        torch_index=root["torch_index"].text(),
        arch_tokens_rows=tuple(
            (parse_range(row["torch"].text()), row["add"].strs()) for row in root["torch_arch_tokens"].seq()
        ),
        arch_lists=tuple(
            ArchListRow(
                torch=parse_range(row["torch"].text()),
                variant=row["variant"].text(),
                lists=_arch_lists(row),
                inferred=row.inferred(),
                source=row.source(),
            )
            for row in root["torch_arch_lists"].seq()
        ),
        cuda=cuda,
        cuda_components=tuple(
            CudaComponent(
                name=row["name"].text(),
                cuda=parse_range(row["cuda"].text()),
                redist=row["redist"].text(),
                pypi=row["pypi"].text(),
                installer=row["installer"].text(),
                provides=row["provides"].text(),
                source=row.source(),
            )
            for row in root["cuda_components"].seq()
        ),
        cpython_sources={
            parse_version(str(minor)): CpythonSource(
                version=row["version"].text(),
                sha256=row["sha256"].text(),
                urls=row["urls"].strs(),
                source=row.source(),
            )
            for minor, row in root["cpython_sources"].items()
        },
        torch_gcc_limits=tuple(
            (parse_range(row["torch"].text()), parse_range(row["cuda"].text()), row["gcc_max"].integer(), row.source())
            for row in root["torch_gcc_limits"].seq()
        ),
        torch_gcc_min=tuple(
            (parse_range(row["torch"].text()), row["gcc_min"].integer(), row["why"].text(), row.source())
            for row in root["torch_gcc_min"].seq()
        ),
        libstdcxx=libstdcxx,
        linux_runtime_floor=RuntimeFloor(
            glibc=parse_version(promise["glibc"].text()),
            glibcxx=promised_glibcxx,
            cxxabi=promised_release.cxxabi,
        ),
        linux_runtime_tag=promise["tag"].text(),
        torch_provided_libraries=root["torch_provided_libraries"].strs(),
        linux_runtime_systems=promise["systems"].text(),
        linux_runtime_source=f"{promise.source()}; GLIBCXX per GCC: {root['libstdcxx_source'].text()}",
        stl_floors=tuple(
            (parse_version(row["from_toolset"].text()), parse_version(row["min_cuda"].text()), row.source())
            for row in root["msvc_stl_cuda_floor"].seq()
        ),
        runner_images=images,
        cpu_baseline_default=defaults,
        cpu_baselines=baselines,
        deepspeed_releases=tuple(parse_version(v) for v in ds["releases"].strs()),
        windows_files={str(k): v.text() for k, v in ds["windows_files"].items()},
        sdist_json=ds["sdist"].text(),
        mismatch_rows=mismatch_rows,
        rules=rules,
        workarounds=workarounds,
        ops=_parse_ops(root["ops"]),
        redist_records=redist_records,
    )


def _date(node: _Reader, what: str) -> dt.date:
    try:
        return dt.date.fromisoformat(node.text())
    except ValueError:
        msg = f"compat.yml: {what} is not a date (YYYY-MM-DD): {node.text()!r}"
        raise CompatDataError(msg) from None


def _image_ends(name: str, ends: _Reader) -> ImageEnds:
    where = f"runner_images.{name}.ends"
    return ImageEnds(
        deprecated=_date(ends["deprecated"], f"{where}.deprecated"),
        brownouts=tuple(_date(d, f"{where}.brownouts") for d in ends["brownouts"].seq()),
        unsupported=_date(ends["unsupported"], f"{where}.unsupported"),
        announcement=ends["announcement"].text(),
    )


_DIGEST_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")


@cache
def load_compat() -> Compat:
    """The shipped facts (package data), parsed once per process."""
    text = resources.files("dswheels").joinpath("compat.yml").read_text(encoding="utf-8")
    return parse_compat(yaml.safe_load(text))
