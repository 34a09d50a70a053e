"""The flags DeepSpeed's op builders hand the compilers, as data.

:mod:`dswheels.probes.op_flags` runs the builders of a real source tree in the build
interpreter and prints what each ``builder()`` passed to torch's ``CppExtension`` /
``CUDAExtension``; :func:`parse_probe` reads that answer into :class:`OpFlags`, one per op
and evaluation context. Paths that differ between machines (the CUDA toolkit root) become
``$CUDA_HOME``, so the same flags read the same everywhere (and can be recorded).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dswheels.kernel.untyped import Untyped

__all__ = [
    "CUDA_HOME_TOKEN",
    "MARK",
    "ContextFlags",
    "EvalContext",
    "JobFlags",
    "OpFlags",
    "ProbeAnswer",
    "ProbeJob",
    "parse_probe",
    "probe_request",
]

MARK = "DSWHEELS-OPFLAGS "  # the probe's result line (dswheels.probes.op_flags.MARK)
CUDA_HOME_TOKEN = "$CUDA_HOME"  # noqa: S105 - a placeholder, not a secret
_PROBE_CUDA_HOME = "/dswheels-cuda-home"  # the probe's stand-in toolkit root


@dataclass(frozen=True, slots=True)
class EvalContext:
    """What the builders are told about the machine; ``None`` leaves the real one.

    ``platform``: ``win32``/``linux`` (``sys.platform``); ``cuda``: the toolkit ``X.Y``;
    ``torch``: ``MAJOR.MINOR``; ``arch_list``: ``TORCH_CUDA_ARCH_LIST``; ``isolate``: every op
    starts from ``arch_list`` (else each sees what the ops before it left, as in setup.py).
    """

    platform: str | None = None
    cuda: str | None = None
    torch: str | None = None
    arch_list: str | None = None
    isolate: bool = False

    def as_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            key: value
            for key, value in (
                ("platform", self.platform),
                ("cuda", self.cuda),
                ("torch", self.torch),
                ("arch_list", self.arch_list),
            )
            if value is not None
        }
        if self.isolate:
            data["isolate"] = True
        return data


@dataclass(frozen=True, slots=True)
class OpFlags:
    """One op's extension as ``builder()`` creates it (``error``: builder() raised instead)."""

    op: str
    extension: str  # "CppExtension" | "CUDAExtension" | "" (no extension: see error)
    cxx: tuple[str, ...]  # extra_compile_args["cxx"]: the host compiler (cl / g++), .cpp files
    nvcc: tuple[str, ...] | None  # extra_compile_args["nvcc"]: .cu files (None for a CppExtension)
    link: tuple[str, ...] = ()  # extra_link_args: the linker (link.exe / the g++ driver)
    libraries: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()  # relative to the source tree where they are inside it
    compatible: bool = True  # its is_compatible(), which setup.py asks first
    error: str = ""

    @property
    def cuda(self) -> bool:
        return self.extension == "CUDAExtension"

    def as_json(self) -> dict[str, object]:
        return {
            "extension": self.extension,
            "cxx": list(self.cxx),
            "nvcc": None if self.nvcc is None else list(self.nvcc),
            "link": list(self.link),
            "libraries": list(self.libraries),
            "include_dirs": list(self.include_dirs),
            **({} if self.compatible else {"compatible": False}),
            **({"error": self.error} if self.error else {}),
        }

    @classmethod
    def from_json(cls, op: str, node: Untyped) -> OpFlags:
        nvcc = node.at("nvcc")
        compatible = node.at("compatible").opt_flag()
        return cls(
            op=op,
            extension=node.at("extension").opt_text() or "",
            cxx=node.at("cxx").strs() if node.at("cxx").data is not None else (),
            nvcc=None if nvcc.data is None else nvcc.strs(),
            link=node.at("link").strs() if node.at("link").data is not None else (),
            libraries=node.at("libraries").strs() if node.at("libraries").data is not None else (),
            include_dirs=node.at("include_dirs").strs() if node.at("include_dirs").data is not None else (),
            compatible=True if compatible is None else compatible,
            error=node.at("error").opt_text() or "",
        )


@dataclass(frozen=True, slots=True)
class ContextFlags:
    context: EvalContext
    ops: Mapping[str, OpFlags]


