"""The flags more than one command takes: each defined once, with one meaning, next to what turns
its value into the typed value a step's options hold (bad values and bad combinations: exit 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dswheels.cli.flags import Flag, PathUse
from dswheels.cli.parser import REPORT_DEST
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.locations import MATRIX
from dswheels.kernel.sources import TorchSource, TorchSourceKind
from dswheels.kernel.versions import VersionTuple, parse_version
from dswheels.plan.planner import Combo, combo_from_values

if TYPE_CHECKING:  # imported when a command runs: `dswheels --help` needs neither the stores nor compat.yml
    from dswheels.plan.effects.published import PublishedAt
    from dswheels.plan.effects.selection import MatrixCells
    from dswheels.platforms.hosts import QemuSettings

__all__ = [
    "COMBO_AXES",
    "DEEPSPEED",
    "GITHUB",
    "INTERPRETER",
    "MATRIX_FLAG",
    "PUBLISHED_AT",
    "REPORT",
    "SELECTION",
    "TARGET",
    "TRUSTED_ROOT",
    "combo_given",
    "combo_of",
    "matrix_selection",
    "parse_deepspeed",
    "parse_interpreter",
    "parse_nvcc_option",
    "parse_torch_source",
    "published_at",
    "qemu",
    "qemu_settings",
    "torch_index",
]

COMBO_AXES = ("deepspeed", "torch", "cuda", "python", "platform")


# --- the matrix, and which of its cells ----------------------------------------------------------

# ``--matrix PATH``: ``DSWHEELS_MATRIX`` (the repository variable) is its default, then the repository's own
MATRIX_FLAG = Flag(
    "--matrix", env="DSWHEELS_MATRIX", default=MATRIX, metavar="PATH", path=PathUse.READS, help="matrix file"
)


def parse_deepspeed(text: str | None) -> VersionTuple | None:
    """``--deepspeed X.Y.Z``: a DeepSpeed release."""
    if text is None:
        return None
    try:
        version = parse_version(text)
    except ValueError as exc:
        raise ConfigError(f"--deepspeed: {exc}") from None
    if len(version) != 3:
        raise ConfigError(f"--deepspeed: give X.Y.Z (e.g. '0.19.8'), not {text!r}")
    return version


DEEPSPEED = Flag("--deepspeed", metavar="X.Y.Z", help="DeepSpeed version of the combination")

# --matrix, --only and the combination flags: every command that takes cells of the matrix (matrix_selection)
SELECTION = (
    MATRIX_FLAG,
    Flag("--only", action="append", metavar="ID", help="cell id or glob of the matrix (repeatable)"),
    DEEPSPEED,
    Flag("--torch", metavar="M.m", help="torch MAJOR.MINOR of the combination, as in the label (2.14, not 2.14.1)"),
    Flag("--cuda", metavar="cuXYZ|X.Y|cpu", help="torch variant of the combination (cpu for the CPU build)"),
    Flag("--python", metavar="3.X", help="Python version of the combination"),
    Flag("--platform", metavar="PLAT", help="win_amd64, linux_x86_64 or linux_aarch64"),
    Flag(
        "--nvcc",
        metavar="X.Y",
        help="plan as if the builder had this nvcc instead of each variant's own CUDA (same major)",
    ),
)


def parse_nvcc_option(text: str | None) -> VersionTuple | None:
    """``--nvcc X.Y`` as (X, Y); None when not given."""
    if text is None:
        return None
    try:
        return parse_version(text)[:2]
    except ValueError as exc:
        raise ConfigError(f"--nvcc: {exc}") from None


def combo_given(args: argparse.Namespace) -> bool:
    """Whether any combination flag (--deepspeed ... --platform) is on the command line."""
    return any(getattr(args, key) for key in COMBO_AXES)


def combo_of(args: argparse.Namespace) -> Combo:
    """The combination flags, parsed; one ConfigError names every bad one."""
    return combo_from_values({key: getattr(args, key) for key in COMBO_AXES})


def matrix_selection(args: argparse.Namespace) -> MatrixCells:
    """The cells of --matrix that --only or the combination flags select (never both)."""
    from dswheels.plan.effects.selection import MatrixCells  # noqa: PLC0415 - see the imports above

    combo = combo_of(args)
    if combo.given and args.only:
        raise ConfigError("--only selects cells of the matrix; it cannot be combined with --deepspeed/--torch/...")
    return MatrixCells(matrix=args.matrix, only=tuple(args.only), combo=combo, nvcc=parse_nvcc_option(args.nvcc))


# --- where torch and the interpreter come from ----------------------------------------------------


def parse_torch_source(text: str | None) -> TorchSource:
    """``--torch-index``: the plan's index (unset), pip's, an index URL, or a directory (an index or wheels)."""
    if text is None:
        return TorchSource(TorchSourceKind.PLAN)
    if text == "pip":
        return TorchSource(TorchSourceKind.PIP)
    if "://" in text and not text.startswith("file://"):
        return TorchSource(TorchSourceKind.INDEX, text)
    path = Path(text.removeprefix("file://")).expanduser()
    if not path.exists():
        raise ConfigError(f"--torch-index {text}: no such directory", hint="give an index URL, a directory, or 'pip'")
    if (path / "torch").is_dir() or (path / "index.html").exists():
        return TorchSource(TorchSourceKind.INDEX, path.resolve().as_uri())
    return TorchSource(TorchSourceKind.LINKS, str(path.resolve()))


def _torch_index_help(what: str) -> str:
    return (
        f"where {what} gets torch: an index URL, a directory of wheels, or 'pip' for the indexes pip is "
        "configured with; unset: the plan's https://download.pytorch.org/whl/<variant>"
    )


def torch_index(*, what: str) -> Flag:
    """``--torch-index URL|DIR|pip`` with one meaning everywhere, saying whose torch it is."""
    return Flag(
        "--torch-index",
        env="DSWHEELS_TORCH_INDEX",
        type=str,  # a URL or pip, else a folder
        metavar="URL|DIR|pip",
        path=PathUse.READS,
        to="torch_source",
        parse=parse_torch_source,
        help=_torch_index_help(what),
    )


def parse_interpreter(text: str | None) -> Path | None:
    """``--python``: None when not given; ``current`` is the interpreter running dswheels."""
    if not text:
        return None
    return Path(sys.executable) if text == "current" else Path(text)


# ``--python PATH|current``: the interpreter of the environment a command works in
INTERPRETER = Flag(
    "--python", type=str, metavar="PATH|current", path=PathUse.READS, to="python", parse=parse_interpreter
)


def _interpreter_text(text: str | None) -> str | None:
    python = parse_interpreter(text)
    return str(python) if python else None


# --python, --index and --deepspeed: the environment `dswheels doctor` and `dswheels install` judge
TARGET = (
    INTERPRETER.but(
        parse=_interpreter_text, help="interpreter of the environment to inspect (default: the one running dswheels)"
    ),
    Flag(
        "--index",
        env="DSWHEELS_INDEX",
        metavar="URL",
        to="index",
        path=PathUse.READS_PUBLISHED,
        help="published index: its base URL or directory, as in docs/index-layout.md",
    ),
    DEEPSPEED.but(
        to="deepspeed",
        parse=parse_deepspeed,
        help="DeepSpeed version to judge (default: the newest published for this environment, "
        "else the installed one, else the newest the rules allow)",
    ),
)


# --- where wheels are published, and reports ---------------------------------------------------

# where the wheels are published (the workflows' repository variables): a directory, else an index (published_at)
PUBLISHED_AT = (
    Flag(
        "--publish-dir",
        env="DSWHEELS_PUBLISH_DIR",
        metavar="DIR",
        path=PathUse.READS_PUBLISHED,
        help="publish into this directory, not a release",
    ),
    Flag("--index-url", env="DSWHEELS_INDEX_URL", metavar="URL", help="where the index is served"),
    Flag(
        "--repository",
        env="GITHUB_REPOSITORY",
        metavar="OWNER/NAME",
        help="gives the default --index-url, https://OWNER.github.io/NAME/",
    ),
)


def published_at(args: argparse.Namespace) -> PublishedAt:
    from dswheels.plan.effects.published import PublishedAt  # noqa: PLC0415 - see the imports above

    return PublishedAt(
        publish_dir=args.publish_dir or "", index_url=args.index_url or "", repository=args.repository or ""
    )


def qemu(*, what: str) -> tuple[Flag, Flag]:
    """``--qemu`` and ``--qemu-root``: linux_aarch64 wheels on x86_64 Linux, in an arm64 root under qemu-user
    (read by :func:`qemu_settings`)."""
    return (
        Flag(
            "--qemu",
            env="DSWHEELS_QEMU",
            action=argparse.BooleanOptionalAction,
            help=f"{what} linux_aarch64 wheels on x86_64 Linux in an arm64 Debian root under qemu-user (made once "
            "under the cache with debootstrap, as root; docs/build.md#linux-aarch64-under-qemu)",
        ),
        Flag(
            "--qemu-root",
            env="DSWHEELS_QEMU_ROOT",
            metavar="DIR",
            path=PathUse.READS,
            help="the arm64 root to run in instead of the cache's (implies --qemu)",
        ),
    )


def qemu_settings(args: argparse.Namespace) -> QemuSettings | None:
    """What ``--qemu``/``--qemu-root`` chose (None: neither)."""
    from dswheels.platforms.hosts import QemuSettings  # noqa: PLC0415 - see the imports above

    if not args.qemu and args.qemu_root is None:
        return None
    from dswheels.kernel.platform_traits import QemuCompilers  # noqa: PLC0415

    # only build has --qemu-compilers; verify compiles nothing, so it lends the root no compiler
    return QemuSettings(root=args.qemu_root, compilers=QemuCompilers(getattr(args, "qemu_compilers", "emulated")))


# ``--github OWNER/REPO``: the repository whose releases hold the published wheels
GITHUB = Flag("--github", metavar="OWNER/REPO")


# ``--report FILE``: where the CLI writes the command's result as JSON (dswheels.kernel.result), whether it
# succeeds or fails; the command only returns its data. Every command takes it.
REPORT = Flag(
    "--report",
    dest=REPORT_DEST,
    metavar="FILE",
    path=PathUse.WRITES,
    help="write the result (status, reason, duration and what the command found) as JSON",
)

# ``--trusted-root FILE``: the Sigstore root provenance is verified against (install, inspect)
TRUSTED_ROOT = Flag(
    "--trusted-root",
    to="trusted_root",
    metavar="FILE",
    path=PathUse.READS,
    help="verify provenance against this Sigstore trusted_root.json instead of the one dswheels pins "
    "(Sigstore's public-good root, dswheels/trust/)",
)
