"""The install step (``dswheels install``): detect the environment, pick the one published wheel
built for exactly it, verify its provenance (``--require-provenance``), check its glibc/libstdc++ need
(Linux), install it, and load its ops."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from dswheels.doctor import IndexView, Verdict, diagnose
from dswheels.doctor.checks_linux_runtime import describe_system, fix_for, judge_system, need_words
from dswheels.doctor.effects.collect_facts import collect, current_environment
from dswheels.doctor.machine_facts import LinuxRuntime
from dswheels.host.files import read_bounded
from dswheels.host.log import get_reporter
from dswheels.host.wheel_file import read_admitted
from dswheels.install.effects.install_wheel import (
    Installer,
    choose_installer,
    install_argv,
    install_wheel,
    quick_verify,
)
from dswheels.kernel.compat import Compat, load_compat
from dswheels.kernel.errors import ConfigError, EnvironmentMismatchError, SourceError
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.naming import wheel_version
from dswheels.kernel.provenance import WORKFLOW, repository_of_site, repository_problem, require_libraries
from dswheels.kernel.versions import VersionTuple
from dswheels.stores.served_index import check_followable, download_wheel, read_index, read_manifest, read_provenance

__all__ = ["InstallOptions", "InstallOutcome", "check_runtime", "install_published"]


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallOptions:
    index: str  # the published site's base URL or directory
    python: str | None = None  # the environment's interpreter (None: the one running dswheels)
    deepspeed: VersionTuple | None = None  # the release to install (None: the newest that fits)
    installer: Installer = Installer.AUTO
    dry_run: bool = False  # pick the wheel, install nothing
    verify: bool = True  # load every prebuilt op after installing
    # verify the wheel's PEP 740 provenance before anything is downloaded: whose wheels.yml must have signed it
    # (OWNER/REPO: --provenance-repository; "" = the repository of the GitHub Pages site --index names); None: not
    # required
    require_provenance: str | None = None
    trusted_root: Path | None = None  # a Sigstore trusted_root.json instead of the pinned one


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallOutcome:
    wheel: IndexFile
    python: str
    version: str  # the DeepSpeed version with its local label
    command: tuple[str, ...]  # what installs the downloaded wheel
    installed: bool  # False: a dry run
    loaded: tuple[str, ...] | None  # the prebuilt ops that load without JIT (None: not verified)
    provenance: str | None = None  # who signed the wheel's verified provenance (None: not required)


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


def _pick(verdict: Verdict, python: str) -> IndexFile:
    """The verdict's wheel, or why there is none."""
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
    return verdict.wheel


def expected_repository(options: InstallOptions) -> str | None:
    """Whose signature ``--require-provenance`` expects: the repository given, else the one whose GitHub
    Pages site ``--index`` is; None when not required. ``ConfigError`` when neither names one."""
    if options.require_provenance is None:
        return None
    repository = options.require_provenance or repository_of_site(options.index)
    if repository is None:
        raise ConfigError(
            f"--require-provenance: the index {options.index} is no GitHub Pages site (https://OWNER.github.io/REPO/), "
            "so it does not say whose signature to expect",
            hint="name the repository that publishes the wheels: --provenance-repository OWNER/REPO",
        )
    if problem := repository_problem(repository):
        raise ConfigError(f"--provenance-repository {repository!r}: {problem}")
    return repository


def check_provenance(wheel: IndexFile, *, repository: str, trusted_root: Path | None) -> str:
    """Verify the provenance the index serves for ``wheel`` (before anything of it is downloaded: the
    download is then checked against the same sha256 the attestation names); who signed it, in words.

    Raises the :class:`~dswheels.kernel.errors.ProvenanceError` family (exit 11-14).
    """
    require_libraries("--require-provenance")
    from dswheels.kernel.attestations import verify_provenance  # noqa: PLC0415 - the provenance extra

    root = None
    if trusted_root is not None:
        try:
            root = read_bounded(trusted_root)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--trusted-root {trusted_root}: {exc}") from None
    url, data = read_provenance(wheel)
    attested = verify_provenance(
        data,
        filename=wheel.filename,
        sha256=wheel.sha256,
        repository=repository,
        where=url,
        root=root,
        root_where=str(trusted_root) if trusted_root else "the pinned trusted root",
    )
    return f"{attested.signer.describe()}, {attested.predicate_type}"


def install_published(options: InstallOptions) -> InstallOutcome:
    repository = expected_repository(options)  # bad input first, before the environment is probed
    if repository is not None:
        require_libraries("--require-provenance")
    env = current_environment()
    reporter = get_reporter()
    compat = load_compat()
    python = options.python or sys.executable
    with reporter.group("detect the environment"):
        facts = collect(python, env, full=False)
    with reporter.group(f"read the index {options.index}"):
        page, files = read_index(options.index)
        reporter.info(f"{page}: {len(files)} files")
    report = diagnose(facts, compat, deepspeed=options.deepspeed, index=IndexView(url=options.index, files=files))
    verdict = report.verdict
    wheel = _pick(verdict, python)
    assert verdict.cell is not None  # noqa: S101 - a verdict with a wheel has its cell
    version = wheel_version(verdict.cell)
    reporter.info(f"this environment is {verdict.cell_id}: {wheel.filename}")
    check_followable(wheel)  # before anything else is read from where it points
    signed = None
    if repository is not None:
        with reporter.group(f"provenance: {wheel.filename} signed by {repository}'s {WORKFLOW}"):
            signed = check_provenance(wheel, repository=repository, trusted_root=options.trusted_root)
            reporter.info(f"provenance verified: {signed}")
    if facts.linux_runtime is not None:
        check_runtime(facts.linux_runtime, wheel, compat)
    auto_pip = options.dry_run and options.installer is Installer.AUTO
    installer = Installer.PIP if auto_pip else choose_installer(python, options.installer, env)
    command = tuple(install_argv(python, wheel.filename, installer))
    outcome = InstallOutcome(
        wheel=wheel, python=python, version=version, command=command, installed=False, loaded=None, provenance=signed
    )
    if options.dry_run:
        return outcome
    installed = facts.deepspeed.version if facts.deepspeed else None
    with reporter.group(f"install {wheel.filename}"):
        if installed == version:
            reporter.info(f"deepspeed {version} is already installed")
        with tempfile.TemporaryDirectory(prefix="dswheels-install-") as tmp:
            path = download_wheel(wheel, Path(tmp))
            reporter.info(f"downloaded {wheel.url} (sha256 {wheel.sha256})")
            # before pip sees it: a wheel that is not what its name says would change the environment
            read_admitted(
                path,
                wheel.published,
                error=SourceError,
                hint="the index serves a wheel that is not what its name says: report it to the index's "
                "maintainers. Nothing was installed; this environment is as it was",
            )
            install_wheel(python, path, installer=installer, env=env)
    if not options.verify:
        return replace(outcome, installed=True)
    with reporter.group("verify: load every prebuilt op with an empty TORCH_EXTENSIONS_DIR"):
        result = quick_verify(python, expected_version=version, accelerator=verdict.cell.variant.accelerator, env=env)
    return replace(outcome, installed=True, loaded=tuple(sorted(result.loaded)))
