"""A Sigstore instance of the tests' own: its CA, CT log and transparency log, and the bundles it signs.

Sigstore's and GitHub's keys cannot sign anything here, so every bundle the tests verify is made with
keys made here. What is **real**: the verifier (sigstore-python, unpatched, given this instance's
trusted root as a user gives ``--trusted-root``), pypi-attestations' PEP 740 models and GitHub
publisher rule, and every check they make. What is **synthetic**: the keys, and so the signatures.
What is **recorded** (its shape copied from a real GitHub build-provenance attestation of
``actions/attest-build-provenance``, public repository trailofbits/pypi-attestations, as
``Attestation`` JSON; and from sigstore-python 4.5.1's ``trusted_root.json``):

- the bundle: media type ``application/vnd.dev.sigstore.bundle.v0.3+json``, the certificate as
  ``rawBytes``, one Rekor v1 ``dsse``/``0.0.1`` entry with an inclusion promise (SET) and an inclusion
  proof whose checkpoint is a signed note (``rekor.sigstore.dev - <tree id>`` origin, key hint),
  a DSSE envelope of an in-toto statement;
- the certificate: a P-256 key issued by a P-384 intermediate under a P-384 root
  (``O=sigstore.dev, CN=sigstore-intermediate``), ECDSA-SHA384, ten minutes valid, empty subject,
  the workflow URI as a critical SAN, code signing, an embedded precertificate SCT, and Fulcio's
  GitHub claims 1.3.6.1.4.1.57264.1.1-1.6 (raw) and 1.8-1.22 (DER UTF8String) with GitHub's values;
- the statement: in-toto v1, ``https://slsa.dev/provenance/v1`` as GitHub writes it
  (``https://actions.github.io/buildtypes/workflow/v1``).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["FakeSigstore", "Identity"]

T0 = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.timezone.utc)  # when the fake release signed its wheels
_SCT_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
IN_TOTO = "application/vnd.in-toto+json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _key_id(key: ec.EllipticCurvePublicKey) -> bytes:
    return hashlib.sha256(_spki(key)).digest()


def _der_utf8(text: str) -> bytes:
    raw = text.encode()
    assert len(raw) < 128
    return bytes([0x0C, len(raw)]) + raw


def _der_octets(raw: bytes) -> bytes:
    if len(raw) < 128:
        return bytes([0x04, len(raw)]) + raw
    length = len(raw).to_bytes((len(raw).bit_length() + 7) // 8, "big")
    return bytes([0x04, 0x80 | len(length)]) + length + raw


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962's Merkle tree hash over leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return _node(_mth(leaves[:k]), _mth(leaves[k:]))


def _path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962's audit path for leaf ``index``, from the leaf up."""
    if len(leaves) == 1:
        return []
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < k:
        return [*_path(index, leaves[:k]), _mth(leaves[k:])]
    return [*_path(index - k, leaves[k:]), _mth(leaves[:k])]


@dataclass(frozen=True)
class Identity:
    """The GitHub Actions run a certificate names (what Fulcio copies from the OIDC token)."""

    repository: str = "octo/dswheels"
    workflow: str = ".github/workflows/wheels.yml"
    ref: str = "refs/tags/v0.19.8"
    commit: str = "5f0c6e5b2a4d0e9c1b7a3f6d8e2c4b1a0f9e8d7c"
    run_id: str = "18123456789"

    @property
    def build_config(self) -> str:
        return f"https://github.com/{self.repository}/{self.workflow}@{self.ref}"

    def claims(self) -> list[tuple[str, bytes]]:
        owner = self.repository.split("/")[0]
        issuer = "https://token.actions.githubusercontent.com"
        run = f"https://github.com/{self.repository}/actions/runs/{self.run_id}/attempts/1"
        raw = [  # 1.1-1.6: the deprecated raw claims, still issued
            ("1", issuer),
            ("2", "push"),
            ("3", self.commit),
            ("4", "wheels"),
            ("5", self.repository),
            ("6", self.ref),
        ]
        der = [
            ("8", issuer),
            ("9", self.build_config),
            ("10", self.commit),
            ("11", "github-hosted"),
            ("12", f"https://github.com/{self.repository}"),
            ("13", self.commit),
            ("14", self.ref),
            ("15", "772247423"),
            ("16", f"https://github.com/{owner}"),
            ("17", "2314423"),
            ("18", self.build_config),
            ("19", self.commit),
            ("20", "push"),
            ("21", run),
            ("22", "public"),
        ]
        return [(f"1.3.6.1.4.1.57264.1.{n}", value.encode()) for n, value in raw] + [
            (f"1.3.6.1.4.1.57264.1.{n}", _der_utf8(value)) for n, value in der
        ]


