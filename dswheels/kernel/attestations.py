"""A wheel's PEP 740 provenance: made from GitHub's Sigstore bundle, judged, and verified offline.

Sigstore's own verifier (sigstore-python) does the cryptography: the signing certificate chains to a
Fulcio CA of the trusted root at the time the transparency log recorded it, its SCT is signed by a CT
log of the root, the log entry's inclusion proof, checkpoint and promise are signed by a Rekor key of
the root, the DSSE signature is the certificate's, and the log entry is the envelope's. PyPI's
``pypi-attestations`` holds the PEP 740 objects and the GitHub publisher's identity rule (the
certificate's source repository, and its build config being ``.github/workflows/wheels.yml`` of it at
the certificate's own ref or commit). What dswheels adds is what the statement must say: exactly one
subject (PEP 740's rule), named as the wheel, with the wheel's sha256.

Needs the ``provenance`` extra: import this module only after
:func:`dswheels.kernel.provenance.require_libraries`. Pure: the caller reads the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import sigstore.errors
from cryptography.x509 import Certificate
from pydantic import ValidationError
from pypi_attestations import (
    Attestation,
    AttestationBundle,
    AttestationError,
    AttestationType,
    GitHubPublisher,
    Provenance,
)
from sigstore.models import Bundle, TrustedRoot
from sigstore.verify import Verifier
from sigstore_models.trustroot import v1 as trustroot_v1

from dswheels.kernel.errors import (
    ConfigError,
    ProvenanceDigestError,
    ProvenanceError,
    ProvenanceIdentityError,
    ProvenanceSubjectError,
)
from dswheels.kernel.numbers import is_ascii_digits
from dswheels.kernel.provenance import GITHUB_ISSUER, MAX_PROVENANCE_BYTES, WORKFLOW

if TYPE_CHECKING:
    from sigstore.verify.policy import VerificationPolicy

__all__ = [
    "PINNED_ROOT",
    "Attested",
    "Signer",
    "pinned_root",
    "provenance_from_bundle",
    "provenance_problem",
    "verify_provenance",
]

PINNED_ROOT = "trust/sigstore-public-good.json"  # package data: dswheels/trust/README.md
IN_TOTO = "application/vnd.in-toto+json"

# Fulcio's certificate extensions (github.com/sigstore/fulcio docs/oid-info.md), as pypi-attestations reads them
_ISSUER = "1.3.6.1.4.1.57264.1.8"
_SOURCE_REPOSITORY = "1.3.6.1.4.1.57264.1.12"
_SOURCE_DIGEST = "1.3.6.1.4.1.57264.1.13"
_SOURCE_REF = "1.3.6.1.4.1.57264.1.14"
_BUILD_CONFIG = "1.3.6.1.4.1.57264.1.18"
_RUN = "1.3.6.1.4.1.57264.1.21"
_GITHUB = "https://github.com/"


@dataclass(frozen=True, kw_only=True, slots=True)
class Signer:
    """Who signed, as the (verified) certificate says."""

    issuer: str
    repository: str  # OWNER/REPO ("" when the certificate names no GitHub repository)
    workflow: str  # the build config: https://github.com/OWNER/REPO/.github/workflows/wheels.yml@REF
    ref: str
    commit: str
    run: str  # the run's URL

    @classmethod
    def of(cls, attestation: Attestation) -> Signer:
        claims = attestation.certificate_claims
        source = claims.get(_SOURCE_REPOSITORY, "")
        return cls(
            issuer=claims.get(_ISSUER, ""),
            repository=source.removeprefix(_GITHUB) if source.startswith(_GITHUB) else "",
            workflow=claims.get(_BUILD_CONFIG, ""),
            ref=claims.get(_SOURCE_REF, ""),
            commit=claims.get(_SOURCE_DIGEST, ""),
            run=claims.get(_RUN, ""),
        )

    def describe(self) -> str:
        commit = f" (commit {self.commit[:12]})" if self.commit else ""
        return f"{self.workflow or 'an unnamed workflow'}{commit}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Attested:
    """What a verified attestation proves of one wheel."""

    filename: str
    sha256: str
    predicate_type: str
    signer: Signer
    logged_at: int | None  # the transparency log's integrated time (Unix seconds), when it has one


# --- the pinned root ------------------------------------------------------------------------------


def pinned_root() -> bytes:
    """The trusted root shipped with dswheels (Sigstore's public-good instance: dswheels/trust/README.md)."""
    return resources.files("dswheels").joinpath(PINNED_ROOT).read_bytes()


def _verifier(root: bytes, where: str) -> Verifier:
    try:
        return Verifier(trusted_root=TrustedRoot(trustroot_v1.TrustedRoot.from_json(root)))
    except (ValueError, sigstore.errors.Error) as exc:
        raise ConfigError(
            f"{where} is not a Sigstore trusted root ({_first_line(exc)})",
            hint="give a trusted_root.json (mediaType application/vnd.dev.sigstore.trustedroot+json;version=0.1)",
        ) from None


# --- reading --------------------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _parse(data: bytes, where: str) -> Provenance:
    if len(data) > MAX_PROVENANCE_BYTES:
        raise ProvenanceError(f"{where} is larger than {MAX_PROVENANCE_BYTES:,} bytes (one attestation is ~15 KB)")
    try:
        return Provenance.model_validate_json(data)
    except ValueError as exc:  # pydantic's ValidationError, and JSON it cannot read
        raise ProvenanceError(f"{where} is not a PEP 740 provenance object: {_first_line(exc)}") from None


def _statement(attestation: Attestation) -> dict[str, object]:
    try:
        statement = json.loads(attestation.envelope.statement)
    except (ValueError, RecursionError) as exc:
        msg = f"its statement is not JSON ({_first_line(exc)})"
        raise ProvenanceError(msg) from None
    if not isinstance(statement, dict):
        msg = "its statement is not an in-toto statement (a JSON object)"
        raise ProvenanceError(msg)
    return statement


def _subject(statement: dict[str, object], *, filename: str, sha256: str) -> None:
    """The statement attests exactly this wheel: one subject (PEP 740), its name, its sha256."""
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1:
        count = len(subjects) if isinstance(subjects, list) else 0
        msg = f"its statement attests {count} files, not exactly one (PEP 740: one attestation per file)"
        raise ProvenanceSubjectError(msg)
    subject = subjects[0]
    name = subject.get("name") if isinstance(subject, dict) else None
    digest = subject.get("digest") if isinstance(subject, dict) else None
    attested = digest.get("sha256") if isinstance(digest, dict) else None
    if name != filename:
        shown = name[:200] if isinstance(name, str) else repr(name)[:200]
        msg = f"it attests another file: {shown}"
        raise ProvenanceSubjectError(msg)
    if attested != sha256:
        shown = attested[:64] if isinstance(attested, str) else "none"
        msg = f"it attests other bytes: sha256 {shown}, the wheel's is {sha256}"
        raise ProvenanceDigestError(msg)


def provenance_problem(data: bytes, *, filename: str, sha256: str) -> str:
    """Why ``data`` is not a provenance object for this wheel ("" when it is one), without its signatures:
    what ``publish`` and ``index`` check before they serve it (``install`` verifies it)."""
    try:
        provenance = _parse(data, "the file")
        attestations = [a for b in provenance.attestation_bundles for a in b.attestations]
        if not attestations:
            return "it holds no attestation"
        for attestation in attestations:
            _subject(_statement(attestation), filename=filename, sha256=sha256)
    except ProvenanceError as exc:
        return exc.message
    return ""


# --- made from GitHub's bundle (publish) ---------------------------------------------------------------


def _workflow_file(build_config: str) -> str:
    """``https://github.com/O/R/.github/workflows/wheels.yml@refs/tags/v1`` -> ``wheels.yml``."""
    path = build_config.split("@", 1)[0]
    marker = "/.github/workflows/"
    return path.split(marker, 1)[1] if marker in path else ""


def provenance_from_bundle(bundle: bytes, *, filename: str, sha256: str) -> bytes:
    """GitHub's Sigstore bundle for one wheel (``actions/attest``'s ``bundle-path``), as the PEP 740
    provenance object served beside the wheel: the attestation under its GitHub publisher.

    ``ValueError`` says why it is not one: not a bundle, not a GitHub Actions signature, or a
    statement that does not attest exactly this wheel (a multi-subject attestation included). The
    signature is not verified here (``install`` does that, against the trusted root); the output
    depends only on the bundle, so publishing it again gives the same bytes.
    """
    if len(bundle) > MAX_PROVENANCE_BYTES:
        msg = f"larger than {MAX_PROVENANCE_BYTES:,} bytes"
        raise ValueError(msg)
    try:
        attestation = Attestation.from_bundle(Bundle.from_json(bundle))
    except (ValueError, AttestationError, sigstore.errors.Error) as exc:
        msg = f"not a Sigstore bundle of a DSSE attestation ({_first_line(exc)})"
        raise ValueError(msg) from None
    try:
        _subject(_statement(attestation), filename=filename, sha256=sha256)
    except ProvenanceError as exc:
        raise ValueError(exc.message) from None
    signer = Signer.of(attestation)
    workflow = _workflow_file(signer.workflow)
    if signer.issuer != GITHUB_ISSUER or not signer.repository or not workflow:
        msg = f"not signed by a GitHub Actions workflow (issuer {signer.issuer or 'none'})"
        raise ValueError(msg)
    publisher = GitHubPublisher(repository=signer.repository, workflow=workflow)
    provenance = Provenance(attestation_bundles=[AttestationBundle(publisher=publisher, attestations=[attestation])])
    return provenance.model_dump_json().encode("utf-8")


# --- verified (install, inspect) ----------------------------------------------------------------------


class _Watched:
    """A verification policy that remembers whether it was the one that refused (the identity, exit 14),
    rather than the chain, log or signature (exit 11): sigstore raises one error type for both."""

    def __init__(self, inner: VerificationPolicy | None) -> None:
        self.inner = inner
        self.refused = ""

    def verify(self, cert: Certificate) -> None:
        if self.inner is None:  # inspect: any identity, which it then shows
            return
        try:
            self.inner.verify(cert)
        except sigstore.errors.VerificationError as exc:
            self.refused = _first_line(exc)
            raise


def _policy(repository: str | None) -> VerificationPolicy | None:
    if repository is None:
        return None
    # pypi-attestations' GitHub publisher rule: the issuer is GitHub Actions, the source repository is this
    # one, and the build config is its .github/workflows/wheels.yml at the certificate's own ref or commit
    return GitHubPublisher(repository=repository, workflow=WORKFLOW)._as_policy()  # noqa: SLF001 - the library's rule


def _verify_one(
    attestation: Attestation, verifier: Verifier, *, filename: str, sha256: str, repository: str | None
) -> Attested:
    try:
        bundle = attestation.to_bundle()
    except (ValueError, AttestationError, sigstore.errors.Error) as exc:
        msg = f"it is not a Sigstore attestation ({_first_line(exc)})"
        raise ProvenanceError(msg) from None
    watched = _Watched(_policy(repository))
    try:
        payload_type, payload = verifier.verify_dsse(bundle, watched)
    except (sigstore.errors.Error, ValidationError, ValueError) as exc:
        signer = Signer.of(attestation)
        if watched.refused:
            msg = f"it is signed by {signer.describe()}, not by {repository}'s {WORKFLOW} ({watched.refused})"
            raise ProvenanceIdentityError(msg) from None
        msg = f"its signature does not verify against the trusted root ({_first_line(exc)})"
        raise ProvenanceError(msg) from None
    if payload_type != IN_TOTO:
        msg = f"it signs a {payload_type[:100]}, not an in-toto statement"
        raise ProvenanceError(msg)
    try:
        statement = json.loads(payload)
    except (ValueError, RecursionError):
        statement = None
    if not isinstance(statement, dict):
        msg = "its signed statement is not an in-toto statement"
        raise ProvenanceError(msg)
    _subject(statement, filename=filename, sha256=sha256)
    predicate = statement.get("predicateType")
    if predicate not in {t.value for t in AttestationType}:
        msg = f"its statement is of an unknown type ({str(predicate)[:200]})"
        raise ProvenanceError(msg)
    entries = attestation.verification_material.transparency_entries
    logged = entries[0].get("integratedTime") if entries else None
    return Attested(
        filename=filename,
        sha256=sha256,
        predicate_type=str(predicate),
        signer=Signer.of(attestation),
        logged_at=_logged_at(logged),
    )


def _logged_at(value: object) -> int | None:
    """Rekor's ``integratedTime`` (seconds, a number or its digits): ASCII digits only; ``str.isdigit`` took
    ``"²"``, which ``int()`` then refused, and ``str()`` of a 5,000-digit number raises."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value < 2**63 else None
    if isinstance(value, str) and is_ascii_digits(value) and len(value) <= 19:
        return int(value)
    return None


def verify_provenance(
    data: bytes,
    *,
    filename: str,
    sha256: str,
    repository: str | None,
    where: str,
    root: bytes | None = None,
    root_where: str = "the trusted root",
) -> Attested:
    """Verify the provenance object ``data`` (from ``where``) of the wheel ``filename`` with ``sha256``.

    ``repository`` (OWNER/REPO) is whose ``wheels.yml`` must have signed it; None accepts any
    identity, which the result names (``inspect``). ``root`` is a Sigstore trusted root (default: the
    pinned one). One attestation that proves everything is enough; otherwise the first one's failure is
    raised: :class:`ProvenanceIdentityError` (14), :class:`ProvenanceSubjectError` (13),
    :class:`ProvenanceDigestError` (12), else :class:`ProvenanceError` (11).
    """
    verifier = _verifier(root if root is not None else pinned_root(), root_where)
    provenance = _parse(data, where)
    failures: list[ProvenanceError] = []
    for bundle in provenance.attestation_bundles:
        for attestation in bundle.attestations:
            try:
                return _verify_one(attestation, verifier, filename=filename, sha256=sha256, repository=repository)
            except ProvenanceError as exc:  # noqa: PERF203 - one attestation's failure, then the next
                failures.append(exc)
    if not failures:
        msg = f"{where} holds no attestation"
        raise ProvenanceError(msg)
    first = failures[0]
    others = [f"attestation {n}: {f.message}" for n, f in enumerate(failures[1:], start=2)]
    raise type(first)(
        f"{where} does not vouch for {filename}: {first.message}",
        details="\n".join(others) or None,
        hint="nothing was installed. Install only wheels whose provenance verifies; report a wheel whose "
        "attestation fails to the index's maintainers",
    )
