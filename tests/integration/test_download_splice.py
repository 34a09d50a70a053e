"""A resumed download whose parts come from two files (issue 13, "a partial download spliced").

tests/integration/test_hostile_network.py's pinned-splice test drops the connection after
fewer bytes than one read of the downloader (``STREAM_CHUNK``), so nothing is kept and the
retry is a whole download: it passes with the re-fetch removed. Here the first response
delivers several chunks of wrong bytes before it breaks, so the retry really resumes and
splices, and only the re-fetch from the first byte gives the pinned file.
"""

from __future__ import annotations

import hashlib
import http.server
from collections.abc import Callable
from pathlib import Path

import pytest

from dswheels.effects.sources import STREAM_CHUNK, Downloader

pytestmark = pytest.mark.integration

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


def test_a_resumed_download_spliced_with_other_bytes_is_fetched_whole_again(
    http_server: Callable[[Handler], str], tmp_path: Path
) -> None:
    data = bytes(range(256)) * (STREAM_CHUNK // 64)  # 4 * STREAM_CHUNK bytes
    wrong = b"X" * (3 * STREAM_CHUNK)  # more than one read: the downloader keeps some of it
    ranges: list[str | None] = []

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        rng = req.headers.get("Range")
        ranges.append(rng)
        if len(ranges) == 1:  # promise the whole file, send other bytes, drop the connection
            req.send_response(200)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(wrong)
            req.wfile.flush()
            req.close_connection = True
            return
        start = int((rng or "bytes=0-").removeprefix("bytes=").split("-")[0])
        body = data[start:]
        req.send_response(206 if start else 200)
        req.send_header("Content-Length", str(len(body)))
        if start:
            req.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        req.end_headers()
        req.wfile.write(body)

    url = http_server(handle) + "/src.tar.gz"
    sha = hashlib.sha256(data).hexdigest()
    path, got = Downloader(tmp_path / "cache", retries=3).fetch(url, sha256=sha)
    assert (got, path.read_bytes()) == (sha, data)
    assert any(r is not None and r != "bytes=0-" for r in ranges[1:-1]), f"the download never resumed: {ranges}"
    assert ranges[-1] is None, f"the last request was not for the whole file: {ranges}"
