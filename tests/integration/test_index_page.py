"""The human page renders in a real browser (headless Chromium): screenshot kept as a test artifact."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from dswheels.index.effects.site_files import write_site
from dswheels.index.pages import render_site
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.naming import parse_wheel, wheel_filename
from dswheels.kernel.versions import TorchMinor
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
    assert rendered.count("<table>") == 2  # one coverage table per DeepSpeed version
    filled = rendered.count('<td class="have">')
    cells = {(f.published.cell.deepspeed, f.published.partition, f.published.cell.python) for f in files}
    assert filled == len(cells)
    assert rendered.count('class="yanked"') >= 1
    (artifacts_dir() / "index-page.html").write_text(rendered, encoding="utf-8")