@dataclass(frozen=True, slots=True)
class ProbeJob:
    """One source tree to evaluate: ``None`` keeps the probe's default (cwd, DS_ACCELERATOR, all ops)."""

    tree: str | None = None
    accelerator: str | None = None
    ops: tuple[str, ...] | None = None
    contexts: tuple[EvalContext, ...] = (EvalContext(),)

    def as_json(self) -> dict[str, object]:
        return {
            "tree": self.tree,
            "accelerator": self.accelerator,
            "ops": None if self.ops is None else list(self.ops),
            "contexts": [c.as_json() for c in self.contexts],
        }


@dataclass(frozen=True, slots=True)
class JobFlags:
    tree: str
    accelerator: str  # the accelerator DeepSpeed picked
    results: tuple[ContextFlags, ...]  # one per context, in the request's order
    error: str = ""  # the tree's op builders could not even be imported (setup.py would stop the same way)


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    platform: str  # the real sys.platform of the build interpreter
    jobs: tuple[JobFlags, ...]  # in the request's order


def probe_request(jobs: Sequence[ProbeJob]) -> str:
    """The probe's one argument.

    >>> probe_request([ProbeJob(ops=("cpu_adam",), contexts=(EvalContext(platform="win32", isolate=True),))])
    '{"jobs": [{"tree": null, "accelerator": null, "ops": ["cpu_adam"], "contexts": [{"platform": "win32", \
"isolate": true}]}]}'
    """
    return json.dumps({"jobs": [job.as_json() for job in jobs]})


def _normalize(flag: str, cuda_homes: Sequence[str]) -> str:
    for home in cuda_homes:
        if home and home in flag:
            flag = flag.replace(home, CUDA_HOME_TOKEN)
    return flag


def _context(node: Untyped) -> EvalContext:
    return EvalContext(
        platform=node.at("platform").opt_text(),
        cuda=node.at("cuda").opt_text(),
        torch=node.at("torch").opt_text(),
        arch_list=node.at("arch_list").opt_text(),
        isolate=bool(node.at("isolate").opt_flag()),
    )


def _normalized(raw: OpFlags, homes: Sequence[str]) -> OpFlags:
    return OpFlags(
        op=raw.op,
        extension=raw.extension,
        cxx=tuple(_normalize(f, homes) for f in raw.cxx),
        nvcc=None if raw.nvcc is None else tuple(_normalize(f, homes) for f in raw.nvcc),
        link=tuple(_normalize(f, homes) for f in raw.link),
        libraries=raw.libraries,
        include_dirs=tuple(_normalize(f, homes) for f in raw.include_dirs),
        compatible=raw.compatible,
        error=raw.error,
    )


def parse_probe(payload: str, *, cuda_home: str | None = None) -> ProbeAnswer:
    r"""Read the probe's JSON (the text after :data:`MARK`); ``cuda_home`` becomes ``$CUDA_HOME``.

    >>> answer = parse_probe('{"platform": "linux", "jobs": [{"tree": "/src", "accelerator": "cuda", "results": '
    ...     '[{"context": {"platform": "win32"}, "ops": {"cpu_adam": {"extension": "CppExtension", "cxx": ["-O2"], '
    ...     '"nvcc": null, "link": ["-L/dswheels-cuda-home/lib"]}}}]}]}')
    >>> answer.jobs[0].results[0].ops["cpu_adam"].link, answer.jobs[0].results[0].context.platform
    (('-L$CUDA_HOME/lib',), 'win32')
    """
    root = Untyped(json.loads(payload), "probe")
    homes = [h for h in (cuda_home, cuda_home.replace("\\", "/") if cuda_home else None, _PROBE_CUDA_HOME) if h]
    jobs = []
    for job in root.at("jobs").seq():
        results = tuple(
            ContextFlags(
                context=_context(item.at("context")),
                ops={name: _normalized(OpFlags.from_json(name, node), homes) for name, node in item.at("ops").items()},
            )
            for item in (job.at("results").seq() if job.at("results").data is not None else [])
        )
        jobs.append(
            JobFlags(
                tree=job.at("tree").text(),
                accelerator=job.at("accelerator").text(),
                results=results,
                error=job.at("error").opt_text() or "",
            )
        )
    return ProbeAnswer(platform=root.at("platform").text(), jobs=tuple(jobs))
