"""CUDA toolkits: ``cuda.<X.Y>.install`` against the releases NVIDIA published, what torch pins,
and what the workflow's installer can install.

``install`` should name the newest final release of its minor: NVIDIA's patch releases fix the
compiler, and a pin older than torch's own (``cuda-toolkit==X.Y.Z``) builds against another
toolkit than torch's wheels. A pin NVIDIA published only as a pre-release (13.4.0 was only
13.4.0rc1) or never is flagged. Whether ``--write`` can raise it depends on the installer: the
pinned CUDA-install action installs what its tables list; without an action (NVIDIA's archives)
every published release can be installed; when the installer was not read, a person checks.
"""

from __future__ import annotations

from collections.abc import Mapping

from dswheels.facts.context import Context
from dswheels.facts.findings import Kind
from dswheels.facts.seen import OSES, CudaActionSeen, CudaToolkitSeen, TorchMinorSeen
from dswheels.facts.yaml_edit import Edit, render_scalar
from dswheels.kernel.versions import VersionTuple, format_version, parse_version

__all__ = ["compare_cuda", "exact_pins"]

NVIDIA = "NVIDIA's releases (PyPI cuda-toolkit)"
TORCH = "PyPI torch metadata"
TABLES = "the action's version tables"
_NEW_ENTRY = (
    "a toolkit entry needs facts no source here reads: its sm list (ptxas --help), the MSVC window and "
    "newest GCC (crt/host_config.h)"
)


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


def _on_both(action: CudaActionSeen) -> set[VersionTuple]:
    return set(action.installable["linux"]) & set(action.installable["windows"])


class _Claims:
    """What the sources say against one ``install``: the clauses, their sources, the release it should name."""

    def __init__(self) -> None:
        self.clauses: list[str] = []
        self.sources: list[str] = []
        self.target: VersionTuple | None = None  # the release `install` should name; None: none known
        self.unreleased = ""  # set when NVIDIA has no final release of the minor: what it has instead

    def say(self, clause: str, source: str) -> None:
        self.clauses.append(clause)
        if source not in self.sources:
            self.sources.append(source)

    @property
    def source(self) -> str:
        return "; ".join(self.sources)


def _claims(
    ctx: Context,
    minor: VersionTuple,
    install: VersionTuple,
    *,
    nvidia: CudaToolkitSeen | None,
    pin: tuple[VersionTuple, str] | None,
) -> _Claims:
    key, install_text = format_version(minor), format_version(install)
    claims = _Claims()
    if nvidia is not None and not nvidia.knows(minor):
        ctx.notes.append(
            f"cuda.{key}.install: PyPI's cuda-toolkit lists no CUDA {key} release (it starts at 11.8): "
            "not checked against NVIDIA's releases"
        )
    elif nvidia is not None:
        newest = nvidia.newest(minor)
        if install not in nvidia.releases:
            pre = nvidia.prereleases.get(install)
            said = f"only as a pre-release ({', '.join(pre)})" if pre else "never (no such cuda-toolkit release)"
            claims.say(f"NVIDIA published {install_text} {said}", NVIDIA)
        if newest is None:
            claims.unreleased = ", ".join(nvidia.prereleases_of(minor))
        elif newest != install:
            claims.say(f"the newest CUDA {key} release is {format_version(newest)} ({nvidia.releases[newest]})", NVIDIA)
        claims.target = newest
    if pin is not None and pin[0] > install:
        claims.say(f"torch {pin[1]} pins cuda-toolkit {format_version(pin[0])}", TORCH)
        claims.target = max(claims.target or pin[0], pin[0])
    return claims


def compare_cuda(
    ctx: Context,
    *,
    action: CudaActionSeen | None,
    without_action: bool,
    nvidia: CudaToolkitSeen | None,
    pins: Mapping[VersionTuple, tuple[VersionTuple, str]],
) -> None:
    """Every ``cuda.<X.Y>.install``, and the toolkits compat.yml has no entry for.

    ``action``: the pinned CUDA-install action's tables (None: not read, or not used);
    ``without_action``: the workflow was read and installs CUDA without such an action.
    """
    for minor, toolkit in sorted(ctx.compat.cuda.items()):
        install = parse_version(toolkit.install)
        claims = _claims(ctx, minor, install, nvidia=nvidia, pin=pins.get(minor))
        if action is not None:
            _with_action(ctx, action, minor, install, claims)
        elif claims.clauses:
            _without_action_tables(ctx, minor, install, claims, installer_read=without_action)
    _new_toolkits(ctx, action, nvidia)


def _message(install: VersionTuple, claims: _Claims) -> str:
    return f"compat.yml installs {format_version(install)}; " + "; ".join(claims.clauses)


def _no_release(key: str, claims: _Claims) -> str:
    return (
        f"NVIDIA has released no CUDA {key} yet (only {claims.unreleased or 'pre-releases'}): no variant or "
        f"`toolkits:` may use {key} until it does"
    )


def _raise_install(ctx: Context, minor: VersionTuple, version: VersionTuple) -> tuple[list[Edit], str]:
    """The edit that makes ``install`` name ``version``, or what a person does instead: a toolkit whose
    redistrib JSON is pinned (``redist_sha256``) is installed from that JSON, which names one release, so
    the new release's JSON must be recorded and pinned in the same change."""
    key, text = format_version(minor), format_version(version)
    if ctx.value(("cuda", key, "redist_sha256")) is not None:
        return [], (
            f"record NVIDIA's redistrib_{text}.json (dswheels/cuda_redist/README.md) and set `install: {text}` "
            "with its `redist_sha256` (the pinned JSON is the current release's: every archive is checked "
            "against it)"
        )
    return [Edit("set", ("cuda", key, "install"), render_scalar(text))], ""


