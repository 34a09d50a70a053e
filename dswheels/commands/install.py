"""``dswheels install``: install the exact published wheel for this environment, then verify it."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from dswheels.commands.common import Subparsers, formatter
from dswheels.commands.doctor import add_target_arguments, parse_deepspeed
from dswheels.core.compat import Compat, load_compat
from dswheels.core.doctor import IndexView, diagnose
from dswheels.core.doctor.checks_linux_runtime import describe_system, fix_for, judge_system, need_words
from dswheels.core.doctor.facts import LinuxRuntime
from dswheels.core.index.files import IndexFile
from dswheels.core.naming import wheel_version
from dswheels.effects.index_read import check_followable, download_wheel, read_index, read_manifest
from dswheels.effects.install import choose_installer, install_argv, install_wheel, quick_verify
from dswheels.effects.probe import collect, current_environment
from dswheels.errors import ConfigError, EnvironmentMismatchError
from dswheels.log import get_reporter

__all__ = ["register", "run"]

DESCRIPTION = """\
Detect the environment (the Python that will use DeepSpeed: this interpreter or --python):
its Python, platform, torch MAJOR.MINOR and torch's CUDA. Pick the one wheel of the index
built for exactly that (version and label, e.g. deepspeed-0.19.8+cu128torch2.9-cp312-cp312-
win_amd64.whl), install it with pip (or uv), then verify it: every op the wheel marks as
prebuilt must load without JIT compilation.

On Linux, the wheel's build manifest (beside it in the index) says which glibc and libstdc++
symbol versions its extensions need; a wheel that needs more than the environment loads is
not installed (exit 9, with what to do), --dry-run included. Without a manifest the install
goes on with a notice.

When no wheel fits, it says why and lists the nearest published cells (e.g. "torch 2.6 is
installed; wheels exist for torch 2.5 and 2.7 with cu124") and exits with code 9.

examples:
  dswheels install --index https://example.org/dswheels
  dswheels install --index https://example.org/dswheels --python .venv/bin/python
  dswheels install --index ./site --deepspeed 0.19.7 --dry-run
  DSWHEELS_INDEX=https://example.org/dswheels dswheels install"""


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "install",
        help="install the published wheel that fits this environment, then verify it",
        description=DESCRIPTION,
        formatter_class=formatter,
    )
    add_target_arguments(p)
    p.add_argument(
        "--installer",
        choices=("auto", "pip", "uv"),
        default="auto",
        help="pip in the target environment, or uv (auto: pip when the target has it, else uv)",
    )
    p.add_argument("--dry-run", action="store_true", help="pick the wheel and print the install command only")
    p.add_argument("--no-verify", action="store_true", help="skip loading the ops after installing")
    p.set_defaults(func=run)


def check_runtime(lr: LinuxRuntime, wheel: IndexFile, compat: Compat) -> None:
    """Refuse a Linux wheel whose extensions need a newer glibc/libstdc++ than the target loads.

    The need is the wheel's build manifest's ``runtime`` (read from beside it in the index);
    without one, a notice says so and the install goes on.
    """
    reporter = get_reporter()
    published = read_manifest(wheel)
    system = describe_system(lr)
    if published.runtime is None:
        reporter.info(
            f"notice: no glibc/libstdc++ check for {wheel.filename}: {published.note} ({published.manifest_url}); "
            "installing anyway",
        )
        promise = judge_system(lr, compat.linux_runtime_floor, "the published Linux wheels")
        if promise.problems:
            reporter.warning(
                f"{promise.needs} {need_words(promise.need, compat.libstdcxx)} and this system has {system}: "
                "its ops may fail to load (`dswheels doctor` says more)",
            )
        return
    judgement = judge_system(lr, published.runtime, f"the wheel {wheel.filename}")
    need = published.runtime.describe(compat.libstdcxx)
    if judgement.problems:
        raise EnvironmentMismatchError(
            f"{wheel.filename} needs a newer glibc/libstdc++ than this environment loads; nothing was installed",
            details=f"its extensions need {need} (its build manifest, {published.manifest_url})\n"
            f"this system has {system}\n"
            f"missing: {', '.join(judgement.problems)}: importing an op would fail with "
            f'"version `{judgement.problems[0].split(" ")[0]}\' not found"',
            hint=fix_for(judgement),
        )
    if judgement.unknown:
        reporter.warning(
            f"cannot tell whether this system loads {wheel.filename}: it needs {need}; this system has {system}"
            + (f" ({lr.error})" if lr.error else ""),
        )
        return
    reporter.info(f"glibc/libstdc++: the wheel needs {need}; this system has {system}")


