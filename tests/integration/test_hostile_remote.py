"""Hostile remote documents through the real command line: the clean exit code, one paragraph, and
nothing of them in a page, a path or a request the token goes with.

``GITHUB_API_URL`` is honoured, so GitHub's API is whatever answers there: a loopback fake that
answers in GitHub's documented shapes (tests/support/github_fake.py) has each field of its releases
and assets replaced in turn (tests/support/hostile_values.py), and ``index --github`` must exit 7 (the
site left unwritten) or write a site with none of it; ``publish --github`` must never send the token,
or a byte, to an upload URL of another shape; the follow commands exit 10 for hostile issues and runs.
PyPI's JSON (``facts check --pypi``, ``build --pypi``), GitHub's issue list of runner images' retirements
(``facts check --runner-images``) and NVIDIA's redistrib JSON (``cuda install --redist-url``) come from
loopback servers too: exit 4. On the main branch before issue 30, a
``javascript:`` download URL was linked from every page, the token went to any upload origin the
answer named, and wrong types ended in tracebacks.
"""

from __future__ import annotations

import copy
import hashlib
import http.server
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dswheels.cli import main
from dswheels.kernel.github_api import GitHubPlace, read_asset, read_release
from dswheels.kernel.remote_json import RemoteJson
from dswheels.publish.step import collect_wheels
from tests.conftest import DATA, ROOT
from tests.support.github_fake import FakeGitHub
from tests.support.github_follow_fake import FollowGitHub
from tests.support.hostile_values import ABSENT, HOSTILE_TEXT, MARKS, WRONG_TYPES, clean
from tests.support.servers import LoopbackServer
from tests.support.wheels import write_deepspeed_wheel

pytestmark = pytest.mark.integration

TAG = "v2026.11.23"
SITE_URL = "https://octo.github.io/dswheels/"
# the values the command line is fed (the readers' own tests feed every one): a wrong type of each kind,
# nothing, and each kind of hostile text
CLI_VARIANTS = {
    k: v
    for k, v in {**WRONG_TYPES, **HOSTILE_TEXT}.items()
    if k
    in (
        "absent",
        "null",
        "list",
        "huge number",
        "digits as text",
        "javascript URL",
        "markup",
        "control",
        "bidi",
        "huge",
        "arabic digits",
        "empty",
    )
}
# facts check reads a whole document for each: the kinds of value, not each one (the readers' tests have each)
FACTS_VARIANTS = ("absent", "list", "huge number", "javascript URL", "markup", "bidi", "huge", "arabic digits")
ASSET_FIELDS = ("id", "name", "state", "size", "digest", "browser_download_url")
RELEASE_FIELDS = ("id", "tag_name", "draft", "upload_url")


def _put(data: dict[str, Any], key: str, value: object) -> None:
    if value is ABSENT:
        data.pop(key, None)
    else:
        data[key] = copy.deepcopy(value)


def _one_paragraph(err: str, title: str) -> None:
    lines = err.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith(f"{title}: ")]
    assert errors, err[-2000:]
    assert all(line.startswith(("  ", "hint: ")) for line in lines[errors[-1] + 1 :]), err[-2000:]
    assert clean("\n".join(lines[errors[-1] :]).replace("\n", " ")), err[-2000:]


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """A published release holding one wheel and its .metadata, as publish_github leaves it."""
    with FakeGitHub() as fake:
        (wheel,) = collect_wheels([write_deepspeed_wheel(tmp_path / "dist", variant="cu128", torch="2.9")])
        release = fake.add_release(TAG)
        fake.add_asset(release, wheel.wheel.filename, wheel.path.read_bytes())
        fake.add_asset(release, wheel.wheel.filename + ".metadata", wheel.metadata)
        monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
        monkeypatch.setenv("GITHUB_TOKEN", fake.token)
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
        yield fake


