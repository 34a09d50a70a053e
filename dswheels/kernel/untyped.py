"""Typed reads of parsed YAML or JSON: ``object`` in, ``str``/``int``/``bool``/lists/mappings out.

Every file dswheels reads back (compat.yml, a doctor facts document, ...) arrives as nested
``dict``/``list``/scalars typed ``object``. :class:`Untyped` narrows them one getter at a time,
and anything of the wrong shape raises at once, naming the path of the value
(``.torch.2.9.latest``, ``facts.toolkits[0].root``). A subclass words the error for its file
(:meth:`Untyped.fail`) and adds that file's conventions, such as defaults for absent values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["Untyped"]


class Untyped:
    """One value of a parsed document and where it is (``path``)."""

    mapping_word: ClassVar[str] = "a mapping"  # what errors call a mapping ("an object" in JSON files)

    __slots__ = ("data", "path")

    def __init__(self, data: object, path: str = "") -> None:
        self.data = data
        self.path = path

    def fail(self, expected: str) -> ValueError:
        """The error for a value that is not ``expected`` (e.g. "a string")."""
        return ValueError(f"{self.path}: expected {expected}")

    def _child(self, key: str | int, data: object) -> Self:
        return type(self)(data, f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}")

    # --- containers -------------------------------------------------------------------------

    def map(self) -> dict[str, object]:
        if not isinstance(self.data, dict):
            raise self.fail(self.mapping_word)
        return {str(k): v for k, v in self.data.items()}

    def at(self, key: str) -> Self:
        """The value under ``key`` of a mapping; an absent key reads as ``None``."""
        return self._child(key, self.map().get(key))

    def opt(self, key: str) -> Self | None:
        """The value under ``key`` of a mapping, or None when the key is absent."""
        mapping = self.map()
        return self._child(key, mapping[key]) if key in mapping else None

    def items(self) -> list[tuple[str, Self]]:
        """The keys and values of a mapping."""
        return [(key, self._child(key, value)) for key, value in self.map().items()]

    def seq(self) -> list[Self]:
        """The elements of a list."""
        if not isinstance(self.data, list):
            raise self.fail("a list")
        return [self._child(i, item) for i, item in enumerate(self.data)]

    # --- scalars ----------------------------------------------------------------------------

    def text(self) -> str:
        if not isinstance(self.data, str):
            raise self.fail("a string")
        return self.data

    def integer(self) -> int:
        if isinstance(self.data, bool) or not isinstance(self.data, int):
            raise self.fail("an integer")
        return self.data

    def flag(self) -> bool:
        if not isinstance(self.data, bool):
            raise self.fail("true or false")
        return self.data

    def strs(self) -> tuple[str, ...]:
        """A list of strings."""
        return tuple(item.text() for item in self.seq())

    def opt_text(self) -> str | None:
        return None if self.data is None else self.text()

    def opt_integer(self) -> int | None:
        return None if self.data is None else self.integer()

    def opt_flag(self) -> bool | None:
        return None if self.data is None else self.flag()
