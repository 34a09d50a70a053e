"""The human page's line picker, as pytorch.org picks torch's: OS, DeepSpeed, torch, CUDA or CPU and
Python in, the one install line out (pip, uv, or pip as Windows' shells take it), with a copy button.

Plain HTML (radio buttons in a form) and one small script (``pick.js`` beside the page: no inline
script, no external resource, so a strict ``Content-Security-Policy: script-src 'self'`` allows it).
What it shows is data the page carries (``<script type="application/json">``, never run): every
published wheel's line, and for every other combination of the axes' values why there is none, in
the model's own words: the rule that forbids the cell (:class:`dswheels.plan.rules.Judge`, what
``dswheels plan --explain`` prints), else that it is allowed but not published. Without script the
picker stays hidden and :func:`lines_table` (every line, as a table) is the page's answer; the
script reads its lines from the same data the table is made from. Every value reaches the page
escaped: the HTML by :func:`html.escape`, the JSON with ``<``, ``>`` and ``&`` as ``\\u`` escapes
(nothing in it can end the script element), and the script writes only ``textContent``.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.index_links import (
    install_command,
    newest_live,
    partition_order,
    uv_project,
    windows_command,
)
from dswheels.kernel.model import Cell, Platform, Python, Reason, Variant
from dswheels.kernel.naming import wheel_version
from dswheels.kernel.sources import torch_index_url
from dswheels.kernel.versions import TorchMinor, format_version, parse_version

__all__ = ["SCRIPT", "lines_table", "picker", "script"]

SCRIPT = "pick.js"  # beside index.html
Judge = Callable[[Cell], Sequence[Reason]]  # the rules that forbid a cell (none: it is allowed)

_PLATFORM_LABELS = {"linux_x86_64": "Linux x86_64", "win_amd64": "Windows x64"}


@dataclass(frozen=True, slots=True)
class _Line:
    """The lines of one DeepSpeed release in one partition (every Python and OS of it shares them)."""

    anchor: str  # the table row's id
    deepspeed: str
    part: str
    pip: str
    uv: str
    windows: str
    project: str  # the uv project's pyproject.toml lines


def _lines(files: Sequence[IndexFile], *, site_url: str, torch_index: str) -> dict[tuple[str, str], _Line]:
    groups: dict[tuple[str, str], list[IndexFile]] = {}
    for item in files:
        groups.setdefault((format_version(item.published.cell.deepspeed), item.published.partition), []).append(item)
    lines: dict[tuple[str, str], _Line] = {}
    for (ds, part), items in sorted(
        groups.items(), key=lambda kv: (_newest_first(kv[0][0]), partition_order(kv[0][1]))
    ):
        chosen = newest_live(items) or items[0]  # a yanked wheel still has its pinned line
        args = {
            "version": wheel_version(chosen.published.cell),
            "site_url": site_url,
            "part": part,
            "torch_index": torch_index_url(torch_index, part.partition("-torch")[0]),
        }
        lines[ds, part] = _Line(
            anchor=f"line-{ds}-{part}",
            deepspeed=ds,
            part=part,
            pip=install_command(tool="pip", **args),
            uv=install_command(tool="uv", **args),
            windows=windows_command(**args),
            project=uv_project(**args),
        )
    return lines


def _newest_first(version: str) -> tuple[int, ...]:
    return tuple(-x for x in parse_version(version))


def lines_table(files: Sequence[IndexFile], *, site_url: str, torch_index: str) -> list[str]:
    """Every install line, one row per DeepSpeed release and partition: the page's answer without script."""
    body = [
        '<table class="lines">',
        "<tr><th>DeepSpeed</th><th>partition</th><th>pip</th><th>uv</th><th>Windows (cmd, PowerShell)</th></tr>",
    ]
    for line in _lines(files, site_url=site_url, torch_index=torch_index).values():
        cells = "".join(
            f'<td class="{kind}"><code>{html.escape(text)}</code></td>'
            for kind, text in (("pip", line.pip), ("uv", line.uv), ("windows", line.windows))
        )
        body.append(
            f'<tr id="{html.escape(line.anchor)}"><td>{html.escape(line.deepspeed)}</td>'
            f'<td><a href="#{html.escape(line.part)}">{html.escape(line.part)}</a></td>{cells}</tr>'
        )
    body.append("</table>")
    return body


# --- the picker -------------------------------------------------------------------------------------


