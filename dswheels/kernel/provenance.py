"""Where a wheel's provenance (PEP 740) lives, and who is expected to have signed it. Stdlib only.

The release workflow attests each wheel (GitHub's build provenance, one attestation per wheel) and
places GitHub's Sigstore bundle beside it as ``<wheel>.sigstore.json``; ``dswheels publish`` turns it
into the PEP 740 provenance object published as ``<wheel>.provenance``; ``dswheels index`` serves that
beside the wheel, named by ``data-provenance`` on its link; ``dswheels install --require-provenance``
verifies it before pip runs. The work with the signatures is :mod:`dswheels.kernel.attestations`,
which needs the ``provenance`` extra (sigstore, pypi-attestations): :func:`require_libraries` says so
before anything is read.
"""

from __future__ import annotations

import importlib.util
import re
from urllib.parse import urlsplit

from dswheels.kernel.errors import ConfigError

__all__ = [
    "BUNDLE_SUFFIX",
    "GITHUB_ISSUER",
    "MAX_PROVENANCE_BYTES",
    "PROVENANCE_SUFFIX",
    "WORKFLOW",
    "bundle_name",
    "provenance_name",
    "repository_of_site",
    "repository_problem",
    "require_libraries",
]

PROVENANCE_SUFFIX = ".provenance"  # PEP 740's example name, and pypi-attestations' own
BUNDLE_SUFFIX = ".sigstore.json"  # GitHub's bundle for one wheel (actions/attest's bundle-path), beside it
MAX_PROVENANCE_BYTES = 1024 * 1024  # one attestation is ~15 KB (certificate, statement, log entry)
WORKFLOW = "wheels.yml"  # the workflow that attests: .github/workflows/wheels.yml (a fork keeps the name)
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"

_REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")


def provenance_name(filename: str) -> str:
    """``X.whl``'s PEP 740 provenance object is ``X.whl.provenance``."""
    return f"{filename}{PROVENANCE_SUFFIX}"


def bundle_name(filename: str) -> str:
    """Where the workflow places GitHub's Sigstore bundle for ``X.whl``: ``X.whl.sigstore.json`` beside it."""
    return f"{filename}{BUNDLE_SUFFIX}"


def repository_problem(value: str) -> str:
    """Why ``value`` is not an OWNER/REPO GitHub could have ("" when it is one).

    >>> repository_problem("octo/dswheels"), bool(repository_problem("octo/dswheels/x"))
    ('', True)
    """
    if _REPOSITORY.fullmatch(value) and value.split("/")[1] not in (".", ".."):
        return ""
    return "not OWNER/REPO (letters, digits and '-' for the owner; '.', '_' and '-' too for the repository)"


def repository_of_site(url: str) -> str | None:
    """The repository a GitHub Pages site belongs to: ``https://OWNER.github.io/REPO/...`` -> OWNER/REPO.

    Only ``OWNER`` can publish at ``OWNER.github.io``, so the URL a user typed names whose
    signature to expect; any other site (a custom domain, a directory) names none.

    >>> repository_of_site("https://octo.github.io/dswheels/"), repository_of_site("https://wheels.example.org/")
    ('octo/dswheels', None)
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    owner, dot, domain = host.partition(".")
    repo = parts.path.strip("/").split("/", 1)[0]
    if parts.scheme != "https" or not dot or domain != "github.io" or not repo:
        return None
    candidate = f"{owner}/{repo}"
    return candidate if not repository_problem(candidate) else None


def require_libraries(what: str) -> None:
    """``ConfigError`` (exit 2) when the ``provenance`` extra is not installed: ``what`` needs it."""
    missing = [name for name in ("sigstore", "pypi_attestations") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"{what} needs Sigstore's verifier, which is not installed ({', '.join(missing)})",
            hint='install dswheels with its provenance extra: pip install "dswheels[provenance]"',
        )
