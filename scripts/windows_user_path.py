"""A Windows user's path for win_amd64 wheels, under Wine (`nox -s windows` runs it after verify).

Each wheel is published into a folder and indexed (`dswheels publish`, `dswheels index`) for a site
served here on loopback, as `python3 -m http.server` serves it; the line the site's page shows in
Windows' form (`py -m pip install "deepspeed==..." --extra-index-url ...`), then the same with the
partition's `--find-links` page, is typed into a fresh venv of the Windows CPython dswheels builds
under Wine, and `ds_report` runs after each (dswheels/platforms/wine/windows_user.py says what stands
in for what). Prints each line, the DeepSpeed pip installed and the ops `ds_report` lists installed.

    python scripts/windows_user_path.py WHEEL... --msvc-root DIR [--torch-index pip]
"""

from __future__ import annotations

import argparse
import email.parser
import functools
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from dswheels.cli.shared import parse_torch_source
from dswheels.host.cache import CacheLayout
from dswheels.kernel.compat import load_compat
from dswheels.kernel.naming import parse_wheel
from dswheels.platforms.wine.windows_user import WindowsUserRun, windows_user_path
from dswheels.platforms.wine.windows_venv import needed_by


def requirements_of(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` (its extras' left out): what the ``https`` indexes would bring."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.BytesParser().parsebytes(zf.read(name))
    return needed_by([Requirement(r) for r in metadata.get_all("Requires-Dist") or []])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class names it so
        pass


def try_wheel(wheel: Path, *, msvc_root: Path, torch_index: str | None, work: Path) -> list[WindowsUserRun]:
    published, site = work / "published", work / "site"
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    dswheels = [sys.executable, "-m", "dswheels"]
    subprocess.run([*dswheels, "publish", str(wheel), "--dir", str(published)], check=True)
    subprocess.run([*dswheels, "index", "--from", str(published), "--out", str(site), "--site-url", url], check=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cell = parse_wheel(wheel.name).cell
        compat = load_compat()
        return windows_user_path(
            wheel,
            requirements_of(wheel),
            page=(site / "index.html").read_text(encoding="utf-8"),
            msvc_root=msvc_root,
            python=cell.python.version,
            torch_source=parse_torch_source(torch_index),
            plan_index=compat.torch_index.format(variant=cell.variant.name),
            cache=CacheLayout.here(),
            log=work / "windows-user.log",
            accelerator="cuda" if cell.variant.is_cuda else None,
        )
    finally:
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--msvc-root", type=Path, default=os.environ.get("DSWHEELS_MSVC_ROOT"), required=False)
    parser.add_argument("--torch-index", default=None, help="as dswheels verify's (default: the plan's index)")
    args = parser.parse_args(argv)
    if args.msvc_root is None:
        parser.error("--msvc-root (or DSWHEELS_MSVC_ROOT) is needed: the Windows CPython is built with it")
    failed = 0
    for wheel in args.wheels:
        with tempfile.TemporaryDirectory(prefix="windows-user-") as tmp:
            runs = try_wheel(wheel.resolve(), msvc_root=args.msvc_root, torch_index=args.torch_index, work=Path(tmp))
        for run in runs:
            print(f"typed: {run.line}")
            print(
                f"  installed deepspeed {run.version}; ds_report lists installed: {', '.join(run.installed) or 'none'}"
            )
            failed += not run.installed
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