def _axes(files: Sequence[IndexFile]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(name, legend, [(value, label)]) per axis, newest first: the values some published wheel has."""
    cells = [f.published.cell for f in files]
    platforms = sorted({c.platform.value for c in cells})
    releases = sorted({c.deepspeed for c in cells}, reverse=True)
    torches = sorted({c.torch for c in cells}, reverse=True)
    variants = sorted({c.variant.name for c in cells}, key=lambda v: partition_order(f"{v}-torch0.0"))
    pythons = sorted({c.python for c in cells}, reverse=True)
    return [
        ("os", "OS", [(p, _PLATFORM_LABELS.get(p, p)) for p in platforms]),
        ("deepspeed", "DeepSpeed", [(format_version(v), format_version(v)) for v in releases]),
        ("torch", "torch", [(format_version(t), format_version(t)) for t in torches]),
        ("variant", "CUDA or CPU", [(v, _variant_label(v)) for v in variants]),
        ("python", "Python", [(p.tag, str(p)) for p in pythons]),
    ]


def _variant_label(name: str) -> str:
    cuda = Variant.parse(name).cuda
    return f"CUDA {format_version(cuda)}" if cuda else "CPU"


def _cell(values: Sequence[str]) -> Cell:
    platform, ds, torch, variant, python = values
    return Cell(
        deepspeed=parse_version(ds),
        torch=TorchMinor(parse_version(torch)),
        variant=Variant.parse(variant),
        python=Python.parse(python),
        platform=Platform(platform),
    )


def _key(cell: Cell) -> str:
    """The picker's name of a combination: its axes' values in order (:func:`_axes`)."""
    values = (cell.platform.value, format_version(cell.deepspeed), format_version(cell.torch), cell.variant.name)
    return "|".join([*values, cell.python.tag])


def _reason(cell: Cell, judge: Judge | None) -> str:
    """Why no wheel exists for ``cell``: the rules that forbid it, or that none does and it is not published."""
    reasons = judge(cell) if judge is not None else ()
    if reasons:
        return "; ".join(f"[{r.rule}] {r.message}" + (f" (what would work: {r.fix})" if r.fix else "") for r in reasons)
    return (
        "not published: the rules allow this combination, but no wheel of it is on this index yet "
        "(the wheels workflow builds any combination the rules allow: Actions > wheels > Run workflow)"
    )


def _json(document: object) -> str:
    """JSON that no HTML parser reads as markup: ``<``, ``>`` and ``&`` as escapes (valid JSON still)."""
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _data(files: Sequence[IndexFile], lines: Mapping[tuple[str, str], _Line], judge: Judge | None) -> dict[str, object]:
    axes = _axes(files)
    order = list(lines)
    wheels: dict[str, dict[str, object]] = {}
    for item in sorted(files, key=lambda f: (f.yanked is None, f.published.build.zfill(8))):  # the best one last
        cell = item.published.cell
        key = "|".join(
            [
                cell.platform.value,
                format_version(cell.deepspeed),
                format_version(cell.torch),
                cell.variant.name,
                cell.python.tag,
            ]
        )
        line = order.index((format_version(cell.deepspeed), item.published.partition))
        wheels[key] = {"line": line, "file": item.filename, "yanked": item.yanked}
    reasons: list[str] = []
    why: dict[str, int] = {}
    for values in itertools.product(*([v for v, _label in values] for _name, _legend, values in axes)):
        key = "|".join(values)
        if key in wheels:
            continue
        text = _reason(_cell(values), judge)
        if text not in reasons:
            reasons.append(text)
        why[key] = reasons.index(text)
    return {
        "axes": [{"name": name, "label": legend, "values": [v for v, _l in values]} for name, legend, values in axes],
        "lines": [{"anchor": ln.anchor, "pip": ln.pip, "uv": ln.uv, "windows": ln.windows} for ln in lines.values()],
        "wheels": wheels,
        "reasons": reasons,
        "why": why,
    }


def picker(files: Sequence[IndexFile], *, site_url: str, torch_index: str, judge: Judge | None) -> list[str]:
    """The picker's section of the human page, and the data it shows (hidden until its script runs)."""
    if not files:
        return []
    lines = _lines(files, site_url=site_url, torch_index=torch_index)
    body = [
        '<section id="pick" hidden>',
        '<form id="pick-form" class="pick">',
    ]
    for name, legend, values in [*_axes(files), ("tool", "Installer", [("pip", "pip"), ("uv", "uv")])]:
        options = "".join(
            f'<label><input type="radio" name="{html.escape(name)}" value="{html.escape(value)}"> '
            f"{html.escape(label)}</label>"
            for value, label in values
        )
        body.append(f"<fieldset><legend>{html.escape(legend)}</legend>{options}</fieldset>")
    body += [
        "</form>",
        (
            '<div class="picked"><pre><code id="pick-line"></code></pre>'
            '<button type="button" id="pick-copy">Copy</button></div>'
        ),
        '<p id="pick-why" class="note" role="status"></p>',
        "</section>",
        (
            '<noscript><p class="note">The picker needs JavaScript: every line is in '
            '<a href="#lines">the table of install lines</a>.</p></noscript>'
        ),
        f'<script type="application/json" id="pick-data">{_json(_data(files, lines, judge))}</script>',
        f'<script src="{SCRIPT}" defer></script>',
    ]
    return body


def script() -> str:
    """``pick.js``, the picker's script (package data beside this module)."""
    return resources.files("dswheels").joinpath("index").joinpath(SCRIPT).read_text(encoding="utf-8")
