"""What one run of the wheels workflow builds and where it publishes, decided from its event.

``dswheels ci plan`` (the plan job of .github/workflows/wheels.yml) reads what GitHub says
about the run, decides here, plans, and hands the workflow its jobs. The decisions:

- a **tag push** ``v<DeepSpeed version>[-<suffix>]`` builds that DeepSpeed version across the
  matrix (the suffix, as in ``v0.19.8-2``, builds cells added to the matrix later) and
  publishes to the release of the tag;
- a **dispatch** builds one combination; an axis given as ``matrix`` takes every value the
  matrix has (all ``matrix``: what a tag push of that version builds). With ``publish`` the
  wheels go to the release ``v<DeepSpeed version>``; the **canary** is drawn from what a tag
  push of the version builds (the other axes are ignored: the dispatch always sends them, and
  the cell that covers what breaks, the newest CUDA, is rarely the default one) and is never
  published, whatever ``publish`` says (its wheel lacks most ops);
- a run that publishes builds only what is not published yet: it reads the publish
  directory when one is set, else the index the workflow deploys
  (``https://OWNER.github.io/REPO/`` unless ``DSWHEELS_INDEX_URL`` says otherwise);
- the smoke jobs are the build jobs of the platforms that have a self-hosted GPU runner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from dswheels.kernel.model import Platform
from dswheels.kernel.versions import parse_version

__all__ = [
    "AXES",
    "MATRIX_AXIS",
    "DispatchInputs",
    "Event",
    "EventError",
    "RunIntent",
    "default_index_url",
    "intent_for",
    "parse_gpu_platforms",
    "parse_release_tag",
    "skip_published_source",
]

AXES = ("deepspeed", "torch", "cuda", "python", "platform")
MATRIX_AXIS = "matrix"  # a dispatch axis left to the matrix (with its include/exclude)
_TAG_RE = re.compile(r"^v(?P<version>[^-]+)(?:-(?P<suffix>.+))?$")


class EventError(ValueError):
    """An event the wheels workflow cannot act on (a tag that names no version, an unknown event)."""


class Event(str, Enum):
    """The triggers of the wheels workflow (``GITHUB_EVENT_NAME``)."""

    PUSH = "push"
    WORKFLOW_DISPATCH = "workflow_dispatch"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, kw_only=True, slots=True)
class DispatchInputs:
    """The inputs of a ``workflow_dispatch`` run, as the workflow declares them."""

    deepspeed: str
    torch: str = MATRIX_AXIS
    cuda: str = MATRIX_AXIS
    python: str = MATRIX_AXIS
    platform: str = MATRIX_AXIS
    canary: bool = False
    publish: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class RunIntent:
    """What the run builds (``selection``: axis -> value, None = the matrix's) and where it publishes."""

    selection: Mapping[str, str | None]
    canary: bool
    release: str  # the GitHub Release the wheels go to; "" publishes nothing

    @property
    def publishes(self) -> bool:
        return bool(self.release)


def parse_release_tag(tag: str) -> str:
    """The DeepSpeed version a release tag builds.

    >>> parse_release_tag("v0.19.8"), parse_release_tag("v0.19.8-2")
    ('0.19.8', '0.19.8')
    >>> try:
    ...     parse_release_tag("vnext")
    ... except EventError as exc:
    ...     print(type(exc).__name__, exc)
    EventError tag 'vnext' is not v<DeepSpeed version>[-<suffix>] (e.g. v0.19.8, v0.19.8-2)
    """
    match = _TAG_RE.match(tag)
    version = match["version"] if match else ""
    try:
        ok = len(parse_version(version)) == 3
    except ValueError:
        ok = False
    if not ok:
        msg = f"tag {tag!r} is not v<DeepSpeed version>[-<suffix>] (e.g. v0.19.8, v0.19.8-2)"
        raise EventError(msg)
    return version


def intent_for(event: Event, *, ref_name: str, inputs: DispatchInputs | None) -> RunIntent:
    """What a run of ``event`` builds and publishes (see the module docstring)."""
    if event is Event.PUSH:
        version = parse_release_tag(ref_name)
        return RunIntent(selection={"deepspeed": version}, canary=False, release=ref_name)
    if inputs is None:
        msg = "a workflow_dispatch run needs its inputs (at least the DeepSpeed version)"
        raise EventError(msg)
    given = {
        "deepspeed": inputs.deepspeed,
        "torch": inputs.torch,
        "cuda": inputs.cuda,
        "python": inputs.python,
        "platform": inputs.platform,
    }
    selection = {axis: (None if value in ("", MATRIX_AXIS) else value) for axis, value in given.items()}
    if selection["deepspeed"] is None:
        msg = "a dispatch names one DeepSpeed version (the deepspeed input), not 'matrix'"
        raise EventError(msg)
    if inputs.canary:  # the canary is picked from the version's matrix (dswheels.plan.canary)
        selection = {axis: (value if axis == "deepspeed" else None) for axis, value in selection.items()}
    publish = inputs.publish and not inputs.canary  # the canary's wheel lacks most ops: never published
    return RunIntent(selection=selection, canary=inputs.canary, release=f"v{inputs.deepspeed}" if publish else "")


def default_index_url(repository: str) -> str:
    """Where GitHub Pages serves a repository's site (its host is the owner in lower case).

    >>> default_index_url("Octo/dswheels")
    'https://octo.github.io/dswheels/'
    """
    owner, _, name = repository.partition("/")
    if not owner or not name:
        msg = f"repository {repository!r} is not OWNER/NAME"
        raise EventError(msg)
    return f"https://{owner.lower()}.github.io/{name}/"


def skip_published_source(*, publish_dir: str, index_url: str) -> str:
    """Where a publishing run looks for what is published already: the publish directory when set,
    else the index the workflow deploys."""
    return publish_dir or index_url


def parse_gpu_platforms(text: str) -> frozenset[Platform]:
    """``DSWHEELS_GPU_RUNNERS``: the platforms with a self-hosted GPU runner, space- or comma-separated.

    >>> sorted(p.value for p in parse_gpu_platforms("linux_x86_64, win_amd64"))
    ['linux_x86_64', 'win_amd64']
    """
    names = [name for name in re.split(r"[\s,]+", text) if name]
    unknown = [name for name in names if name not in {p.value for p in Platform}]
    if unknown:
        known = ", ".join(p.value for p in Platform)
        msg = f"DSWHEELS_GPU_RUNNERS names {', '.join(map(repr, unknown))}: not a platform (known: {known})"
        raise EventError(msg)
    return frozenset(Platform(name) for name in names)


def platforms_text(platforms: Iterable[Platform]) -> str:
    return ", ".join(sorted(p.value for p in platforms)) or "none"
