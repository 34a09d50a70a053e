"""Real pip and uv, run against loopback indexes from fresh virtual environments.

Everything that could leak in from the machine is shut out, so a test sees only the
indexes it names: no pip.conf (this machine's adds ``/opt/wheels`` and local mirrors), no
``PIP_*``/``UV_*`` variables, no cache (a cache hit would hide a download from the server
log).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Installer", "Result", "clean_env", "uv_binary"]


def uv_binary() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(
        {
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "UV_NO_CONFIG": "1",
            "UV_CACHE_DIR": str(home / "uv-cache"),
            "UV_PYTHON_DOWNLOADS": "never",
            "XDG_CONFIG_HOME": str(home / "config"),  # no user-level pip.conf / uv.toml either
        }
    )
    return env


@dataclass(frozen=True)
class Result:
    returncode: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Installer:
    """A fresh venv (made from this interpreter, without pip) and pip/uv aimed at it."""

    def __init__(self, root: Path, name: str) -> None:
        self.home = root / name
        self.venv = self.home / "venv"
        venv.EnvBuilder(with_pip=False).create(self.venv)
        self.python = self.venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
        self.env = clean_env(self.home)

    def _run(self, argv: list[str]) -> Result:
        done = subprocess.run(
            argv, env=self.env, capture_output=True, text=True, check=False, timeout=300, cwd=self.home
        )
        return Result(done.returncode, done.stdout + done.stderr)

    def pip(self, *args: str) -> Result:
        """``pip install ARGS`` as a user types it, run by this test environment's pip into the venv."""
        return self._run([sys.executable, "-m", "pip", "--python", str(self.python), *args, "--no-cache-dir"])

    def uv(self, *args: str) -> Result:
        return self._run([uv_binary(), *args, "--python", str(self.python), "--no-cache"])

    def run(self, tool: str, command: str, *extra: str) -> Result:
        """Run an install line (``pip install ...`` / ``uv pip install ...``) with ``extra`` arguments."""
        import shlex

        argv = shlex.split(command)
        if tool == "pip":
            assert argv[:2] == ["pip", "install"], command
            return self.pip("install", *argv[2:], *extra)
        assert argv[:3] == ["uv", "pip", "install"], command
        return self.uv("pip", "install", *argv[3:], *extra)

    def python_eval(self, code: str) -> str:
        done = subprocess.run(
            [str(self.python), "-c", code], env=self.env, capture_output=True, text=True, check=True, timeout=60
        )
        return done.stdout.strip()

    def installed(self) -> dict[str, str]:
        """name -> version of what the venv holds."""
        out = self.python_eval(
            "import importlib.metadata as m; print('\\n'.join(f'{d.metadata[\"Name\"]}=={d.version}' "
            "for d in m.distributions()))"
        )
        return dict(line.split("==", 1) for line in out.splitlines() if line)
