"""Hypothesis strategies for cells, drawn from the shipped compatibility facts."""

from __future__ import annotations

from hypothesis import strategies as st

from dswheels.kernel.binaries.linux_runtime import RuntimeFloor
from dswheels.kernel.compat import load_compat
from dswheels.kernel.model import (
    Cell,
    DroppedCell,
    HostCompiler,
    OpPlan,
    Plan,
    PlannedCell,
    Platform,
    Python,
    Reason,
    Source,
    SourceKind,
    Toolchain,
    Variant,
)

COMPAT = load_compat()

TORCH_MINORS = sorted(COMPAT.torch)
VARIANTS = sorted({v for r in COMPAT.torch.values() for os in r.variants for v in r.variants_for(os)})
PYTHONS = sorted({p for r in COMPAT.torch.values() for pys in r.python.values() for p in pys})

deepspeed_versions = st.sampled_from(COMPAT.deepspeed_releases)
torch_minors = st.sampled_from(TORCH_MINORS)
variants = st.sampled_from(VARIANTS)
pythons = st.sampled_from(PYTHONS)
platforms = st.sampled_from(list(Platform))

# any combination of known axis values: most are forbidden by some rule, which is the point
cells = st.builds(
    Cell,
    deepspeed=deepspeed_versions,
    torch=torch_minors,
    variant=variants,
    python=pythons,
    platform=platforms,
)

# cells with arbitrary (not necessarily released) values, for naming round trips
any_cells = st.builds(
    Cell,
    deepspeed=st.tuples(st.integers(0, 9), st.integers(0, 99), st.integers(0, 99)),
    torch=st.tuples(st.integers(1, 9), st.integers(0, 99)),
    variant=st.one_of(
        st.just(Variant(name="cpu", cuda=None)),
        st.tuples(st.integers(10, 99), st.integers(0, 9)).map(lambda mm: Variant.parse(f"cu{mm[0]}{mm[1]}")),
    ),
    python=st.builds(Python, version=st.tuples(st.just(3), st.integers(8, 99)), free_threaded=st.booleans()),
    platform=platforms,
)

# planned cells and plans with arbitrary values (not what the planner makes), for the plan JSON round trip
texts = st.text(max_size=30)
words = st.text(st.characters(exclude_categories=["Cs"], exclude_characters=";,"), min_size=1, max_size=12)
versions = st.lists(st.integers(0, 99), min_size=1, max_size=3).map(tuple)
# version text the plan's JSON holds in ASCII digits (a torch release, a toolkit, a compiler; "" for none)
dotted = versions.map(lambda v: ".".join(map(str, v)))
releases = st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)).map(lambda v: f"{v[0]}.{v[1]}.{v[2]}")
arch_tokens = st.sampled_from(["7.5", "8.0", "8.6", "9.0a", "10.0f", "12.0+PTX", "12.0a+PTX"])
floors = st.builds(
    RuntimeFloor,
    glibc=st.none() | versions,
    glibcxx=st.none() | versions,
    cxxabi=st.none() | versions,
    private=st.lists(words.map(str.strip).filter(bool), max_size=2).map(tuple),
)
toolchains = st.builds(
    Toolchain,
    runner_image=texts,
    runs_on=st.lists(texts, max_size=3).map(tuple),
    host_compiler=st.builds(
        HostCompiler, kind=st.sampled_from(["gcc", "msvc"]), version=st.just("") | dotted, why=texts
    ),
    nvcc=st.none() | st.tuples(st.integers(10, 13), st.integers(0, 9)),
    cuda_toolkit=st.just("") | releases,
    arch_list=st.lists(arch_tokens, max_size=4).map(tuple),
    skip_cuda_check=st.booleans(),
    cuda_check=texts,
    nvcc_flags=st.lists(texts, max_size=3).map(tuple),
    cpu_baseline=texts,
    cuda_components=st.lists(texts, max_size=3).map(tuple),
    notes=st.lists(texts, max_size=3).map(tuple),
    linux_runtime=st.none() | floors,
)
planned_cells = st.builds(
    PlannedCell,
    cell=any_cells,
    torch_version=releases,
    torch_index=texts,
    toolchain=toolchains,
    ops=st.builds(
        OpPlan,
        build=st.lists(st.tuples(texts, words), max_size=4).map(tuple),
        left_out=st.lists(st.tuples(texts, texts), max_size=4).map(tuple),
    ),
    source=st.builds(Source, kind=st.sampled_from(list(SourceKind)), url=texts, sha256=texts),
    smoke_runs_on=st.lists(texts, max_size=3).map(tuple),
)
dropped_cells = st.builds(
    DroppedCell,
    cell=any_cells,
    reasons=st.lists(st.builds(Reason, rule=texts, message=texts, fix=texts, source=texts), max_size=2).map(tuple),
)
plans = st.builds(
    Plan,
    planned=st.lists(planned_cells, max_size=4).map(tuple),
    dropped=st.lists(dropped_cells, max_size=3).map(tuple),
    matrix=texts,
    mode=st.sampled_from(["matrix", "combo", "canary"]),
)