def _readers_verdict(fake: FakeGitHub, kind: str) -> bool:
    """Whether the reader takes the served object (the command must then exit 0, else 7)."""
    release = next(iter(fake.releases.values()))
    place = GitHubPlace(fake.api_url, fake.repo)
    try:
        if kind == "asset":
            for asset in release.assets:
                read_asset(RemoteJson(fake.asset_json(release, asset)), place)
        else:
            read_release(RemoteJson(fake.release_json(release)), place)
    except ValueError:
        return False
    return True


def _site_text(site: Path) -> str:
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") + p.relative_to(site).as_posix()
        for p in site.rglob("*")
        if p.is_file()
    )


@pytest.mark.parametrize(
    ("kind", "field", "variant"),
    [("asset", f, v) for f in ASSET_FIELDS for v in CLI_VARIANTS]
    + [("release", f, v) for f in RELEASE_FIELDS for v in CLI_VARIANTS],
)
def test_index_github_with_each_field_hostile(  # noqa: PLR0917 - one field, one value
    kind: str,
    field: str,
    variant: str,
    github: FakeGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    value = CLI_VARIANTS[variant]
    github.tamper[kind] = lambda data: _put(data, field, value)
    site = tmp_path / "site"
    code = main(["index", "--github", github.repo, "--out", str(site), "--site-url", SITE_URL])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    if _readers_verdict(github, kind):
        assert code == 0, out.err[-2000:]
        text = _site_text(site)
        left = [m for m in MARKS if m in text and m != "<script"]  # the page's own picker is a <script> block
        if isinstance(value, str) and len(value) > 3 and value in text:  # "12" is in any page
            left.append(repr(value[:40]))
        assert left == [], f"{field}={value!r:.60} reached the site"
        assert "a" * 10_000 not in text
    else:
        assert code == 7, out.err[-2000:]
        _one_paragraph(out.err, "publish failed")
        assert f"{kind}s[" in out.err or "release" in out.err  # the path of the value: assets[0].digest
        assert not site.exists()  # nothing written


@pytest.mark.parametrize("value", ["javascript:alert(document.cookie)", "https://evil.example/x.whl", "data:,x"])
def test_a_javascript_download_url_is_never_linked(
    value: str, github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's example: the link of every page of the site; publishing fails, the old site stays."""
    site = tmp_path / "site"
    assert main(["index", "--github", github.repo, "--out", str(site), "--site-url", SITE_URL]) == 0
    before = _site_text(site)
    github.tamper["asset"] = lambda data: _put(data, "browser_download_url", value)
    assert main(["index", "--github", github.repo, "--out", str(site), "--site-url", SITE_URL]) == 7
    err = capsys.readouterr().err
    assert "assets[" in err
    assert "browser_download_url" in err
    assert _site_text(site) == before
    assert value not in before


@pytest.mark.parametrize("digest", ["sha256:" + "Z" * 64, "sha256:" + "AB" * 32, "sha256:x", "md5:" + "a" * 32, 5])
def test_a_digest_that_is_no_sha256_is_never_served(
    digest: object, github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.tamper["asset"] = lambda data: _put(data, "digest", digest)
    site = tmp_path / "site"
    assert main(["index", "--github", github.repo, "--out", str(site), "--site-url", SITE_URL]) == 7
    assert "digest" in capsys.readouterr().err
    assert not site.exists()


# --- publish: the token and the bytes go only where GitHub's API sends uploads -----------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str]] = []  # noqa: RUF012 - one list per server class below

    def _any(self) -> None:
        type(self).seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        self.send_response(201)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PATCH = do_DELETE = _any  # noqa: N815 - http.server's names

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def elsewhere() -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """Another origin on loopback, recording every request (the one a hostile answer names)."""
    handler: type[_Recorder] = type("Elsewhere", (_Recorder,), {"seen": []})
    with LoopbackServer(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield server.base_url, handler.seen


@pytest.mark.parametrize(
    "upload_url",
    [
        "{elsewhere}/repos/octo/dswheels/releases/{id}/assets{{?name,label}}",  # another origin, the right path
        "{api}/repos/octo/dswheels/releases/999/assets{{?name,label}}",  # another release
        "{api}/repos/other/repo/releases/{id}/assets{{?name,label}}",  # another repository
        "javascript:alert(1)",
        "{api}/uploads/repos/octo/dswheels/releases/{id}/assets?name=x.whl{{?name,label}}",
        "{api}/uploads/repos/octo/dswheels/releases/{id}/assets\r\nX-Injected: 1{{?name,label}}",
    ],
)
def test_publish_never_sends_the_token_or_a_byte_to_another_upload_url(
    upload_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    elsewhere: tuple[str, list[tuple[str, str, str]]],
) -> None:
    other, seen = elsewhere
    with FakeGitHub() as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
        monkeypatch.setenv("GITHUB_TOKEN", fake.token)

        def tamper(data: dict[str, Any]) -> None:
            data["upload_url"] = upload_url.format(elsewhere=other, api=fake.api_url, id=data["id"])

        fake.tamper["release"] = tamper
        write_deepspeed_wheel(tmp_path / "dist", variant="cu128", torch="2.9")
        code = main(["publish", str(tmp_path / "dist"), "--github", fake.repo, "--tag", TAG])
        err = capsys.readouterr().err
        assert code == 7, err[-2000:]
        _one_paragraph(err, "publish failed")
        assert "upload_url" in err
        assert fake.requests("POST", "/uploads/") == []  # not one byte
        assert seen == []  # not one request, token or not, to the origin the answer named
        assert fake.token not in err


# --- the follow commands: GitHub's answers outside publishing (exit 10) ------------------------------------------


@pytest.fixture
def follow(monkeypatch: pytest.MonkeyPatch) -> Iterator[FollowGitHub]:
    with FollowGitHub("octo/dswheels", ROOT / ".github" / "workflows") as fake:
        monkeypatch.setenv("GITHUB_API_URL", fake.api_url)
        monkeypatch.setenv("GITHUB_TOKEN", "ghp_follow_token_value")
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
        yield fake


RUN_FIELDS = ("status", "display_title")


@pytest.mark.parametrize(("field", "variant"), [(f, v) for f in RUN_FIELDS for v in CLI_VARIANTS])
def test_facts_dispatch_with_hostile_runs(
    field: str, variant: str, follow: FollowGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    follow.add_run("wheels.yml", status="queued", title="wheels 0.19.7")
    value = CLI_VARIANTS[variant]
    follow.state.tamper["run"] = lambda run: _put(run, field, value)
    code = main(["facts", "dispatch", "--versions-json", '["0.19.8"]', "--repo", "octo/dswheels"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code in (0, 10), err[-2000:]
    if code == 10:
        _one_paragraph(err, "GitHub failed")
        assert "workflow_runs[0]" in err
    assert "ghp_follow_token_value" not in err


ISSUE_FIELDS = ("number", "title", "body", "pull_request")


@pytest.mark.parametrize(("field", "variant"), [(f, v) for f in ISSUE_FIELDS for v in CLI_VARIANTS])
def test_facts_issue_with_hostile_issues(
    field: str, variant: str, follow: FollowGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "dswheels.facts-report/1", "drift": True, "checked": "2026-11-24"}))
    markdown = tmp_path / "report.md"
    markdown.write_text("findings\n", encoding="utf-8")
    follow.state.issues.append({"number": 3, "title": "x", "body": "an issue", "state": "open"})
    value = CLI_VARIANTS[variant]
    follow.state.tamper["issue"] = lambda issue: _put(issue, field, value)
    args = ["facts", "issue", "--facts", str(report), "--markdown", str(markdown), "--repo", "octo/dswheels"]
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code in (0, 10), err[-2000:]
    if code == 10:
        _one_paragraph(err, "GitHub failed")
        assert "issues[0]" in err


# --- PyPI's JSON and NVIDIA's redistrib JSON from a server dswheels does not control (exit 4) ----------------------

PYPI = json.loads((DATA / "upstream" / "pypi" / "deepspeed" / "json").read_text(encoding="utf-8"))
_SDIST = ("releases", "0.19.8", 0)
PYPI_FIELDS: list[tuple[str | int, ...]] = [
    ("releases",),
    (*_SDIST, "filename"),
    (*_SDIST, "url"),
    (*_SDIST, "digests", "sha256"),
    (*_SDIST, "size"),
    (*_SDIST, "packagetype"),
    (*_SDIST, "upload_time_iso_8601"),
    ("info", "version"),
]


def _set(doc: Any, path: tuple[str | int, ...], value: object) -> Any:
    changed = copy.deepcopy(doc)
    node = changed
    for key in path[:-1]:
        node = node[key]
    if value is ABSENT:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return changed


@pytest.fixture
def serve(http_server: Callable[..., str]) -> Callable[[bytes], str]:
    """A loopback server answering every GET with one body; returns its base URL."""

    def start(body: bytes) -> str:
        def handle(req: http.server.BaseHTTPRequestHandler) -> None:
            req.send_response(200)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            req.wfile.write(body)

        return http_server(handle)

    return start


OTHER_SOURCES = ["pypi-torch", "pypi-cuda-toolkit", "torch-index", "cuda-action", "deepspeed-sdists", "runner-images"]


@pytest.mark.parametrize(
    ("path", "variant"), [(p, v) for p in PYPI_FIELDS for v in FACTS_VARIANTS], ids=lambda x: str(x)[:40]
)
def test_facts_check_reads_any_pypi_json_cleanly(
    path: tuple[str | int, ...],
    variant: str,
    *,
    serve: Callable[[bytes], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = serve(json.dumps(_set(PYPI, path, CLI_VARIANTS[variant])).encode())
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    report = tmp_path / "report.md"
    args = ["facts", "check", "--pypi", f"{base}/pypi/{{project}}/json", "--markdown", str(report)]
    code = main(args + [f"--skip={s}" for s in OTHER_SOURCES])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code in (0, 4), err[-2000:]  # 4: the source could not be read, its facts reported unchecked
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    assert [m for m in MARKS if m in text and m != "../"] == [], text[:2000]  # it becomes the drift issue
    assert "a" * 10_000 not in text


RUNNER_IMAGES = json.loads((DATA / "upstream" / "runner-images" / "issues.json").read_text(encoding="utf-8"))
ANNOUNCEMENT_FIELDS: list[tuple[str | int, ...]] = [(), (0,), (0, "number"), (0, "title"), (0, "body")]


@pytest.mark.parametrize(
    ("path", "variant"), [(p, v) for p in ANNOUNCEMENT_FIELDS for v in FACTS_VARIANTS], ids=lambda x: str(x)[:40]
)
def test_facts_check_reads_any_runner_images_issue_list_cleanly(
    path: tuple[str | int, ...],
    variant: str,
    *,
    serve: Callable[[bytes], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GitHub's issue list (``--runner-images``) goes through GitHub's one reader of issues: exit 0, or 4 with
    the source reported unreadable, and nothing of it in the report that becomes the drift issue."""
    value = CLI_VARIANTS[variant]
    doc = value if path == () else _set(RUNNER_IMAGES, path, value)
    if doc is ABSENT:
        doc = {}
    base = serve(json.dumps(doc).encode())
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    report = tmp_path / "report.md"
    args = ["facts", "check", "--runner-images", f"{base}/issues", "--markdown", str(report)]
    others = ["pypi-deepspeed", *(s for s in OTHER_SOURCES if s != "runner-images")]
    code = main(args + [f"--skip={s}" for s in others])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code in (0, 4), err[-2000:]  # 4: the source could not be read, its facts reported unchecked
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    assert [m for m in MARKS if m in text and m != "../"] == [], text[:2000]
    assert "a" * 10_000 not in text


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ((*_SDIST, "url"), "file:///etc/passwd"),
        ((*_SDIST, "url"), "javascript:alert(1)"),
        ((*_SDIST, "digests", "sha256"), "Z" * 64),
        ((*_SDIST, "size"), "2020482"),
        ((*_SDIST, "size"), 10**400),
        ((*_SDIST, "filename"), "../../x.tar.gz"),
        ((*_SDIST, "packagetype"), ["sdist"]),
    ],
)
def test_build_reads_the_sdist_of_any_pypi_json_cleanly(
    path: tuple[str | int, ...],
    value: object,
    *,
    serve: Callable[[bytes], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = serve(json.dumps(_set(PYPI, path, value)).encode())
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    args = ["build", "--matrix", str(DATA / "matrix-cpu.yml"), "--prepare-only", "--torch-index", "pip"]
    code = main([*args, "--out", str(tmp_path / "wh"), "--pypi", f"{base}/pypi/deepspeed/json"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 4, err[-2000:]
    _one_paragraph(err, "source error")
    assert not (tmp_path / "cache" / "sources" / "sha256").exists() or not list(
        (tmp_path / "cache" / "sources" / "sha256").iterdir()
    )


REDIST = (DATA / "cuda-redist" / "redistrib_13.0.3.json").read_bytes()


@pytest.mark.parametrize(
    ("component", "key", "value"),
    [
        ("cuda_nvcc", "relative_path", "../../../etc/passwd.tar.xz"),
        ("cuda_nvcc", "sha256", "Z" * 64),
        ("cuda_nvcc", "size", 10**400),
        ("cuda_nvcc", "size", "١٢٣"),
        ("cuda_nvcc", "version", "javascript:alert(1)"),
        ("cuda_nvcc", "version", ABSENT),
    ],
)
def test_cuda_install_reads_any_redistrib_json_cleanly(  # noqa: PLR0917 - one field, one value
    component: str,
    key: str,
    value: object,
    serve: Callable[[bytes], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = json.loads(REDIST)
    node = data[component] if key == "version" else data[component]["linux-x86_64"]
    _put(node, key, value)
    body = json.dumps(data).encode()
    base = serve(body)
    monkeypatch.setenv("DSWHEELS_CACHE", str(tmp_path / "cache"))
    dest = tmp_path / "cuda"
    args = ["cuda", "install", "--toolkit", "13.0.3", "--platform", "linux_x86_64", "--dest", str(dest)]
    code = main([*args, "--redist-url", f"{base}/", "--redist-sha256", hashlib.sha256(body).hexdigest()])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 4, err[-2000:]
    _one_paragraph(err, "source error")
    assert not dest.exists()


@pytest.mark.parametrize(
    "link", ["{elsewhere}/repos/octo/dswheels/releases?page=2", "javascript:alert(1)", "file:///etc/passwd"]
)
def test_a_list_continued_on_another_origin_is_not_followed(
    link: str,
    *,
    http_server: Callable[..., str],
    elsewhere: tuple[str, list[tuple[str, str, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The ``Link: rel="next"`` header is the answer's too: a page elsewhere is never asked for."""
    other, seen = elsewhere

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        body = b"[]"
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Link", f'<{link.format(elsewhere=other)}>; rel="next"')
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    monkeypatch.setenv("GITHUB_API_URL", http_server(handle))
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_list_token_value")
    code = main(["index", "--github", "octo/dswheels", "--out", str(tmp_path / "site"), "--site-url", SITE_URL])
    err = capsys.readouterr().err
    assert code == 7, err[-2000:]
    _one_paragraph(err, "publish failed")
    assert "another origin" in err
    assert seen == []
    assert not (tmp_path / "site").exists()
