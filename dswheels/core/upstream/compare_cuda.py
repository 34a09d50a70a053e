"""CUDA toolkits: ``cuda.<X.Y>.install`` against what torch pins and what the pinned action can install."""

from __future__ import annotations

from collections.abc import Mapping

from dswheels.core.upstream.context import Context
from dswheels.core.upstream.findings import Kind
from dswheels.core.upstream.seen import OSES, CudaActionSeen, TorchMinorSeen
from dswheels.core.upstream.yaml_edit import Edit, render_scalar
from dswheels.core.versions import VersionTuple, format_version, parse_version

__all__ = ["compare_cuda", "exact_pins"]


def exact_pins(torch: Mapping[VersionTuple, TorchMinorSeen]) -> dict[VersionTuple, tuple[VersionTuple, str]]:
    """CUDA minor -> (the newest cuda-toolkit==X.Y.Z any torch release in scope pins, that torch release)."""
    pins: dict[VersionTuple, tuple[VersionTuple, str]] = {}
    for _minor, seen in sorted(torch.items()):  # on a tie the newest torch is named
        if seen.cuda_pin and seen.cuda_pin_exact:
            version = parse_version(seen.cuda_pin)
            if version[:2] not in pins or version >= pins[version[:2]][0]:
                pins[version[:2]] = (version, seen.latest)
    return pins


def _action_name(action: CudaActionSeen) -> str:
    return f"{action.action}@{action.commit[:7]} ({action.version or 'unversioned'}, method {action.method})"


def _installable(action: CudaActionSeen, version: VersionTuple) -> bool:
    return all(version in action.installable[os] for os in OSES)


def compare_cuda(
    ctx: Context,
    action: CudaActionSeen | None,
    pins: Mapping[VersionTuple, tuple[VersionTuple, str]],
) -> None:
    for minor, toolkit in sorted(ctx.compat.cuda.items()):
        pin, pinned_by = pins.get(minor, (None, ""))
        if action is None:
            _compare_pin(ctx, minor, toolkit.install, pin, pinned_by)
        else:
            _compare_installable(ctx, action, minor, install_text=toolkit.install, pin=pin, pinned_by=pinned_by)
    if action is not None:
        _new_toolkits(ctx, action)


def _compare_pin(
    ctx: Context, minor: VersionTuple, install_text: str, pin: VersionTuple | None, pinned_by: str
) -> None:
    """The action was not read: only torch's pin speaks, and raising ``install`` is left to a person."""
    key = format_version(minor)
    if pin and pin > parse_version(install_text):
        ctx.add(
            Kind.DISAGREES,
            f"cuda.{key}.install",
            f"torch {pinned_by} pins cuda-toolkit {format_version(pin)}; compat.yml installs {install_text}",
            "PyPI torch metadata",
            person="whether the CUDA-install action can install it was not checked (its source was not "
            "read): check it before raising `install`",
        )


def _compare_installable(
    ctx: Context,
    action: CudaActionSeen,
    minor: VersionTuple,
    *,
    install_text: str,
    pin: VersionTuple | None,
    pinned_by: str,
) -> None:
    """``install`` against what the pinned action can install on both OSes, and torch's pin."""
    key = format_version(minor)
    path = ("cuda", key, "install")
    install = parse_version(install_text)
    where = _action_name(action)
    cannot = [os for os in OSES if install not in action.installable[os]]
    both = sorted(set(action.installable["linux"]) & set(action.installable["windows"]))
    best = max((v for v in both if v[:2] == minor), default=None)
    if pin is not None and _installable(action, pin):
        best = pin
    if cannot:
        message = f"{where} cannot install {install_text} on {' or '.join(cannot)}"
        if best is not None:
            ctx.add(
                Kind.DISAGREES,
                f"cuda.{key}.install",
                f"{message}; it can install {format_version(best)}",
                "the action's version tables",
                edits=[Edit("set", path, render_scalar(format_version(best)))],
            )
        else:
            ctx.add(
                Kind.DISAGREES,
                f"cuda.{key}.install",
                f"{message}, nor any other CUDA {key} release on both",
                "the action's version tables",
                person=f"bump the action's pin in .github/workflows/wheels.yml to a release whose tables list "
                f"CUDA {key}, or leave {key} out of the matrix (no variant or `toolkits:` may use it)",
            )
        return
    if pin is None or pin <= install:
        return
    pin_text = format_version(pin)
    if _installable(action, pin):
        ctx.add(
            Kind.DISAGREES,
            f"cuda.{key}.install",
            f"torch {pinned_by} pins cuda-toolkit {pin_text}; compat.yml installs {install_text}",
            "PyPI torch metadata; the action's version tables",
            edits=[Edit("set", path, render_scalar(pin_text))],
        )
        return
    newest = format_version(max(v for v in both if v[:2] == minor))
    ctx.add(
        Kind.DISAGREES,
        f"cuda.{key}.install",
        f"torch {pinned_by} pins cuda-toolkit {pin_text}; compat.yml installs {install_text}, and "
        f"{where} knows CUDA {key} only up to {newest}",
        "PyPI torch metadata; the action's version tables",
        person=f"bump the action's pin in .github/workflows/wheels.yml to a release that lists "
        f"{pin_text}; then `dswheels facts check --write` raises `install`",
    )


def _new_toolkits(ctx: Context, action: CudaActionSeen) -> None:
    """CUDA minors the action can install that compat.yml has no entry for."""
    newest_known = max(ctx.compat.cuda)
    everywhere = set(action.installable["linux"]) & set(action.installable["windows"])
    for minor in sorted({v[:2] for v in everywhere if v[:2] > newest_known}):
        ctx.add(
            Kind.NEW,
            f"cuda.{format_version(minor)}",
            f"{_action_name(action)} can install CUDA {format_version(minor)}; compat.yml has no entry for it",
            "the action's version tables",
            person="a toolkit entry needs facts no source here reads: its sm list (ptxas --help), the MSVC "
            "window and newest GCC (crt/host_config.h)",
        )
