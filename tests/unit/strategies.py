"""Hypothesis strategies for cells, drawn from the shipped compatibility facts."""

from __future__ import annotations

from hypothesis import strategies as st

from dswheels.core.compat import load_compat
from dswheels.core.model import Cell, Platform, Python, Variant

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
