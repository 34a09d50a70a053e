from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dswheels.kernel.versions import format_version, parse_range, parse_version

versions = st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4).map(tuple)


@given(versions)
def test_parse_format_roundtrip(version: tuple[int, ...]) -> None:
    assert parse_version(format_version(version)) == version


@pytest.mark.parametrize(
    ("text", "version", "expected"),
    [
        (">=2.9,<2.12", (2, 9), True),
        (">=2.9,<2.12", (2, 12), False),
        (">=2.9,<2.12", (2, 10), True),  # 2.10 > 2.9: numeric, not lexical
        ("<=0.19.6", (0, 19, 6), True),
        ("<=0.19.6", (0, 19, 7), False),
        ("==2.0", (2, 0), True),
        ("==2.0", (2, 0, 1), False),
        ("==2.9.*", (2, 9, 1), True),
        ("!=2.9.*", (2, 9, 1), False),
        (">=13", (13, 0), True),
        (">=13", (12, 9), False),
        (">=2.9", (2, 9, 0), True),  # 2.9 == 2.9.0
        ("", (1,), True),
    ],
)
def test_range_membership(text: str, version: tuple[int, ...], expected: bool) -> None:
    assert (version in parse_range(text)) is expected


@pytest.mark.parametrize("bad", ["2.x", ">=", "~=2.9", ">2.9.*", "2.9"])
def test_bad_range_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match=r"range|clause|only works"):
        parse_range(bad)


@pytest.mark.parametrize("bad", ["", "2.x", "v2.9", "2..9"])
def test_bad_version_is_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="plain dotted version"):
        parse_version(bad)