def _without_action_tables(
    ctx: Context, minor: VersionTuple, install: VersionTuple, claims: _Claims, *, installer_read: bool
) -> None:
    """No action tables: with NVIDIA's archives every published release installs; unread, a person checks."""
    key = format_version(minor)
    entry = f"cuda.{key}.install"
    if claims.target is None:
        ctx.add(Kind.DISAGREES, entry, _message(install, claims), claims.source, person=_no_release(key, claims))
    elif installer_read:
        edits, person = _raise_install(ctx, minor, claims.target)
        ctx.add(Kind.DISAGREES, entry, _message(install, claims), claims.source, edits=edits, person=person)
    else:
        ctx.add(
            Kind.DISAGREES,
            entry,
            _message(install, claims),
            claims.source,
            person=f"whether the CUDA-install action can install {format_version(claims.target)} was not checked "
            "(its source was not read): check it before raising `install`",
        )


def _with_action(
    ctx: Context, action: CudaActionSeen, minor: VersionTuple, install: VersionTuple, claims: _Claims
) -> None:
    """``install`` against what the pinned action can install on both OSes, and what the sources want."""
    key = format_version(minor)
    entry = f"cuda.{key}.install"
    where = _action_name(action)
    both = _on_both(action)
    of_minor = sorted(v for v in both if v[:2] == minor)
    target = claims.target
    source = "; ".join([*claims.sources, TABLES])
    cannot = [os for os in OSES if install not in action.installable[os]]
    if cannot:
        best = target if target in both else (of_minor[-1] if of_minor else None)
        message = f"{where} cannot install {format_version(install)} on {' or '.join(cannot)}"
        tail = "".join(f"; {c}" for c in claims.clauses)
        if best is None:
            ctx.add(
                Kind.DISAGREES,
                entry,
                f"{message}, nor any other CUDA {key} release on both{tail}",
                source,
                person=f"bump the action's pin in .github/workflows/wheels.yml to a release whose tables list "
                f"CUDA {key}, or leave {key} out of the matrix (no variant or `toolkits:` may use it)",
            )
            return
        edits, pinned = _raise_install(ctx, minor, best)
        bump = ""
        if target is not None and best < target:
            bump = (
                f"bump the action's pin in .github/workflows/wheels.yml to a release that lists "
                f"{format_version(target)}; then `dswheels facts check --write` raises `install` again"
            )
        ctx.add(
            Kind.DISAGREES,
            entry,
            f"{message}; it can install {format_version(best)}{tail}",
            source,
            edits=edits,
            person="; ".join(p for p in (pinned, bump) if p),
        )
        return
    if not claims.clauses:
        return
    if target is None:
        ctx.add(Kind.DISAGREES, entry, _message(install, claims), claims.source, person=_no_release(key, claims))
    elif target in both:
        edits, person = _raise_install(ctx, minor, target)
        ctx.add(Kind.DISAGREES, entry, _message(install, claims), source, edits=edits, person=person)
    else:
        ctx.add(
            Kind.DISAGREES,
            entry,
            f"{_message(install, claims)}, and {where} knows CUDA {key} only up to {format_version(of_minor[-1])}",
            source,
            person=f"bump the action's pin in .github/workflows/wheels.yml to a release that lists "
            f"{format_version(target)}; then `dswheels facts check --write` raises `install`",
        )


def _new_toolkits(ctx: Context, action: CudaActionSeen | None, nvidia: CudaToolkitSeen | None) -> None:
    """CUDA minors NVIDIA released, or the action can install, that compat.yml has no entry for."""
    newest_known = max(ctx.compat.cuda)
    installable = {v[:2] for v in _on_both(action) if v[:2] > newest_known} if action is not None else set()
    released: dict[VersionTuple, VersionTuple] = {}
    if nvidia is not None:
        for version in nvidia.releases:
            if version[:2] > newest_known:
                released[version[:2]] = max(released.get(version[:2], version), version)
        for base, names in nvidia.prereleases.items():
            if base[:2] > newest_known and base[:2] not in released and base[:2] not in installable:
                ctx.notes.append(
                    f"CUDA {format_version(base)} is out only as a pre-release ({', '.join(names)}): "
                    "not proposed until NVIDIA releases it"
                )
    for minor in sorted(installable | set(released)):
        key = format_version(minor)
        clauses, sources = [], []
        first = nvidia.first(minor) if nvidia is not None else None
        if nvidia is not None and first is not None:
            newest = f" (newest {format_version(released[minor])})" if released[minor] != first else ""
            clauses.append(f"NVIDIA released CUDA {format_version(first)} on {nvidia.releases[first]}{newest}")
            sources.append(NVIDIA)
        if action is not None:
            can = "can" if minor in installable else "cannot yet"
            clauses.append(f"{_action_name(action)} {can} install CUDA {key}")
            sources.append(TABLES)
        ctx.add(
            Kind.NEW,
            f"cuda.{key}",
            "; ".join(clauses) + "; compat.yml has no entry for it",
            "; ".join(sources),
            person=_NEW_ENTRY,
        )
