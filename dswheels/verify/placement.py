"""Whether every extension of a wheel sits where its op is imported from.

DeepSpeed loads a prebuilt op with ``importlib.import_module(builder.absolute_name())``
(op_builder/builder.py, ``OpBuilder.load``): the file must be at that module's path, or loading
the op raises ``ModuleNotFoundError`` wherever DeepSpeed's own code calls ``load()``. Each
extension file is judged against the modules the wheel's builders name (read, never run, by
:func:`dswheels.kernel.wheel_contents.builder_modules`; or a build manifest's record of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.wheel_contents import EXTENSION_SUFFIXES, extension_for_module

__all__ = ["Placement", "expected_file", "module_of_extension", "place_extensions"]


def module_of_extension(member: str) -> str:
    """The module an extension file imports as: its folders, then its name up to the first dot.

    >>> module_of_extension("deepspeed/inference/v2/kernelsinference_core_ops.cp311-win_amd64.pyd")
    'deepspeed.inference.v2.kernelsinference_core_ops'
    """
    folder, _, filename = member.rpartition("/")
    leaf = filename.split(".", 1)[0]
    return f"{folder.replace('/', '.')}.{leaf}" if folder else leaf


def expected_file(module: str) -> str:
    """Where an extension importing as ``module`` sits, whatever its platform suffix.

    >>> expected_file("deepspeed.ops.adam.cpu_adam_op")
    'deepspeed/ops/adam/cpu_adam_op.*.so|.pyd'
    """
    return module.replace(".", "/") + ".*.so|.pyd"


@dataclass(frozen=True, kw_only=True, slots=True)
class Placement:
    """One extension file: the module it imports as, and the op whose builder imports that module."""

    member: str
    module: str
    op: str  # "" when no op's builder imports ``module``
    problem: str = ""  # "" when loading ``op`` imports this file

    @property
    def ok(self) -> bool:
        return not self.problem


def _lost_separator(module: str, wanted: str) -> bool:
    """The same path but for dots (folder separators) missing or added.

    >>> _lost_separator("deepspeed.inference.v2.kernelsinference_core_ops",
    ...                 "deepspeed.inference.v2.kernels.inference_core_ops")
    True
    """
    return module != wanted and module.replace(".", "") == wanted.replace(".", "")


def _misplaced(member: str, module: str, op: str, wanted: str) -> str:
    cause = "a folder separator is lost or added in the path: " if _lost_separator(module, wanted) else ""
    return (
        f"{member} imports as {module}, but {op}'s builder loads {wanted} (its absolute_name()): {cause}"
        f"loading {op} raises ModuleNotFoundError wherever DeepSpeed calls its builder's load()"
    )


def place_extensions(
    names: Sequence[str], *, built: Sequence[str], modules: Mapping[str, Sequence[str]]
) -> tuple[Placement, ...]:
    """Every extension under ``deepspeed/`` against the modules the ops' builders import (``modules``:
    op -> its builders' ``absolute_name()``); ``built``: the ops ``installed_ops`` marks built.

    An extension no builder imports is a problem: nothing loads it. When a built op has no file
    at its module and this file's name holds the op's (or a separator is all that differs), the
    problem names that op: it is the op's extension, put where its builder does not look.

    >>> modules = {"cpu_adam": ["deepspeed.ops.adam.cpu_adam_op"],
    ...            "inference_core_ops": ["deepspeed.inference.v2.kernels.inference_core_ops"]}
    >>> names = ["deepspeed/ops/adam/cpu_adam_op.so", "deepspeed/inference/v2/kernelsinference_core_ops.pyd"]
    >>> [(p.op, p.ok) for p in place_extensions(names, built=list(modules), modules=modules)]
    [('cpu_adam', True), ('inference_core_ops', False)]
    """
    owner: dict[str, str] = {}
    for op, candidates in modules.items():
        for module in candidates:
            owner.setdefault(module, op)
    homeless = [
        op for op in built if modules.get(op) and all(extension_for_module(m, names) is None for m in modules[op])
    ]
    placed = []
    for member in names:
        if not (member.startswith("deepspeed/") and member.endswith(EXTENSION_SUFFIXES)):
            continue
        module = module_of_extension(member)
        if module in owner:
            placed.append(Placement(member=member, module=module, op=owner[module]))
            continue
        leaf = module.rpartition(".")[2]
        near = next(
            (
                (op, wanted)
                for op in homeless
                for wanted in modules[op]
                if _lost_separator(module, wanted) or op in leaf or wanted.rpartition(".")[2] in leaf
            ),
            None,
        )
        if near is not None:
            op, wanted = near
            placed.append(
                Placement(member=member, module=module, op=op, problem=_misplaced(member, module, op, wanted))
            )
        else:
            problem = f"{member} imports as {module}, which no op's builder loads (absolute_name()): nothing imports it"
            placed.append(Placement(member=member, module=module, op="", problem=problem))
    return tuple(placed)
