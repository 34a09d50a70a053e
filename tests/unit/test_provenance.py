"""PEP 740 provenance: the pinned root, GitHub's bundle made into a provenance object, and what each
verification refuses with which exit code; the page attribute and the publisher's checks.

The bundles come from the tests' own Sigstore instance (tests/support/sigstore_fake.py: synthetic keys,
GitHub's shape); the verifier is sigstore-python itself, given that instance's trusted root.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from cryptography import x509

from dswheels.index.pages import render_site
from dswheels.install.step import InstallOptions, expected_repository
from dswheels.kernel import provenance as names
from dswheels.kernel.attestations import (
    PINNED_ROOT,
    pinned_root,
    provenance_from_bundle,
    provenance_problem,
    verify_provenance,
)
from dswheels.kernel.errors import (
    ConfigError,
    ProvenanceDigestError,
    ProvenanceError,
    ProvenanceIdentityError,
    ProvenanceSubjectError,
    PublishError,
)
from dswheels.kernel.index_files import IndexFile, parse_project_page
from dswheels.kernel.naming import parse_wheel
from dswheels.publish.step import collect_wheels
from dswheels.stores.outgoing import outgoing_files
from tests.conftest import ROOT
from tests.support.sigstore_fake import FakeSigstore, Identity
from tests.support.wheels import write_deepspeed_wheel

NAME = "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-linux_x86_64.whl"
OTHER = "deepspeed-0.19.8+cu128torch2.9-cp311-cp311-linux_x86_64.whl"
SHA = hashlib.sha256(b"the wheel's bytes").hexdigest()


@pytest.fixture(scope="module")
def fake() -> FakeSigstore:
    return FakeSigstore()


@pytest.fixture(scope="module")
def good(fake: FakeSigstore) -> bytes:
    return provenance_from_bundle(fake.attest([(NAME, SHA)]), filename=NAME, sha256=SHA)


def _verify(data: bytes, fake: FakeSigstore, **changes: str) -> object:
    args = {"filename": NAME, "sha256": SHA, "repository": "octo/dswheels"} | changes
    return verify_provenance(data, where="provenance", root=fake.trusted_root(), **args)


def test_the_pinned_root_is_sigstores_public_good_root_as_recorded() -> None:
    readme = (ROOT / "dswheels" / "trust" / "README.md").read_text(encoding="utf-8")
    digest = hashlib.sha256(pinned_root()).hexdigest()
    assert f"sha256 `{digest}`" in readme
    root = json.loads(pinned_root())
    assert root["mediaType"] == "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
    assert {ca["uri"] for ca in root["certificateAuthorities"]} == {"https://fulcio.sigstore.dev"}
    assert "https://rekor.sigstore.dev" in {t["baseUrl"] for t in root["tlogs"]}
    assert PINNED_ROOT == "trust/sigstore-public-good.json"


def test_a_provenance_object_holds_githubs_attestation_under_its_publisher(good: bytes) -> None:
    provenance = json.loads(good)
    assert provenance["version"] == 1
    (bundle,) = provenance["attestation_bundles"]
    assert bundle["publisher"] == {
        "kind": "GitHub",
        "repository": "octo/dswheels",
        "workflow": "wheels.yml",
        "environment": None,
    }
    (attestation,) = bundle["attestations"]
    assert set(attestation) == {"version", "verification_material", "envelope"}
    statement = json.loads(base64.b64decode(attestation["envelope"]["statement"]))
    assert statement["subject"] == [{"name": NAME, "digest": {"sha256": SHA}}]
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    cert = x509.load_der_x509_certificate(base64.b64decode(attestation["verification_material"]["certificate"]))
    assert cert.issuer.rfc4514_string() == "CN=sigstore-intermediate,O=sigstore.dev"
    (entry,) = attestation["verification_material"]["transparency_entries"]
    assert entry["kindVersion"] == {"kind": "dsse", "version": "0.0.1"}
    assert provenance_problem(good, filename=NAME, sha256=SHA) == ""


def test_the_same_bundle_gives_the_same_bytes(fake: FakeSigstore) -> None:
    """Published files never change: publishing the same attestation again is a no-op, not a conflict."""
    bundle = fake.attest([(NAME, SHA)])
    assert provenance_from_bundle(bundle, filename=NAME, sha256=SHA) == provenance_from_bundle(
        bundle, filename=NAME, sha256=SHA
    )


def test_a_verified_attestation_names_its_signer(good: bytes, fake: FakeSigstore) -> None:
    attested = _verify(good, fake)
    assert attested.signer.repository == "octo/dswheels"  # type: ignore[attr-defined]
    assert attested.signer.workflow == Identity().build_config  # type: ignore[attr-defined]
    assert attested.logged_at is not None  # type: ignore[attr-defined]


REFUSALS = [
    ({"sha256": "0" * 64}, ProvenanceDigestError, 12, "it attests other bytes"),
    ({"filename": OTHER}, ProvenanceSubjectError, 13, f"it attests another file: {NAME}"),
    ({"repository": "other/dswheels"}, ProvenanceIdentityError, 14, "not by other/dswheels's wheels.yml"),
]


@pytest.mark.parametrize("case", REFUSALS, ids=["tampered", "another-wheel", "another-identity"])
def test_each_way_a_valid_signature_does_not_vouch_has_its_code(
    good: bytes, fake: FakeSigstore, case: tuple[dict[str, str], type[ProvenanceError], int, str]
) -> None:
    changes, error, code, says = case
    with pytest.raises(error) as raised:
        _verify(good, fake, **changes)
    assert type(raised.value) is error
    assert raised.value.exit_code == code
    assert says in raised.value.message


def test_a_workflow_other_than_wheels_yml_is_another_identity(fake: FakeSigstore) -> None:
    bundle = fake.attest([(NAME, SHA)], Identity(workflow=".github/workflows/other.yml"))
    with pytest.raises(ProvenanceIdentityError):
        _verify(provenance_from_bundle(bundle, filename=NAME, sha256=SHA), fake)


def test_what_does_not_verify_is_exit_11(good: bytes, fake: FakeSigstore) -> None:
    tampered = provenance_from_bundle(fake.attest([(NAME, SHA)], tamper="statement"), filename=NAME, sha256=SHA)
    with pytest.raises(ProvenanceError) as raised:
        _verify(tampered, fake)
    assert (raised.value.exit_code, type(raised.value)) == (11, ProvenanceError)
    assert "does not verify against the trusted root (DSSE: invalid signature)" in raised.value.message
    with pytest.raises(ProvenanceError) as raised:  # the pinned root: this instance's CA is not Sigstore's
        verify_provenance(good, filename=NAME, sha256=SHA, repository="octo/dswheels", where="p")
    assert type(raised.value) is ProvenanceError
    stranger = FakeSigstore()  # a root of its own, as a forger would have
    forged = provenance_from_bundle(stranger.attest([(NAME, SHA)]), filename=NAME, sha256=SHA)
    with pytest.raises(ProvenanceError) as raised:
        _verify(forged, fake)
    assert type(raised.value) is ProvenanceError
    for junk in (b"", b"{}", b"[]", b'{"version": 1, "attestation_bundles": []}', b"{" * 100_000, b"\xff" * 10):
        with pytest.raises(ProvenanceError) as raised:
            _verify(junk, fake)
        assert type(raised.value) is ProvenanceError
    with pytest.raises(ProvenanceError, match="larger than"):
        _verify(b" " * (names.MAX_PROVENANCE_BYTES + 1), fake)


def test_a_trusted_root_that_is_none_is_bad_input(good: bytes) -> None:
    with pytest.raises(ConfigError, match="is not a Sigstore trusted root"):
        verify_provenance(good, filename=NAME, sha256=SHA, repository=None, where="p", root=b"{}", root_where="r.json")


def test_githubs_multi_subject_attestation_is_not_one_pep_740_accepts(fake: FakeSigstore) -> None:
    """actions/attest with a glob signs every wheel in one statement; PEP 740 (and pypi-attestations) take
    one subject per attestation, so the workflow attests each wheel on its own."""
    both = fake.attest([(NAME, SHA), (OTHER, SHA)])
    with pytest.raises(ValueError, match="attests 2 files, not exactly one"):
        provenance_from_bundle(both, filename=NAME, sha256=SHA)


def test_a_bundle_for_another_wheel_or_not_from_github_is_not_published(fake: FakeSigstore) -> None:
    with pytest.raises(ValueError, match="attests another file"):
        provenance_from_bundle(fake.attest([(OTHER, SHA)]), filename=NAME, sha256=SHA)
    with pytest.raises(ValueError, match="attests other bytes"):
        provenance_from_bundle(fake.attest([(NAME, "1" * 64)]), filename=NAME, sha256=SHA)
    with pytest.raises(ValueError, match="not a Sigstore bundle"):
        provenance_from_bundle(b'{"mediaType": "x"}', filename=NAME, sha256=SHA)


def test_publish_carries_the_bundle_beside_a_wheel_as_its_provenance(tmp_path: Path, fake: FakeSigstore) -> None:
    wheel = write_deepspeed_wheel(tmp_path, variant="cu128", torch="2.9")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (local,) = collect_wheels([wheel])
    assert [f.name for f in outgoing_files(local)] == [wheel.name, f"{wheel.name}.metadata"]
    bundle = tmp_path / f"{wheel.name}.sigstore.json"
    bundle.write_bytes(fake.attest([(wheel.name, sha)]))
    files = {f.name: f for f in outgoing_files(local)}
    provenance = files[f"{wheel.name}.provenance"].data
    assert provenance is not None
    assert provenance == provenance_from_bundle(bundle.read_bytes(), filename=wheel.name, sha256=sha)
    bundle.write_bytes(fake.attest([(wheel.name, "2" * 64)]))  # the wheel was rebuilt after it was attested
    with pytest.raises(PublishError, match="is no attestation of") as raised:
        outgoing_files(local)
    assert raised.value.exit_code == 7
    bundle.unlink()  # an already made provenance object beside it (publishing a published directory again)
    (tmp_path / f"{wheel.name}.provenance").write_bytes(provenance)
    assert {f.name: f.data for f in outgoing_files(local)}[f"{wheel.name}.provenance"] == provenance


def test_without_the_extra_provenance_is_bad_input_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "sigstore" else real(name))
    with pytest.raises(ConfigError, match="not installed") as raised:
        names.require_libraries("--require-provenance")
    assert raised.value.hint == 'install dswheels with its provenance extra: pip install "dswheels[provenance]"'


def test_the_expected_repository_comes_from_the_flag_or_the_pages_site() -> None:
    def expected(index: str, value: str | None) -> str | None:
        return expected_repository(InstallOptions(index=index, require_provenance=value))

    assert expected("https://octo.github.io/dswheels/", "") == "octo/dswheels"
    assert expected("https://wheels.example.org/", "octo/dswheels") == "octo/dswheels"
    assert expected("https://wheels.example.org/", None) is None
    with pytest.raises(ConfigError, match="no GitHub Pages site"):
        expected("https://wheels.example.org/", "")
    with pytest.raises(ConfigError, match="not OWNER/REPO"):
        expected("https://wheels.example.org/", "octo/dswheels/../x")


def test_the_page_links_provenance_by_its_full_url_and_reads_it_back() -> None:
    wheel = parse_wheel(NAME)
    attested = IndexFile.of_wheel(
        wheel, url=f"files/{NAME}", sha256=SHA, size=1, provenance_url=f"files/{NAME}.provenance"
    )
    plain = IndexFile.of_wheel(parse_wheel(OTHER), url=f"files/{OTHER}", sha256=SHA, size=1)
    pages = render_site(
        [attested, plain], site_url="https://octo.github.io/dswheels/", torch_index="https://t/{variant}"
    )
    page = pages["whl/cu128-torch2.9/simple/deepspeed/index.html"]
    url = f"https://octo.github.io/dswheels/files/{NAME.replace('+', '%2B')}.provenance"
    assert page.count("data-provenance=") == 1
    assert f'data-provenance="{url}"' in page
    read = {
        f.filename: f
        for f in parse_project_page(page, "https://octo.github.io/dswheels/whl/cu128-torch2.9/simple/deepspeed/")
    }
    assert read[NAME].provenance_url == url
    assert read[OTHER].provenance_url is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("file:///etc/passwd", "may not link a file: URL"),
        ("http://h/x.provenance", "may not link a http: URL"),
        ("", "it is empty"),
        ("https://[::1/x", "not a URL"),
    ],
)
def test_a_data_provenance_that_may_not_be_followed_is_kept_as_a_problem(value: str, problem: str) -> None:
    page = f'<a href="https://h/{NAME}#sha256={SHA}" data-provenance="{value}">x</a>'
    (read,) = parse_project_page(page, "https://h/simple/deepspeed/")
    assert read.provenance_url is None
    assert problem in read.provenance_problem


def test_the_release_lists_each_dswheels_wheel_to_attest_or_stops(tmp_path: Path) -> None:
    """scripts/attest_subjects.py (wheels.yml's subjects job): one matrix entry per wheel, or exit 2."""
    import importlib.util as loader

    spec = loader.spec_from_file_location("attest_subjects", ROOT / "scripts" / "attest_subjects.py")
    assert spec is not None
    assert spec.loader is not None
    script = loader.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main([str(tmp_path)]) == 2  # no wheel: nothing to attest
    wheel = write_deepspeed_wheel(tmp_path / "cu128", variant="cu128", torch="2.9")
    (entry,) = script.subjects(tmp_path)
    assert entry == {
        "index": "0",
        "name": wheel.name,
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "folder": "cu128",
    }
    (tmp_path / "cu128" / "other-1.0-py3-none-any.whl").write_bytes(b"x")
    with pytest.raises(ValueError, match=r"other-1\.0-py3-none-any\.whl"):
        script.subjects(tmp_path)
