"""What the network sends, taken at its word only where it can be checked: index pages, links, downloads.

Real HTTP servers on loopback play a hostile or broken index and a hostile source host:
links to this machine's files, links without hashes, names that differ from the URL, endless
pages, truncated and spliced downloads, lengths that lie, redirects to other schemes. Runs
that could exhaust memory on a broken dswheels run as a child process with a memory limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import pytest

from dswheels.cli import main
from dswheels.doctor.render_report import DOCTOR_SCHEMA
from dswheels.host.downloads import STREAM_CHUNK, Downloader
from dswheels.kernel.errors import GitHubError, SourceError
from dswheels.stores.served_index import download_wheel, read_index
from tests.support.limits import run_limited
from tests.support.wheels import write_deepspeed_wheel
from tests.unit.machines import machine_data

pytestmark = pytest.mark.integration

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]
NAME = "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl"
QUOTED = NAME.replace("+", "%2B")


def _send(req: http.server.BaseHTTPRequestHandler, body: bytes, status: int = 200, **headers: str) -> None:
    req.send_response(status)
    headers.setdefault("Content-Length", str(len(body)))
    for key, value in headers.items():
        req.send_header(key.replace("_", "-"), value)
    req.end_headers()
    req.wfile.write(body)


def _page_server(http_server: Callable[[Handler], str], links: str, files: dict[str, bytes] | None = None) -> str:
    files = files or {}

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        if req.path.rstrip("/").endswith("/simple/deepspeed"):
            _send(req, f"<html><body>{links}</body></html>".encode())
        elif unquote(req.path) in files:
            _send(req, files[unquote(req.path)])
        else:
            _send(req, b"", 404)

    return http_server(handle)


def _only(index: str) -> tuple[str, object]:
    page, files = read_index(index)
    (item,) = [f for f in files if f.cell is not None]
    return page, item


def test_a_remote_page_cannot_make_install_read_local_files(
    http_server: Callable[[Handler], str], tmp_path: Path
) -> None:
    secret = tmp_path / NAME
    secret.write_bytes(b"this machine's file")
    sha = hashlib.sha256(secret.read_bytes()).hexdigest()
    for href in (secret.as_uri(), "file://localhost" + str(secret), "FILE:" + str(secret)):
        base = _page_server(http_server, f'<a href="{href}#sha256={sha}">{NAME}</a>')
        _page, files = read_index(base)
        (item,) = files
        with pytest.raises(SourceError, match="may not link"):
            download_wheel(item, tmp_path / "dl")
        assert not (tmp_path / "dl" / NAME).exists()


def test_install_takes_the_name_from_the_url_and_requires_a_sha256(
    http_server: Callable[[Handler], str], tmp_path: Path
) -> None:
    wheel = write_deepspeed_wheel(tmp_path / "w", variant="cpu", torch="2.13", python="cp311")
    other = "deepspeed-0.19.7+cputorch2.13-cp311-cp311-linux_x86_64.whl"
    data = wheel.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    # the text names 0.19.8; the URL (what is downloaded) is 0.19.7: the URL wins
    base = _page_server(
        http_server, f'<a href="/f/{other.replace("+", "%2B")}#sha256={sha}">{NAME}</a>', {f"/f/{other}": data}
    )
    _page, files = read_index(base)
    assert [f.filename for f in files] == [other]
    # no hash, and hashes in other algorithms: refused before anything is downloaded
    for fragment in ("", "#md5=" + "0" * 32, "#sha512=" + "0" * 128, "#sha256=abc"):
        base = _page_server(http_server, f'<a href="/f/{QUOTED}{fragment}">{NAME}</a>', {f"/f/{NAME}": data})
        _page, item = _only(base)
        with pytest.raises(SourceError, match="no sha256"):
            download_wheel(item, tmp_path / "dl")  # type: ignore[arg-type]
        assert not (tmp_path / "dl" / NAME).exists()
    base = _page_server(http_server, f'<a href="/f/{QUOTED}#sha256={sha}">{NAME}</a>', {f"/f/{NAME}": data})
    _page, item = _only(base)
    assert download_wheel(item, tmp_path / "dl").read_bytes() == data  # type: ignore[arg-type]


def _facts(tmp_path: Path) -> Path:
    saved = tmp_path / "doctor.json"
    saved.write_text(json.dumps({"schema": DOCTOR_SCHEMA, "facts": machine_data("windows-healthy-cu124")}))
    return saved


@pytest.mark.skipif(sys.platform == "win32", reason="the memory limit is set with POSIX setrlimit")
def test_an_endless_index_page_is_bounded(http_server: Callable[[Handler], str], tmp_path: Path) -> None:
    def endless(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.end_headers()
        chunk = b"<a href='x'>" + b"y" * 65536 + b"</a>"
        with contextlib.suppress(OSError):  # until the reader hangs up
            while True:
                req.wfile.write(chunk)

    base = http_server(endless)
    result = run_limited(
        ["doctor", "--facts", str(_facts(tmp_path)), "--index", base], tmp=tmp_path / "tmp", memory=2 * 1024**3
    )
    assert result.returncode == 9, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "larger than" in result.stdout


def test_doctor_fails_when_the_index_it_was_given_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = _facts(tmp_path)
    assert main(["doctor", "--facts", str(facts)]) == 0  # the machine itself is fine
    capsys.readouterr()
    assert main(["doctor", "--facts", str(facts), "--index", "http://127.0.0.1:9/"]) == 9
    assert "cannot read the index" in capsys.readouterr().out
    assert main(["doctor", "--facts", str(facts), "--index", str(tmp_path / "no-such-site")]) == 9


# --- source downloads -------------------------------------------------------------------------------------------


def test_a_download_without_a_pin_is_never_a_splice(http_server: Callable[[Handler], str], tmp_path: Path) -> None:
    """The connection breaks; on the retry the server sends other bytes (a changed file, a MITM)."""
    first, second = b"A" * 300_000, b"B" * 300_000
    served: list[str | None] = []

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        served.append(req.headers.get("Range"))
        if len(served) == 1:  # promise everything, send a third, drop the connection
            req.send_response(200)
            req.send_header("Content-Length", str(len(first)))
            req.end_headers()
            req.wfile.write(first[:100_000])
            req.close_connection = True
            return
        start = int((req.headers.get("Range") or "bytes=0-").removeprefix("bytes=").split("-")[0])
        if start:
            _send(req, second[start:], 206, Content_Range=f"bytes {start}-{len(second) - 1}/{len(second)}")
        else:
            _send(req, second)

    url = http_server(handle) + "/src.tar.gz"
    path, sha = Downloader(tmp_path / "cache", retries=3).fetch(url, sha256=None)  # nothing to check it against
    assert path.read_bytes() in (first, second), "the recorded file is a splice of two responses"
    assert sha == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_spliced_download_with_a_pin_is_fetched_whole_again(
    http_server: Callable[[Handler], str], tmp_path: Path
) -> None:
    data = bytes(range(256)) * (STREAM_CHUNK // 64)  # 4 * STREAM_CHUNK bytes
    # wrong bytes, more than one read of the downloader (so it keeps some and resumes after them)
    wrong = b"X" * (3 * STREAM_CHUNK)
    calls: list[str | None] = []

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        calls.append(req.headers.get("Range"))
        rng = req.headers.get("Range")
        if rng is None and len(calls) == 1:
            req.send_response(200)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(wrong)  # wrong bytes, then the connection drops
            req.wfile.flush()
            req.close_connection = True
            return
        start = int((rng or "bytes=0-").removeprefix("bytes=").split("-")[0])
        if start:
            _send(req, data[start:], 206, Content_Range=f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            _send(req, data)

    url = http_server(handle) + "/src.tar.gz"
    sha = hashlib.sha256(data).hexdigest()
    path, got = Downloader(tmp_path / "cache", retries=3).fetch(url, sha256=sha)
    assert (got, path.read_bytes()) == (sha, data)
    # it really resumed (a splice of the wrong bytes and the rest), then fetched the whole file again
    assert any(r is not None and r != "bytes=0-" for r in calls[1:-1]), f"the download never resumed: {calls}"
    assert calls[-1] is None  # the last request was for the whole file


@pytest.mark.parametrize("lie", ["short", "long", "wrong-range", "redirect-file", "redirect-ftp"])
def test_downloads_that_lie_about_their_length_or_go_elsewhere(
    http_server: Callable[[Handler], str], tmp_path: Path, lie: str
) -> None:
    data = b"z" * 50_000

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        if lie == "short":  # says 50,000, sends 10,000, every time
            req.send_response(200)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data[:10_000])
            req.close_connection = True
        elif lie == "long":
            _send(req, data + b"extra")
        elif lie == "wrong-range":
            _send(req, data[:100], 206, Content_Range=f"bytes 7-106/{len(data)}")
        else:
            target = "file:///etc/passwd" if lie == "redirect-file" else "ftp://127.0.0.1/x"
            _send(req, b"", 302, Location=target)

    url = http_server(handle) + "/src.tar.gz"
    with pytest.raises(SourceError):
        Downloader(tmp_path / "cache", retries=1).fetch(url, sha256=None, size=len(data))
    assert not list((tmp_path / "cache").glob("sha256/*"))


# --- GitHub's API (or a GITHUB_API_URL that is not GitHub) ------------------------------------------------------


def test_an_endless_or_broken_github_list_is_a_github_error(
    http_server: Callable[[Handler], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dswheels.host import github as github_module
    from dswheels.host.github import GitHub, Retry

    mode = {"answer": "endless"}

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        if mode["answer"] == "endless":  # every page says there is a next one
            _send(req, b"[]", Link=f'<http://{req.headers["Host"]}/repos/o/r/releases?page=2>; rel="next"')
        else:
            _send(req, b"[" * 100_000)

    monkeypatch.setattr(github_module, "MAX_PAGES", 5)
    gh = GitHub("o/r", token=None, api_url=http_server(handle), retry=Retry(attempts=1))
    with pytest.raises(GitHubError, match="past 5 pages"):
        gh.releases()
    mode["answer"] = "deep"
    with pytest.raises(GitHubError, match="not JSON"):
        gh.releases()


@pytest.mark.parametrize("repo", ["o/r/x", "o/..", "../r", "o/r?x=1", "o/r#x", "o /r", "o/r%2F..", "o/"])
def test_github_repository_names_that_would_change_a_url_are_refused(repo: str) -> None:
    from dswheels.host.github import GitHub

    with pytest.raises(GitHubError, match="not a GitHub repository"):
        GitHub(repo, token=None)
