"""A miniature ``deepspeed`` laid out like the real one, for running dswheels' probes against.

Real DeepSpeed needs real torch and compiled ops; the probes only need its shape: a
``git_version_info_installed.py``, ``ops/op_builder/builder.py`` whose ``OpBuilder.load()``
imports the prebuilt module or calls ``jit_load()`` (DeepSpeed's own logic, reduced),
``all_ops.ALL_OPS``, and ``accelerator.get_accelerator()`` picked by ``DS_ACCELERATOR``. The
same builders serve as a source tree's ``op_builder`` (``BUILD_VAR``, ``sources()``,
``is_compatible(verbose)``). A stand-in ``torch`` knows only its version and CUDA.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["deepspeed_package", "source_tree", "torch_package", "write_files"]

BUILDER = '''"""Stand-in for op_builder/builder.py: load() imports the prebuilt op, else JIT-compiles."""
import importlib
import os
import types


class OpBuilder:
    NAME = ""  # set by each op's builder class, as in DeepSpeed (which builds them without arguments)
    MODULE = ""
    PREBUILT = True  # False: the prebuilt op is unusable here (another torch, another accelerator)
    COMPATIBLE = True

    def __init__(self):
        self.name = self.NAME
        self.BUILD_VAR = "DS_BUILD_" + self.NAME.upper()

    def absolute_name(self):
        return self.MODULE

    def sources(self):
        return ["csrc/" + self.name + ".cpp"]

    def is_compatible(self, verbose=False):
        if verbose and not self.COMPATIBLE:
            print(self.name + " requires a library this machine lacks")
        return self.COMPATIBLE

    def builder(self):
        """What setup.py compiles: torch's CppExtension with this op's flags."""
        from torch.utils.cpp_extension import CppExtension

        return CppExtension(
            name=self.absolute_name(),
            sources=self.sources(),
            extra_compile_args={"cxx": ["-O3", "-std=c++17"]},
            include_dirs=[os.path.abspath("csrc/includes")],
        )

    def load(self, verbose=True):
        if self.PREBUILT:
            return importlib.import_module(self.MODULE)
        return self.jit_load(verbose)

    def jit_load(self, verbose=True):
        """What DeepSpeed does when the prebuilt op is unusable: compile into TORCH_EXTENSIONS_DIR."""
        return compile_op(self.name)


def compile_op(name):
    where = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], name)
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, name + ".so"), "w") as fh:
        fh.write("compiled just in time")
    return types.ModuleType(name)
'''

ALL_OPS = '''"""Stand-in for op_builder/all_ops.py: ALL_OPS maps op name -> builder."""
from .builder import OpBuilder, compile_op


class JitBuilder(OpBuilder):
    PREBUILT = False


class StrayBuilder(OpBuilder):
    """An op that compiles itself without DeepSpeed's jit_load (what forbidding jit_load cannot stop)."""

    def load(self, verbose=True):
        return compile_op(self.name)


class AioBuilder(OpBuilder):
    COMPATIBLE = False


def _op(kind, name, module):
    """One op's builder class (CPUAdamBuilder...), instantiated as all_ops does."""
    return type(name + "_builder", (kind,), {"NAME": name, "MODULE": module})()


KIND = {"prebuilt": OpBuilder, "jit": JitBuilder, "stray": StrayBuilder}[__KIND__]
ALL_OPS = {
    "cpu_adam": _op(KIND, "cpu_adam", "deepspeed.ops.adam.cpu_adam_op"),
    "fused_adam": _op(KIND, "fused_adam", "deepspeed.ops.adam.fused_adam_op"),
    "async_io": _op(AioBuilder, "async_io", "deepspeed.ops.aio.async_io_op"),
}
'''

ACCELERATOR = '''"""Stand-in for accelerator/: DS_ACCELERATOR picks it, as in DeepSpeed."""
import os


class _Accelerator:
    def __init__(self, name):
        self._name = name


def get_accelerator():
    return _Accelerator(os.environ.get("DS_ACCELERATOR", "cpu"))
'''


def deepspeed_package(*, version: str, accelerator: str, torch_minor: str, cuda: str, kind: str) -> dict[str, str]:
    """The files of an installed stand-in DeepSpeed (``kind``: prebuilt, jit or stray ops)."""
    info = (
        f"version={version!r}\ngit_hash='0000000'\ngit_branch='HEAD'\n"
        "installed_ops={'async_io': False, 'cpu_adam': 1, 'fused_adam': 1}\n"
        f"accelerator_name={accelerator!r}\n"
        f"torch_info={{'version': {torch_minor!r}, 'bf16_support': False, "
        f"'cuda_version': {cuda or '0.0'!r}, 'nccl_version': '0.0', 'hip_version': '0.0'}}\n"
    )
    return {
        "deepspeed/__init__.py": '"""A stand-in for DeepSpeed made by dswheels\' tests."""\n'
        "from deepspeed.git_version_info import version as __version__\n",
        "deepspeed/git_version_info.py": "from .git_version_info_installed import (  # noqa\n"
        "    accelerator_name, git_branch, git_hash, installed_ops, torch_info, version)\n",
        "deepspeed/git_version_info_installed.py": info,
        "deepspeed/ops/__init__.py": "",
        "deepspeed/ops/op_builder/__init__.py": "",
        "deepspeed/ops/op_builder/builder.py": BUILDER,
        "deepspeed/ops/op_builder/all_ops.py": ALL_OPS.replace("__KIND__", repr(kind)),
        "deepspeed/accelerator/__init__.py": ACCELERATOR,
        "deepspeed/ops/adam/__init__.py": "",
        "deepspeed/ops/adam/cpu_adam_op.py": '"""stand-in for the compiled cpu_adam extension"""\n',
        "deepspeed/ops/adam/fused_adam_op.py": '"""stand-in for the compiled fused_adam extension"""\n',
    }


def source_tree(*, kind: str = "prebuilt") -> dict[str, str]:
    """A DeepSpeed source tree's ``op_builder`` and ``accelerator``, as setup.py imports them."""
    return {
        "op_builder/__init__.py": "",
        "op_builder/builder.py": BUILDER,
        "op_builder/all_ops.py": ALL_OPS.replace("__KIND__", repr(kind)),
        "accelerator/__init__.py": ACCELERATOR,
    }


def torch_package(version: str, cuda: str | None = None) -> dict[str, str]:
    """A ``torch`` that knows its version and CUDA (``torch.version``, as torch's version.py spells them)
    and has ``torch.utils.cpp_extension`` (what DeepSpeed's builders hand their flags to)."""
    return {
        "torch/__init__.py": "from torch import version\n__version__ = version.__version__\n",
        "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = None\n",
        "torch/utils/__init__.py": "",
        "torch/utils/cpp_extension.py": "CUDA_HOME = None\n\n\ndef CppExtension(name, sources, **kwargs):\n"
        "    raise RuntimeError('a stand-in: nothing compiles')\n\n\nCUDAExtension = CppExtension\n",
    }


def write_files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