def run(args: argparse.Namespace) -> int:
    env = current_environment()
    index = args.index or env.get("DSWHEELS_INDEX")
    if not index:
        raise ConfigError(
            "no index given",
            hint="pass --index URL (the published site's base URL or directory) or set DSWHEELS_INDEX",
        )
    reporter = get_reporter()
    compat = load_compat()
    deepspeed = parse_deepspeed(args.deepspeed)
    python = args.python or sys.executable
    with reporter.group("detect the environment"):
        facts = collect(python, env, full=False)
    with reporter.group(f"read the index {index}"):
        page, files = read_index(index)
        reporter.info(f"{page}: {len(files)} files")
    report = diagnose(facts, compat, deepspeed=deepspeed, index=IndexView(url=index, files=files))
    verdict = report.verdict
    if verdict.cell is None:
        raise EnvironmentMismatchError(
            f"cannot tell which wheel this environment needs: {verdict.no_cell}",
            hint=f"run `dswheels doctor --python {python}` for every check and its fix",
        )
    if verdict.wheel is None:
        lines = list(verdict.nearest)
        lines.extend(f"[{r.rule}] {r.message}" + (f" ({r.fix})" if r.fix else "") for r in verdict.rules)
        raise EnvironmentMismatchError(
            f"no published wheel fits this environment ({verdict.cell_id})",
            details="\n".join(lines),
            hint="install a torch the index has wheels for, or build one: "
            f"`dswheels doctor --python {python}` says whether a local build would work",
        )
    wheel = verdict.wheel
    version = wheel_version(verdict.cell)
    reporter.info(f"this environment is {verdict.cell_id}: {wheel.filename}")
    check_followable(wheel)  # before anything else is read from where it points
    if facts.linux_runtime is not None:
        check_runtime(facts.linux_runtime, wheel, compat)
    installer = "pip" if args.dry_run and args.installer == "auto" else choose_installer(python, args.installer, env)
    if args.dry_run:
        sys.stdout.write(f"# download {wheel.url} (sha256 {wheel.sha256}), then:\n")
        sys.stdout.write(shlex.join(install_argv(python, wheel.filename, installer)) + "\n")
        return 0
    installed = facts.deepspeed.version if facts.deepspeed else None
    with reporter.group(f"install {wheel.filename}"):
        if installed == version:
            reporter.info(f"deepspeed {version} is already installed")
        with tempfile.TemporaryDirectory(prefix="dswheels-install-") as tmp:
            path = download_wheel(wheel, Path(tmp))
            reporter.info(f"downloaded {wheel.url} (sha256 {wheel.sha256})")
            install_wheel(python, path, installer=installer, env=env)
    if args.no_verify:
        reporter.info(f"installed deepspeed {version} (not verified: --no-verify)")
        return 0
    with reporter.group("verify: load every prebuilt op with an empty TORCH_EXTENSIONS_DIR"):
        result = quick_verify(python, expected_version=version, accelerator=verdict.cell.variant.accelerator, env=env)
    ops = ", ".join(sorted(result.loaded)) or "none"
    reporter.info(
        f"installed deepspeed {version} into {python}: {len(result.loaded)} prebuilt ops load without JIT ({ops})",
    )
    return 0
