"""The human page renders in a real browser (headless Chromium), and its line picker answers there:
screenshots kept as test artifacts."""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from dswheels.index.effects.site_files import write_site
from dswheels.index.pages import render_site
from dswheels.kernel.compat import load_compat
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.naming import parse_wheel, wheel_filename
from dswheels.kernel.versions import TorchMinor
from dswheels.plan.rules import Judge
from tests.conftest import ROOT, require

pytestmark = pytest.mark.integration


def artifacts_dir() -> Path:
    """Where tests leave files for people (CI uploads it): $DSWHEELS_TEST_ARTIFACTS or build/test-artifacts."""
    path = Path(os.environ.get("DSWHEELS_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists() and path.is_relative_to(ROOT):
        ignore.write_text("*\n")
    return path


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _realistic_files() -> list[IndexFile]:
    """What the shipped matrix publishes: 2 DeepSpeed x 3 torch x 4 variants x 5 Pythons x 2 platforms."""
    files = []
    for ds in ((0, 19, 7), (0, 19, 8)):
        for torch in ((2, 13), (2, 14), (2, 15)):
            for variant in ("cu126", "cu130", "cu132", "cpu"):
                for minor in range(10, 15):
                    for platform in Platform:
                        if variant == "cpu" and platform is Platform.WIN_AMD64:
                            continue
                        if (torch, minor) == ((2, 13), 14) or (ds == (0, 19, 7) and variant == "cu132"):
                            continue  # holes, as a real matrix has
                        cell = Cell(ds, TorchMinor(torch), Variant.parse(variant), Python.parse(f"3.{minor}"), platform)
                        name = wheel_filename(cell)
                        files.append(
                            IndexFile(
                                filename=name,
                                wheel=parse_wheel(name),
                                url=f"https://github.com/octo/dswheels/releases/download/v1/{name}",
                                sha256=hashlib.sha256(name.encode()).hexdigest(),
                                size=180_000_000 if variant != "cpu" else 9_000_000,
                                requires_python=">=3.10",
                                metadata_sha256=hashlib.sha256(name.encode() + b"m").hexdigest(),
                                yanked="crashes in cpu_adam"
                                if ds == (0, 19, 7) and variant == "cpu" and minor == 12
                                else None,
                            )
                        )
    return files


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_index_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    require(browser is not None, "headless Chromium is not installed (Debian: apt-get install chromium)")
    assert browser is not None
    files = _realistic_files()
    site = tmp_path / "site"
    write_site(
        site,
        render_site(
            files, site_url="https://octo.github.io/dswheels/", torch_index="https://download.pytorch.org/whl/{variant}"
        ),
    )
    page = (site / "index.html").as_uri()
    screenshot = tmp_path / "index.png"
    common = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    shot = subprocess.run(
        [*common, "--window-size=1280,2600", f"--screenshot={screenshot}", page],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.returncode == 0, shot.stderr
    data = screenshot.read_bytes()
    assert _png_size(data) == (1280, 2600)
    assert len(data) > 60_000, "the screenshot is nearly blank"  # text and tables, not an empty page
    shutil.copyfile(screenshot, artifacts_dir() / "index-page.png")

    dom = subprocess.run([*common, "--dump-dom", page], capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr
    rendered = dom.stdout
    partitions = {f.published.partition for f in files}
    assert rendered.count("<pre><code>") == len(partitions)  # one pair of install lines per partition
    assert rendered.count('<pre class="uv-project">') == len(partitions)  # and its uv project's lines
    assert rendered.count("<table>") == 2  # one coverage table per DeepSpeed version
    filled = rendered.count('<td class="have">')
    cells = {(f.published.cell.deepspeed, f.published.partition, f.published.cell.python) for f in files}
    assert filled == len(cells)
    assert rendered.count('class="yanked"') >= 1
    (artifacts_dir() / "index-page.html").write_text(rendered, encoding="utf-8")


SITE_URL = "https://octo.github.io/dswheels/"


def _browser(tmp_path: Path) -> list[str]:
    browser = _chromium()
    require(browser is not None, "headless Chromium is not installed (Debian: apt-get install chromium)")
    assert browser is not None
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",  # the deferred script has run before the DOM is read
        f"--user-data-dir={tmp_path / 'profile'}",
    ]


def _picked(browser: list[str], page: str, choice: str, *, shot: Path | None = None) -> str:
    """The page's DOM in Chromium after the picker read ``choice`` from the address (#pick=...), as a click
    chooses it (the same change handler); with ``shot``, a screenshot of it too."""
    url = f"{page}#pick={choice}"
    if shot is not None:
        done = subprocess.run(
            [*browser, "--window-size=1280,1000", f"--screenshot={shot}", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert _png_size(shot.read_bytes()) == (1280, 1000)
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr
    return dom.stdout


def _text(dom: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</', dom, re.DOTALL)
    assert match, f"no #{element_id} in the page"
    return html.unescape(match.group(1))


def _table_line(dom: str, row: str, column: str) -> str:
    """What the table of every install line (the page without script) gives in ``row``'s ``column``."""
    match = re.search(rf'<tr id="{re.escape(row)}">(.*?)</tr>', dom, re.DOTALL)
    assert match, f"no row {row} in the table of install lines"
    cell = re.search(rf'<td class="{column}"><code>(.*?)</code></td>', match.group(1), re.DOTALL)
    assert cell, f"no {column} line in row {row}"
    return html.unescape(cell.group(1))


def test_the_picker_gives_the_tables_line_and_says_why_there_is_none(tmp_path: Path) -> None:
    browser = _browser(tmp_path)
    site = tmp_path / "site"
    pages = render_site(
        _realistic_files(),
        site_url=SITE_URL,
        torch_index="https://download.pytorch.org/whl/{variant}",
        judge=Judge(load_compat()).check,
    )
    write_site(site, pages)
    page = (site / "index.html").as_uri()
    static = (site / "index.html").read_text(encoding="utf-8")
    assert '<section id="pick" hidden>' in static  # without script the picker is not shown; the table is
    art = artifacts_dir()

    base = "deepspeed:0.19.8;torch:2.14;variant:cu130;python:cp312"
    windows = _picked(browser, page, f"os:win_amd64;{base};tool:pip", shot=art / "index-picker-windows.png")
    assert '<section id="pick">' in windows or '<section id="pick" class="">' in windows  # the script showed it
    line = _text(windows, "pick-line")
    assert line == _table_line(static, "line-0.19.8-cu130-torch2.14", "windows")
    assert line.startswith('py -m pip install "deepspeed==0.19.8+cu130torch2.14" --extra-index-url ')
    assert _text(windows, "pick-why") == "deepspeed-0.19.8+cu130torch2.14-cp312-cp312-win_amd64.whl"
    for tool, column in (("pip", "pip"), ("uv", "uv")):
        linux = _picked(browser, page, f"os:linux_x86_64;{base};tool:{tool}")
        assert _text(linux, "pick-line") == _table_line(static, "line-0.19.8-cu130-torch2.14", column)

    # an impossible combination: nothing to copy, and the rule that forbids it, as `dswheels plan --explain` says
    impossible = _picked(
        browser,
        page,
        "os:win_amd64;deepspeed:0.19.7;torch:2.15;variant:cu132;python:cp310;tool:pip",
        shot=art / "index-picker-impossible.png",
    )
    assert _text(impossible, "pick-line") == ""
    why = _text(impossible, "pick-why")
    assert why.startswith("[torch-python] torch 2.15 has no Python 3.10 wheel for win_amd64"), why
    assert 'id="pick-copy" disabled' in impossible
    # with the other choices kept, a value that gives no wheel is greyed out, its reason on hover
    greyed = re.search(r'<label class="none" title="([^"]*)"><input type="radio" name="variant" value="cpu"', windows)
    assert greyed is not None, "CPU is not greyed out on Windows (no Windows CPU wheel is published)"
    assert html.unescape(greyed.group(1)).startswith("not published: the rules allow this combination")
    assert re.search(r'<label( class="")?><input type="radio" name="variant" value="cu126"', windows)  # one that exists
    # a combination the rules allow but nothing published: says so
    missing = _picked(browser, page, "os:win_amd64;deepspeed:0.19.8;torch:2.14;variant:cpu;python:cp312;tool:pip")
    assert _text(missing, "pick-why").startswith("not published: the rules allow this combination")
