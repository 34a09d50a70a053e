"""Index pages built to exhaust the reader, served on loopback to ``dswheels doctor`` under a memory limit.

The issue's page: 58 MB (under the 64 MiB a page may have) with one tag of 6 million attributes,
3.2 GB at its peak in html.parser: doctor died with MemoryError under 2 GiB. And a page of
broken markup on which html.parser is quadratic (16 MB of "<!": hours). Both are now read in
one pass: doctor reports the index it cannot use (FAIL, exit 9) or a page without the wheel.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dswheels.doctor.render_report import DOCTOR_SCHEMA
from tests.support.limits import run_limited
from tests.unit.machines import machine_data

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="the memory limit is set with POSIX setrlimit"),
]

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


def _serving(body: bytes) -> Handler:
    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Type", "text/html")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        with contextlib.suppress(OSError):
            req.wfile.write(body)

    return handle


def _doctor(tmp_path: Path, base: str) -> tuple[int, str, str]:
    facts = tmp_path / "doctor.json"
    facts.write_text(json.dumps({"schema": DOCTOR_SCHEMA, "facts": machine_data("windows-healthy-cu124")}))
    result = run_limited(["doctor", "--facts", str(facts), "--index", base], tmp=tmp_path / "tmp", memory=2 * 1024**3)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.seconds < 120
    assert result.left_in_tmp == ()
    return result.returncode, result.stdout, result.stderr


def test_one_tag_of_six_million_attributes(http_server: Callable[[Handler], str], tmp_path: Path) -> None:
    page = b"<html><body><a href='x.whl' " + b"a " * 6_000_000 + b">x</a>" + b" " * (46 * 1024**2) + b"</body></html>"
    assert 56 * 1024**2 < len(page) < 64 * 1024**2
    code, out, _err = _doctor(tmp_path, http_server(_serving(page)))
    assert code == 9, out[-3000:]
    assert "has a tag of more than 16,384 characters" in out


def test_markup_html_parser_reads_in_quadratic_time(http_server: Callable[[Handler], str], tmp_path: Path) -> None:
    page = b"<html><body>" + b"<!" * (8 * 1024**2)  # no ">" after them: html.parser searches from each
    code, out, _err = _doctor(tmp_path, http_server(_serving(page)))
    empty_code, empty_out, _ = _doctor(tmp_path, http_server(_serving(b"<html><body>")))
    assert code == empty_code, out[-3000:]  # read as the empty page it is
    assert out.count("FAIL") == empty_out.count("FAIL")
