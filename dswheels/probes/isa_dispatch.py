"""Which ISA variant of a prebuilt DeepSpeed op this CPU runs: dswheels ships it as ``deepspeed/dswheels_isa.py``.

A DeepSpeed op with SIMD paths (cpu_adam, cpu_adagrad, cpu_lion, ...) is built once per CPU
instruction-set level: ``deepspeed/ops/adam/cpu_adam_op_default``, ``..._avx2``, ``..._avx512``.
DeepSpeed imports the op by one name (``importlib.import_module(builder.absolute_name())``), which
is a small module of the wheel (``cpu_adam_op.py``) calling :func:`load_into`: it imports the best
variant the CPU supports and takes over its names.

"Supports" is torch's own answer, as for its own CPU kernels: ``torch.backends.cpu.get_cpu_capability()``
(DEFAULT, AVX2, AVX512), which ``ATEN_CPU_CAPABILITY=default|avx2|avx512`` overrides. A variant
above that answer is never loaded; an answer below every variant the wheel has is an ImportError
that says so.

The build (dswheels.probes.isa_variants) copies this file into the wheel and fills in
:data:`LEVELS` and :data:`OPS`. Standard library only, besides the torch it asks; Python 3.10+.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping, Sequence

__all__ = ["LEVELS", "OPS", "capability", "choose", "describe", "load_into", "rank"]

# (suffix, level) per variant, the wheel's baseline first: the suffix is torch's capability in lower case, the
# level the compat.yml cpu_baseline the variant is compiled for
LEVELS: tuple[tuple[str, str], ...] = ()
# op -> the module DeepSpeed imports it as (its builder's absolute_name()); each variant is <module>_<suffix>
OPS: dict[str, str] = {}

_ORDER = ("default", "avx2", "avx512")  # torch's x86 CPU capabilities, lowest first


def rank(capability: str) -> int:
    """Where a torch CPU capability sits among the x86 ones; anything unknown ranks as DEFAULT.

    >>> rank("AVX512"), rank("avx2"), rank("DEFAULT"), rank("ZVECTOR")
    (2, 1, 0, 0)
    """
    name = capability.lower()
    if name.startswith("avx512"):  # AVX512 (and an AVX512_256 some torch releases had): the CPU has AVX-512
        return 2
    return _ORDER.index(name) if name in _ORDER else 0


def capability() -> str:
    """torch's CPU capability in this process (ATEN_CPU_CAPABILITY included), e.g. ``AVX512``."""
    torch = importlib.import_module("torch")
    backend = getattr(getattr(torch, "backends", None), "cpu", None)
    ask = getattr(backend, "get_cpu_capability", None) or getattr(torch._C, "_get_cpu_capability", None)  # noqa: SLF001
    return str(ask()) if ask is not None else "DEFAULT"


def choose(answer: str, suffixes: Sequence[str]) -> str | None:
    """The best of ``suffixes`` a CPU with torch capability ``answer`` runs; None when none is low enough.

    >>> choose("AVX512", ["default", "avx2", "avx512"]), choose("AVX2", ["default", "avx2", "avx512"])
    ('avx512', 'avx2')
    >>> choose("DEFAULT", ["default", "avx2", "avx512"]), choose("DEFAULT", ["avx2", "avx512"])
    ('default', None)
    """
    fitting = [s for s in suffixes if rank(s) <= rank(answer)]
    return max(fitting, key=rank) if fitting else None


def _variant(name: str) -> tuple[str, str]:
    """(suffix, capability) of the variant of module ``name`` this process loads; ImportError without one."""
    answer = capability()
    suffixes = [suffix for suffix, _level in LEVELS]
    picked = choose(answer, suffixes)
    if picked is None:
        lowest = LEVELS[0][1] if LEVELS else "?"
        msg = (
            f"{name}: this wheel's CPU ops need at least {lowest} ({', '.join(suffixes)} variants), and torch "
            f"says this CPU is {answer} (torch.backends.cpu.get_cpu_capability()): install a wheel built "
            "for an older CPU baseline"
        )
        raise ImportError(msg)
    return picked, answer


def load_into(namespace: MutableMapping[str, object]) -> None:
    """Make the module whose globals are ``namespace`` the variant this CPU runs: its names, and
    ``__dswheels_variant__`` (the variant's suffix)."""
    name = str(namespace["__name__"])
    suffix, _answer = _variant(name)
    module = importlib.import_module(f"{name}_{suffix}")
    namespace.update({key: value for key, value in vars(module).items() if not key.startswith("__")})
    namespace["__dswheels_variant__"] = suffix
    namespace["__dswheels_variants__"] = tuple(s for s, _level in LEVELS)


def describe() -> str:
    """One line for ds_report: the variant that loads here, of which, for which ops."""
    if not OPS:
        return "none (no op of this wheel has SIMD paths)"
    answer = capability()
    suffixes = [suffix for suffix, _level in LEVELS]
    picked = choose(answer, suffixes)
    here = f"{picked} ({dict(LEVELS)[picked]})" if picked else "NONE (this CPU is below every variant)"
    return f"{here} of {', '.join(suffixes)}; torch CPU capability {answer}; ops: {', '.join(sorted(OPS))}"