@dataclass
class FakeSigstore:
    """A root CA, an intermediate, a CT log and a Rekor log; :meth:`trusted_root` names them all."""

    name: str = "sigstore"
    root_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP384R1()))
    intermediate_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP384R1())
    )
    ct_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    rekor_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    log_index: int = 153454000

    def __post_init__(self) -> None:
        start = dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)
        end = dt.datetime(2031, 1, 1, tzinfo=dt.timezone.utc)
        root_name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sigstore.dev"),
                x509.NameAttribute(NameOID.COMMON_NAME, self.name),
            ]
        )
        self.root = (
            x509.CertificateBuilder()
            .subject_name(root_name)
            .issuer_name(root_name)
            .public_key(self.root_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(_ca_usage(), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.root_key.public_key()), critical=False)
            .sign(self.root_key, hashes.SHA384())
        )
        inter_name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sigstore.dev"),
                x509.NameAttribute(NameOID.COMMON_NAME, f"{self.name}-intermediate"),
            ]
        )
        self.intermediate = (
            x509.CertificateBuilder()
            .subject_name(inter_name)
            .issuer_name(root_name)
            .public_key(self.intermediate_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_ca_usage(), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.intermediate_key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()), critical=False
            )
            .sign(self.root_key, hashes.SHA384())
        )
        self._leaves: list[bytes] = [hashlib.sha256(f"earlier entry {n}".encode()).digest() for n in range(5)]

    # --- the trusted root -----------------------------------------------------------------------------

    def trusted_root(self) -> bytes:
        """This instance as a Sigstore ``trusted_root.json`` (the shape sigstore-python ships)."""

        def log(key: ec.EllipticCurvePrivateKey, url: str) -> dict[str, Any]:
            public = key.public_key()
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": _b64(_spki(public)),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2021-01-12T11:53:27Z"},
                },
                "logId": {"keyId": _b64(_key_id(public))},
            }

        der = serialization.Encoding.DER
        document = {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(self.rekor_key, "https://rekor.test.invalid")],
            "certificateAuthorities": [
                {
                    "subject": {"organization": "sigstore.dev", "commonName": self.name},
                    "uri": "https://fulcio.test.invalid",
                    "certChain": {
                        "certificates": [
                            {"rawBytes": _b64(self.intermediate.public_bytes(der))},
                            {"rawBytes": _b64(self.root.public_bytes(der))},
                        ]
                    },
                    "validFor": {"start": "2021-03-07T03:20:29Z"},
                }
            ],
            "ctlogs": [log(self.ct_key, "https://ctfe.test.invalid/2022")],
            "timestampAuthorities": [],
        }
        return json.dumps(document, indent=2).encode()

    # --- a signing certificate, as Fulcio issues one ------------------------------------------------------

    def _leaf(self, key: ec.EllipticCurvePrivateKey, identity: Identity, sct: bytes) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.intermediate.subject)
            .public_key(key.public_key())
            .serial_number(self._serial)
            .not_valid_before(T0)
            .not_valid_after(T0 + dt.timedelta(minutes=10))
            .add_extension(_leaf_usage(), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.intermediate_key.public_key()), critical=False
            )
            .add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity.build_config)]), critical=True
            )
        )
        for oid, value in identity.claims():
            builder = builder.add_extension(
                x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), value), critical=False
            )
        builder = builder.add_extension(x509.UnrecognizedExtension(_SCT_OID, _der_octets(sct)), critical=False)
        return builder.sign(self.intermediate_key, hashes.SHA384())

    def _sct_list(self, tbs_precert: bytes, timestamp_ms: int) -> bytes:
        """One RFC 6962 SCT over the precertificate, as the CT log signs it, in its TLS list encoding."""
        issuer_key_hash = _key_id(self.intermediate_key.public_key())
        entry = issuer_key_hash + len(tbs_precert).to_bytes(3, "big") + tbs_precert
        signed = struct.pack("!BBQH", 0, 0, timestamp_ms, 1) + entry + struct.pack("!H", 0)
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (
            bytes([0])
            + _key_id(self.ct_key.public_key())
            + struct.pack("!QH", timestamp_ms, 0)
            + bytes([4, 3])  # sha256, ecdsa
            + struct.pack("!H", len(signature))
            + signature
        )
        body = struct.pack("!H", len(sct)) + sct
        return struct.pack("!H", len(body)) + body

    def certificate(self, key: ec.EllipticCurvePrivateKey, identity: Identity) -> x509.Certificate:
        self._serial = x509.random_serial_number()
        timestamp_ms = int(T0.timestamp() * 1000) + 500
        draft = self._leaf(key, identity, self._sct_list(b"draft", timestamp_ms))
        return self._leaf(key, identity, self._sct_list(draft.tbs_precertificate_bytes, timestamp_ms))

    # --- the transparency log ----------------------------------------------------------------------------

    def _log_entry(self, body: bytes, integrated: int) -> dict[str, Any]:
        leaves = [*self._leaves, _leaf_hash(body), hashlib.sha256(b"a later entry").digest()]
        index = len(self._leaves)
        root = _mth(leaves)
        key_id = _key_id(self.rekor_key.public_key())
        note = f"rekor.sigstore.dev - 1193050959916656506\n{len(leaves)}\n{_b64(root)}\n"
        note_sig = self.rekor_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = f"{note}\n\u2014 rekor.sigstore.dev {_b64(key_id[:4] + note_sig)}\n"
        log_index = self.log_index + index
        promise = rfc8785.dumps(
            {"body": _b64(body), "integratedTime": integrated, "logID": key_id.hex(), "logIndex": log_index}
        )
        set_sig = self.rekor_key.sign(promise, ec.ECDSA(hashes.SHA256()))
        return {
            "logIndex": str(log_index),
            "logId": {"keyId": _b64(key_id)},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": str(integrated),
            "inclusionPromise": {"signedEntryTimestamp": _b64(set_sig)},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": _b64(root),
                "treeSize": str(len(leaves)),
                "hashes": [_b64(h) for h in _path(index, leaves)],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": _b64(body),
        }

    # --- a bundle, as actions/attest writes it to bundle-path -------------------------------------------------

    def attest(
        self,
        subjects: list[tuple[str, str]],
        identity: Identity | None = None,
        *,
        tamper: str = "",
    ) -> bytes:
        """GitHub's build-provenance bundle for ``subjects`` ((name, sha256) pairs), signed as ``identity``.

        ``tamper="statement"`` changes the statement after it was signed (the signature no longer holds).
        """
        identity = identity or Identity()
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self.certificate(key, identity)
        statement = json.dumps(_statement(subjects, identity), separators=(",", ":")).encode()
        pae = b"DSSEv1 %d %s %d %s" % (len(IN_TOTO), IN_TOTO.encode(), len(statement), statement)
        signature = key.sign(pae, ec.ECDSA(hashes.SHA256()))
        pem = cert.public_bytes(serialization.Encoding.PEM)
        body = rfc8785.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(statement + signature).hexdigest()},
                    "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement).hexdigest()},
                    "signatures": [{"signature": _b64(signature), "verifier": _b64(pem)}],
                },
            }
        )
        integrated = int(T0.timestamp()) + 60
        if tamper == "statement":
            statement = statement.replace(b"github-hosted", b"self-hosted!!")
        bundle = {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "tlogEntries": [self._log_entry(body, integrated)],
                "timestampVerificationData": {},
                "certificate": {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))},
            },
            "dsseEnvelope": {
                "payload": _b64(statement),
                "payloadType": IN_TOTO,
                "signatures": [{"sig": _b64(signature)}],
            },
        }
        return json.dumps(bundle).encode()


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def _statement(subjects: list[tuple[str, str]], identity: Identity) -> dict[str, Any]:
    """An in-toto statement with GitHub's SLSA provenance predicate (actions/attest, provenance mode)."""
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": name, "digest": {"sha256": sha256}} for name, sha256 in subjects],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://actions.github.io/buildtypes/workflow/v1",
                "externalParameters": {
                    "workflow": {
                        "ref": identity.ref,
                        "repository": f"https://github.com/{identity.repository}",
                        "path": identity.workflow,
                    }
                },
                "internalParameters": {
                    "github": {
                        "event_name": "push",
                        "repository_id": "772247423",
                        "repository_owner_id": "2314423",
                        "runner_environment": "github-hosted",
                    }
                },
                "resolvedDependencies": [
                    {
                        "uri": f"git+https://github.com/{identity.repository}@{identity.ref}",
                        "digest": {"gitCommit": identity.commit},
                    }
                ],
            },
            "runDetails": {
                "builder": {"id": identity.build_config},
                "metadata": {
                    "invocationId": f"https://github.com/{identity.repository}/actions/runs/{identity.run_id}/attempts/1"
                },
            },
        },
    }
