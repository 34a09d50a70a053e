"""The README's console examples, compared with real runs of their commands.

Every ```` ```console ```` block of README.md follows a comment that names it::

    <!-- example: plan-cell -->
    ```console
    $ dswheels plan --deepspeed 0.15.1 ...
    what it prints
    ```

and holds one command (the ``$`` line) and what it printed. A test runs that command (the cheap
ones: tests/unit/test_readme.py) or takes the output of an integration test's real run of it
(a build, verify's run time, smoke) and calls :func:`check_example`, which fails unless

- the test's argv is the block's command (paths compared as below), and
- the output matches the block line by line, after both are normalised: durations
  (``3m31s``, ``0.8s``), UTC stamps (``20261123T042034Z``) and hex digests of 12 digits or more
  are replaced by placeholders, and the real output's directories are respelt as the README
  spells them (``places``: e.g. the test's working directory -> :data:`README_CWD`).

In a block, a line that is only ``...`` stands for any number of lines (zero included) and
``...`` inside a line for any text: the parts of a run that vary for other reasons than time
(which ops finish first, the compiler cache's hits, samples/s) are left out that way.
tests/unit/test_readme.py also checks that every block is compared by exactly one test.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["README", "README_CACHE", "README_CWD", "Example", "check_example", "examples", "match_lines"]

README = Path(__file__).resolve().parents[2] / "README.md"
# Where the README's examples were run: a clone in a home directory, with dswheels' default cache.
README_CWD = "/home/me/dswheels"
README_CACHE = "/home/me/.cache/dswheels"

_MARKER = re.compile(r"^<!-- example: ([a-z0-9-]+) -->$")
_GAP = "..."
_NORMALISE = (
    (re.compile(r"\b\d{8}T\d{6}Z\b"), "<stamp>"),
    (re.compile(r"(?<![\d.])\b[0-9a-f]{12,}\b"), "<hash>"),  # not the digits of 5.006980895996094e-06
    (re.compile(r"\b\d+h\d{2}m\b|\b\d+m\d{2}s\b|\b\d+(?:\.\d+)?s\b"), "<time>"),
)


@dataclass(frozen=True)
class Example:
    name: str
    line: int  # of the ``$`` line in README.md
    command: str
    output: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)


def examples(text: str | None = None) -> dict[str, Example]:
    """Every named console block of the README (ValueError for an unnamed or malformed one)."""
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: dict[str, Example] = {}
    for number, line in enumerate(lines):
        if line.strip() != "```console":
            continue
        marker = _MARKER.match(lines[number - 1].strip()) if number else None
        if marker is None:
            msg = f"README.md:{number + 1}: a console block without <!-- example: NAME --> on the line before"
            raise ValueError(msg)
        end = next(i for i in range(number + 1, len(lines)) if lines[i].strip() == "```")
        body = lines[number + 1 : end]
        commands = [i for i, text in enumerate(body) if text.startswith("$ ")]
        if commands != [0]:
            msg = f"README.md:{number + 1}: a console block holds exactly one command, on its first line"
            raise ValueError(msg)
        name = marker.group(1)
        if name in found:
            msg = f"README.md:{number + 1}: two examples named {name}"
            raise ValueError(msg)
        found[name] = Example(name=name, line=number + 2, command=body[0][2:], output=tuple(body[1:]))
    return found


def normalise(text: str, places: Mapping[str, str] | None = None) -> str:
    for real, spelt in sorted((places or {}).items(), key=lambda item: -len(item[0])):
        text = text.replace(real, spelt)
    for pattern, placeholder in _NORMALISE:
        text = pattern.sub(placeholder, text)
    return text


def _line_pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in line.rstrip().split(_GAP)))


def match_lines(expected: Sequence[str], actual: Sequence[str]) -> int | None:
    """None when ``actual`` matches ``expected`` (``...`` as above), else the first expected line
    (index) that no alignment gets past."""
    patterns = [None if line.strip() == _GAP else _line_pattern(line) for line in expected]
    best = 0
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        i, j = stack.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        best = max(best, i)
        if i == len(patterns):
            if j == len(actual):
                return None
            continue
        pattern = patterns[i]
        if pattern is None:
            stack.extend((i + 1, k) for k in range(len(actual), j - 1, -1))
        elif j < len(actual) and pattern.fullmatch(actual[j].rstrip()):
            stack.append((i + 1, j + 1))
    return best


def _argv_as_written(argv: Sequence[str], places: Mapping[str, str]) -> list[str]:
    """Real arguments respelt (``places``), paths under README_CWD made relative as a user types them."""
    written = []
    for arg in argv:
        text = normalise(arg, places) if "/" in arg else arg
        written.append(text.removeprefix(README_CWD + "/") if text.startswith(README_CWD + "/") else text)
    return written


def check_example(name: str, *, argv: Sequence[str], output: str, places: Mapping[str, str] | None = None) -> None:
    """Fail unless ``dswheels ARGV`` is the README's example ``name`` and printed what it shows."""
    example = examples()[name]
    places = dict(places or {})
    written = _argv_as_written(argv, places)
    assert example.argv == ["dswheels", *written], (
        f"README.md:{example.line}: example {name!r} shows\n  $ {example.command}\nbut the test ran\n"
        f"  $ {shlex.join(['dswheels', *written])}"
    )
    expected = [normalise(line) for line in example.output]
    actual = normalise(output, places).rstrip("\n").splitlines()
    stuck = match_lines(expected, actual)
    assert stuck is None, (
        (
            f"README.md:{example.line}: the output of example {name!r} is not what the command prints: "
            f"nothing in the real output matches README.md:{example.line + 1 + stuck}:\n  {example.output[stuck]!r}"
            if stuck < len(expected)
            else f"README.md:{example.line}: the real output of example {name!r} goes on past the block's last line"
        )
        + "\n--- the real output (normalised) ---\n"
        + "\n".join(actual)
    )
