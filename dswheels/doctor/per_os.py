"""What doctor says and assumes per OS, as data: one row per :class:`~dswheels.kernel.model.OS`.

A machine is read by the row of its conventions (:func:`~dswheels.kernel.platform_traits.conventions`:
Windows' for Windows, Linux's for every other OS), so the checks, fixes and guidance compare no OS
names: they fill in the row's words. What the OS itself is (its paths, compiler, runtime floor) is in
:mod:`dswheels.kernel.platform_traits`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from dswheels.kernel.model import OS
from dswheels.kernel.platform_traits import conventions

__all__ = ["OS_WORDS", "OsWords", "words_for"]


@dataclass(frozen=True, kw_only=True, slots=True)
class OsWords:
    """Doctor's words for one OS's shells and installers (``{...}``: filled in where they are said)."""

    toolkit_example: str  # a toolkit's root there, for CUDA {cuda}
    toolkits_looked_at: str  # where a machine's toolkits are looked for
    # torch's last guess at CUDA_HOME among the standard places: that path (None: any toolkit there, as the
    # Windows installer's folder is globbed)
    torch_fallback: str | None
    # CUDA_HOME's guidance: lines before, per kind of environment (conda, venv, system: {example}, {scripts}), after
    guidance_first: tuple[str, ...] = ()
    guidance: Mapping[str, tuple[str, ...]]
    guidance_last: tuple[str, ...] = ()
    set_cuda_home: Mapping[str, str]  # kind of environment ("conda", or "" for the others) -> the command ({root})
    install_toolkit: str  # {release}, {cuda}, {components}: the installer's components, said when known
    dev_packages: str  # a toolkit without the library headers: {version}, {dashed} (12-8), {packages}
    pypi_torch_cuda: bool  # PyPI's plain torch wheels there are CUDA builds (compat.yml's torch_pypi_linux_variant)
    narrow_python: str | None  # sysconfig's platform of a 32-bit CPython doctor names there (None: none)
    narrow_python_fix: str = ""


_CONDA_REACTIVATE = " (then conda deactivate && conda activate)"
_ARCHIVE = "https://developer.nvidia.com/cuda-toolkit-archive"

OS_WORDS: Mapping[OS, OsWords] = MappingProxyType(
    {
        OS.WINDOWS: OsWords(
            toolkit_example="C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{cuda}",
            toolkits_looked_at="CUDA_HOME, CUDA_PATH, CUDA_PATH_V*, nvcc on PATH, "
            "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA",
            torch_fallback=None,
            guidance_first=(
                (
                    "The CUDA installer sets CUDA_PATH (and CUDA_PATH_Vxx_y per version); torch uses CUDA_HOME first, "
                    "then CUDA_PATH. With several toolkits, set CUDA_HOME to the one matching torch's CUDA."
                ),
            ),
            guidance={
                "conda": (
                    'conda: conda env config vars set CUDA_HOME="{example}" and re-activate the environment;',
                    (
                        "       or install the toolkit into the env (conda install -c nvidia cuda-toolkit=X.Y) and set "
                        "CUDA_HOME=%CONDA_PREFIX%\\Library"
                    ),
                ),
                "venv": (
                    'venv: add  set "CUDA_HOME={example}"  to {scripts}\\activate.bat and ',
                    '      $env:CUDA_HOME = "{example}"  to {scripts}\\Activate.ps1',
                ),
                "system": ('system: setx CUDA_HOME "{example}"  (applies to new terminals)',),
            },
            set_cuda_home={
                "conda": 'conda env config vars set CUDA_HOME="{root}"' + _CONDA_REACTIVATE,
                "": 'setx CUDA_HOME "{root}" (new terminals), or $env:CUDA_HOME = "{root}" for this PowerShell',
            },
            install_toolkit=f"install the CUDA {{release}} toolkit from {_ARCHIVE}{{components}}; it sets CUDA_PATH",
            dev_packages="re-run the CUDA {version} installer with the components {packages}",
            pypi_torch_cuda=False,
            narrow_python="win32",
            narrow_python_fix="install 64-bit Python from python.org (the 'Windows installer (64-bit)') and create "
            "the venv with it",
        ),
        OS.LINUX: OsWords(
            toolkit_example="/usr/local/cuda-{cuda}",
            toolkits_looked_at="CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda*, /opt/cuda, $CONDA_PREFIX",
            torch_fallback="/usr/local/cuda",
            guidance={
                "conda": (
                    "conda: conda env config vars set CUDA_HOME={example}; conda deactivate; conda activate <env>",
                    (
                        "       or use the env's own toolkit: conda install -c nvidia cuda-toolkit=X.Y, then "
                        "CUDA_HOME=$CONDA_PREFIX (headers may live in $CONDA_PREFIX/targets/x86_64-linux/include: "
                        "set CUDA_INC_PATH to it)"
                    ),
                ),
                "venv": ("venv: echo 'export CUDA_HOME={example}' >> {scripts}/activate  (set on every activation)",),
                "system": ("system: add  export CUDA_HOME={example}  to ~/.bashrc (or ~/.profile)",),
            },
            guidance_last=(
                (
                    "Avoid relying on nvcc on PATH: torch takes the parent of its bin/ as CUDA_HOME, which is wrong "
                    "for wrapper scripts such as /usr/local/bin/nvcc."
                ),
            ),
            set_cuda_home={
                "conda": "conda env config vars set CUDA_HOME={root}" + _CONDA_REACTIVATE,
                "": "export CUDA_HOME={root}",
            },
            install_toolkit=f"install the CUDA {{release}} toolkit ({_ARCHIVE}, or conda install -c nvidia "
            "cuda-toolkit={cuda}) and set CUDA_HOME to it",
            dev_packages="install the dev packages: apt install cuda-libraries-dev-{dashed} (NVIDIA's apt repository), "
            "or conda install -c nvidia libcublas-dev libcurand-dev libcusparse-dev libcusolver-dev",
            pypi_torch_cuda=True,
            narrow_python=None,
        ),
    }
)


def words_for(os_name: str) -> OsWords:
    """The words for a machine of ``os_name`` (``platform.system()``, lower case; any OS reads as its conventions').

    >>> words_for("darwin") is OS_WORDS[OS.LINUX], words_for("windows").pypi_torch_cuda
    (True, False)
    """
    return OS_WORDS[conventions(os_name).os]
