"""The CUDA-install action the workflow pins (Jimver/cuda-toolkit): which toolkits it can install.

The action refuses any version missing from its own tables ("Version not available"):
``src/links/linux-links.ts`` maps versions to the Linux runfiles, ``windows-links.ts`` to the
Windows installers. With ``method: network`` Linux validates against the runfile table (and
then installs ``cuda-toolkit-X-Y`` from NVIDIA's apt repository) and Windows uses its
network-installer table (``src/version.ts``). The tables are read at the commit the
workflow pins, so what is checked is what the workflow would run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dswheels.facts.seen import CudaActionSeen
from dswheels.kernel.versions import VersionTuple, parse_version

__all__ = ["ACTION", "ActionPin", "cuda_action_seen", "find_action_pin", "table_versions", "uses_action"]

ACTION = "Jimver/cuda-toolkit"
_USES_RE = re.compile(
    r"uses:\s*" + re.escape(ACTION) + r"@(?P<commit>[0-9a-fA-F]{40})\s*(?:#\s*(?P<version>\S+))?", re.IGNORECASE
)
_ANY_USE_RE = re.compile(r"uses:\s*['\"]?" + re.escape(ACTION) + r"\b", re.IGNORECASE)
_METHOD_RE = re.compile(r"^\s*method:\s*['\"]?(?P<method>local|network)['\"]?\s*$", re.MULTILINE)
_KEY_RE = re.compile(r"\[\s*'([0-9]+\.[0-9]+\.[0-9]+)'\s*,")


@dataclass(frozen=True, slots=True)
class ActionPin:
    commit: str
    version: str  # the comment beside the SHA ("v0.2.35"), "" when there is none
    method: str  # the step's `method:` ("network" when not given: the action's default is "local")


def find_action_pin(workflow: str) -> ActionPin | None:
    """The action's pinned commit and install method in a workflow file's text; None when not used."""
    match = _USES_RE.search(workflow)
    if match is None:
        return None
    following = workflow[match.end() :]
    next_step = following.find("\n      - ")
    method = _METHOD_RE.search(following[: next_step if next_step >= 0 else None])
    return ActionPin(
        commit=match.group("commit").lower(),
        version=match.group("version") or "",
        method=method.group("method") if method else "local",
    )


def uses_action(workflow: str) -> bool:
    """Whether a workflow file uses the action at all (pinned or not): without it, the workflow installs
    CUDA some other way (NVIDIA's archives) and the action's tables say nothing about it."""
    return _ANY_USE_RE.search(workflow) is not None


def table_versions(source: str, table: str) -> tuple[VersionTuple, ...]:
    """The version keys of one ``new Map([...])`` table of a links file (``cudaVersionToURL`` ...)."""
    start = re.search(re.escape(table) + r"\b[^=]*=\s*new Map\(\[", source)
    if start is None:
        raise ValueError(f"no table {table!r} in the links file")
    depth, index = 1, start.end()
    while depth and index < len(source):  # to the "])" closing this Map
        depth += {"[": 1, "]": -1}.get(source[index], 0)
        index += 1
    return tuple(sorted({parse_version(v) for v in _KEY_RE.findall(source[start.end() : index])}))


def cuda_action_seen(pin: ActionPin, *, linux: str, windows: str) -> CudaActionSeen:
    """The installable versions per OS from the two links files at the pinned commit."""
    windows_table = "cudaVersionToNetworkUrl" if pin.method == "network" else "cudaVersionToURL"
    return CudaActionSeen(
        action=ACTION,
        commit=pin.commit,
        version=pin.version,
        method=pin.method,
        installable={
            "linux": table_versions(linux, "cudaVersionToURL"),
            "windows": table_versions(windows, windows_table),
        },
    )
