"""Every parser of outside data, fed anything: a documented error and a one-paragraph message, never a
traceback, within bounded time and memory.

The parsers: the matrix YAML (through the real command line), wheel file names, index pages,
build manifests, the publish ledger, the yanked file, PyPI's JSON, saved
doctor facts and the ``torch_index`` template. Hypothesis draws both arbitrary text and
inputs built to be hostile (alias bombs, deep nesting, odd encodings, wrong types).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.cli import main
from dswheels.doctor.machine_facts_json import FactsError, facts_from_data
from dswheels.index.yank import parse_yanked
from dswheels.kernel.compat import load_compat
from dswheels.kernel.errors import ConfigError
from dswheels.kernel.index_files import parse_project_page
from dswheels.kernel.manifest import ManifestError, parse_manifest
from dswheels.kernel.naming import parse_wheel
from dswheels.kernel.pypi_project import read_pypi_project
from dswheels.plan.matrix.parse import parse_matrix
from dswheels.stores.ledger import load_ledger
from tests.conftest import DATA
from tests.support.fuzz import examples
from tests.support.wheels import write_deepspeed_wheel

COMPAT = load_compat()
MATRIX = (DATA / "matrix-cpu.yml").read_text(encoding="utf-8")
FAST = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    start = time.monotonic()
    code = main(list(args))
    err = capsys.readouterr().err
    assert time.monotonic() - start < 20, "bad input must be judged quickly"
    assert "Traceback" not in err
    return code, err


def error_of(call: Callable[[], object], errors: type[Exception] | tuple[type[Exception], ...]) -> str | None:
    """None when ``call`` returns; the message of the documented error it raised otherwise."""
    try:
        call()
    except errors as exc:
        return str(exc) or type(exc).__name__
    return None


def one_paragraph(err: str) -> None:
    """The documented shape: ``<title>: what``, indented details, an optional ``hint:``."""
    lines = err.rstrip("\n").splitlines()
    assert lines, "an error says something"
    assert lines[0].split(":", 1)[0] in {"bad input", "nothing to do", "source error", "publish failed"}, lines[0]
    assert all(line.startswith(("  ", "hint: ")) for line in lines[1:]), err


# --- the matrix -------------------------------------------------------------------------------------------------


HOSTILE_YAML = {
    "alias bomb": "\n".join(
        ["a: &a [x, x, x, x, x, x, x, x, x]"]
        + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    ),
    "recursive alias": "deepspeed: &l [*l]\n",
    "recursive mapping": "a: &m {b: *m}\n",
    "deep": "[" * 5000 + "]" * 5000,
    "deep mapping": "a: " + "{a: " * 3000 + "1" + "}" * 3000,
    "long list": "deepspeed: [" + ", ".join(["'0.19.8'"] * 200_000) + "]\n",
    "many aliases": "a: &a x\nb: [" + ", ".join(["*a"] * 5000) + "]\n",
    "tag": "!!python/object/apply:os.system ['echo pwned']\n",
    "binary": "deepspeed: !!binary aGVsbG8=\n",
    "bad utf-16": MATRIX.encode("utf-16").decode("latin-1"),
    "nul": "deepspeed: [\x00]\n",
    "keys": "? [a, b]\n: c\n",
    "set": "!!set {a, b}\n",
    "timestamp": "deepspeed: [2001-12-14t21:59:43.10-05:00]\n",
    "huge int": "schema: " + "9" * 5000 + "\n",
    "duplicate keys": MATRIX + "\ndeepspeed: ['0.19.7']\n",
    "torch_index placeholder": MATRIX + "\ntorch_index: 'https://x/{variant}/{cuda}'\n",
    "torch_index attribute": MATRIX + "\ntorch_index: 'https://x/{variant.__class__}'\n",
    "torch_index index": MATRIX + "\ntorch_index: 'https://x/{variant[0]}/{0}'\n",
    "torch_index brace": MATRIX + "\ntorch_index: 'https://x/{variant}/{'\n",
    "include types": MATRIX + "\ninclude: [{deepspeed: [1], torch: {a: 1}, variant: null, python: 3, platform: []}]\n",
    "exclude types": MATRIX + "\nexclude: [[1, 2], 'x', {python: {a: b}}]\n",
}


@pytest.mark.parametrize("text", HOSTILE_YAML.values(), ids=HOSTILE_YAML.keys())
def test_hostile_matrix_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_text(text, encoding="utf-8", errors="surrogateescape")
    code, err = run_cli(capsys, "plan", "--matrix", str(matrix))
    assert code == 2, err
    one_paragraph(err)


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe", b"deepspeed: ['\xc3\x28']\n", MATRIX.encode("utf-16"), b"\x00" * 10, b"a" * (2 * 1024**2)],
    ids=["bom16", "bad-utf8", "utf-16", "nul-bytes", "2-MiB"],
)
def test_matrix_bytes_that_are_not_a_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    matrix = tmp_path / "matrix.yml"
    matrix.write_bytes(data)
    code, err = run_cli(capsys, "plan", "--matrix", str(matrix))
    assert code == 2, err
    one_paragraph(err)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero (Windows)")
def test_matrix_from_an_endless_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(capsys, "plan", "--matrix", "/dev/zero")
    assert code == 2
    assert "is a character device, not a regular file" in err  # refused before a byte is read


_KEYS = {"schema", "deepspeed", "torch", "python", "platforms", "include", "exclude", "ops", "version", "variants"}
_KEYS |= {"variant", "platform", "runners", "build", "smoke", "torch_index", "toolkits", "arch_lists", "linux_runtime"}
_YAML_SCALARS = st.one_of(
    st.text(max_size=12),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["0.19.8", "2.13", "cpu", "cu130", "3.11", "linux_x86_64", "win_amd64", "{variant}", "*"]),
)
_YAML_VALUES = st.recursive(
    _YAML_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(sorted(_KEYS)), inner, max_size=4),
    max_leaves=20,
)


@FAST
@given(doc=st.dictionaries(st.sampled_from(sorted(_KEYS)), _YAML_VALUES, max_size=8))
def test_any_structured_matrix_is_planned_or_refused(doc: dict[str, object]) -> None:
    """Built from the matrix's own keys with values of every type: parsed, or one ConfigError."""
    base = yaml.safe_load(MATRIX)
    text = yaml.safe_dump({**base, **doc})
    error_of(lambda: parse_matrix(text, "m.yml", COMPAT).axis_cells(), ConfigError)


@FAST
@given(text=st.text(max_size=400))
def test_any_text_as_a_matrix_is_planned_or_refused(text: str) -> None:
    error_of(lambda: parse_matrix(text, "m.yml", COMPAT), ConfigError)


@pytest.mark.parametrize(
    "template",
    [
        "https://x/{variant}/{cuda}",
        "https://x/{variant}/{0}",
        "https://x/{variant.upper}",
        "https://x/{variant}/{",
        "https://x/{variant!r}",
        "https://x/{variant:>9}",
        "https://x/",
    ],
)
def test_index_torch_index_template_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], template: str
) -> None:
    published = tmp_path / "published"
    write_deepspeed_wheel(published, variant="cpu", torch="2.13")  # a partition: its install line uses the template
    code, err = run_cli(
        capsys, "index", "--from", str(published), "--out", str(tmp_path / "site"), "--torch-index", template
    )
    assert code == 2, err
    one_paragraph(err)
    assert not (tmp_path / "site").exists()


@FAST
@given(template=st.text(max_size=40), variant=st.sampled_from(["cpu", "cu128"]))
def test_torch_index_templates(template: str, variant: str) -> None:
    from dswheels.kernel.sources import torch_index_problem, torch_index_url

    problem = torch_index_problem(template)
    if problem:
        with pytest.raises(ValueError, match="torch_index"):
            torch_index_url(template, variant)
    else:
        assert variant in torch_index_url(template, variant) or "{variant}" not in template


# --- wheel names ------------------------------------------------------------------------------------------------

SAFE_NAME = set("abcdefghijklmnopqrstuvwxyz0123456789._-+")


@FAST
@given(
    build=st.one_of(st.just(""), st.text(max_size=20)),
    middle=st.text(max_size=30),
)
def test_wheel_names_that_parse_are_safe_everywhere(build: str, middle: str) -> None:
    """Whatever is around it, a name parse_wheel accepts goes into paths, URLs, HTML and headers as is."""
    names = [
        f"deepspeed-0.19.8+cu128torch2.9-{build}-cp312-cp312-win_amd64.whl",
        f"deepspeed-0.19.8+{middle}-cp312-cp312-linux_x86_64.whl",
        middle,
    ]
    for name in filter(lambda n: error_of(lambda: parse_wheel(n), ValueError) is None, names):
        assert set(parse_wheel(name).filename) <= SAFE_NAME
        assert len(name) <= 160


@pytest.mark.parametrize("tag", ["1%2F..%2F", '1"', "1<", "1/../x", "1\\x", "1 x", "1" + "a" * 300])
def test_build_tags_with_characters_that_need_escaping_are_refused(tag: str) -> None:
    with pytest.raises(ValueError, match=r"build tag|characters"):
        parse_wheel(f"deepspeed-0.19.8+cu128torch2.9-{tag}-cp312-cp312-win_amd64.whl")


def test_publish_a_name_too_long_for_the_file_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long = tmp_path / ("deepspeed-0.19.8+cputorch2.13-1" + "0" * 300 + "-cp311-cp311-linux_x86_64.whl")
    code, err = run_cli(capsys, "publish", "--dir", str(tmp_path / "published"), str(long))
    assert code == 2, err
    one_paragraph(err)


# --- index pages ------------------------------------------------------------------------------------------------

_HREFS = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "file:///etc/passwd",
            "FILE:///etc/passwd",
            "/etc/passwd",
            "//evil.example/x.whl",
            "http://[::1",
            "javascript:alert(1)",
            "ftp://h/x.whl",
            "http:///nohost.whl",
            "https://h/deepspeed-0.19.8%2Bcu128torch2.9-cp312-cp312-win_amd64.whl#sha256=" + "a" * 64,
            "https://h/..%2F..%2Fdeepspeed-0.19.8%2Bcpu.whl#sha512=00",
            "https://h/x.whl#sha256=zz",
            "data:text/plain,hi",
        ]
    ),
)


@FAST
@given(
    hrefs=st.lists(_HREFS, max_size=6),
    texts=st.lists(st.text(max_size=30), max_size=6),
    rp=st.text(max_size=20),
    base=st.one_of(st.none(), _HREFS),
    page=st.sampled_from(["https://idx.example/simple/deepspeed/", "http://127.0.0.1:8/simple/deepspeed/"]),
)
def test_index_pages_yield_only_followable_links_or_say_why(
    hrefs: list[str], texts: list[str], rp: str, base: str | None, page: str
) -> None:
    from html import escape

    from dswheels.kernel.index_files import link_problem

    head = f'<base href="{escape(base)}">' if base is not None else ""
    body = "".join(
        f'<a href="{escape(h)}" data-requires-python="{escape(rp)}">{escape(t)}</a>'
        for h, t in zip(hrefs, texts + [""] * len(hrefs), strict=False)
    )
    for item in parse_project_page(f"<html><head>{head}</head><body>{body}</body></html>", page):
        if item.problem:
            continue
        assert link_problem(item.url, page) == ""
        assert item.url.startswith(("http://", "https://"))
        assert "/" not in item.filename
        assert "\\" not in item.filename
        assert item.filename not in ("", ".", "..")
        assert item.sha256 == "" or len(item.sha256) == 64


@pytest.mark.parametrize("html", ["<![bor></body></basehtml>", "<!DOCTYPE x [<!ENTITY a>", "<a href='\x00'>"])
def test_pages_html_parser_cannot_read_are_a_value_error(html: str) -> None:
    """Found by atheris: html.parser raises AssertionError for some declarations."""
    error_of(lambda: parse_project_page(html, "https://h/simple/deepspeed/"), ValueError)


def test_the_url_names_the_file_not_the_link_text() -> None:
    page = (
        '<a href="https://h/deepspeed-0.19.7%2Bcputorch2.13-cp311-cp311-linux_x86_64.whl#sha256=' + "a" * 64 + '">'
        "deepspeed-0.19.8+cputorch2.13-cp311-cp311-linux_x86_64.whl</a>"
    )
    (item,) = parse_project_page(page, "https://h/simple/deepspeed/")
    assert item.filename == "deepspeed-0.19.7+cputorch2.13-cp311-cp311-linux_x86_64.whl"


# --- JSON documents ---------------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=25,
)
_MANIFEST_KEYS = ["schema", "wheel", "cell_id", "ops", "runtime", "filename", "sha256", "size", "toolchain", "plan"]


def _json_texts(keys: list[str]) -> st.SearchStrategy[str]:
    shaped = st.dictionaries(st.sampled_from(keys), _JSON, max_size=8).map(json.dumps)
    return st.one_of(shaped, _JSON.map(json.dumps), st.text(max_size=80), st.just("[" * 100_000))


@FAST
@given(text=_json_texts([*_MANIFEST_KEYS, "dswheels.manifest/1", "dswheels.manifest/2"]))
def test_manifests(text: str) -> None:
    error_of(lambda: parse_manifest(text), ManifestError)


_PYPI_ERRORS = (LookupError, ValueError)


@FAST
@given(data=_JSON, shaped=st.dictionaries(st.sampled_from(["releases", "0.19.8"]), _JSON, max_size=3))
def test_pypi_json(data: object, shaped: dict[str, object]) -> None:
    url = "https://pypi.org/pypi/deepspeed/json"
    for doc in (data, shaped, {"releases": shaped}):
        try:
            sdist = read_pypi_project(doc, json_url=url).sdist("0.19.8")
        except _PYPI_ERRORS:
            continue
        assert sdist.url.startswith(("http://", "https://"))


def test_pypi_json_may_not_point_at_local_files() -> None:
    entry: dict[str, object] = {"packagetype": "sdist", "url": "file:///etc/passwd", "filename": "x", "size": 1}
    entry["digests"] = {"sha256": "a" * 64}
    doc = {"releases": {"0.19.8": [entry]}, "info": {"version": "0.19.8"}}
    with pytest.raises(ValueError, match="an http"):
        read_pypi_project(doc, json_url="https://pypi.org/p/json")


@FAST
@given(data=_JSON)
def test_saved_doctor_facts(data: object) -> None:
    error_of(lambda: facts_from_data(data), FactsError)


@FAST
@given(text=_json_texts(["schema", "files", "size", "mtime_ns", "sha256", "metadata_sha256", "requires_python"]))
def test_publish_ledger(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    directory = tmp_path_factory.mktemp("ledger")
    (directory / ".dswheels-ledger.json").write_text(text, encoding="utf-8")
    for entry in load_ledger(directory).values():
        assert len(entry.sha256) == 64
        assert isinstance(entry.size, int)


@FAST
@given(text=st.text(max_size=200))
def test_yanked_file(text: str) -> None:
    error_of(lambda: parse_yanked(text, "yanked.txt"), ValueError)


@FAST
@given(
    data=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: ("Name: deepspeed\nVersion: 1\n" + t).encode())
)
def test_wheel_metadata(data: bytes) -> None:
    """A wheel's METADATA (or a release's .metadata asset): its fields, or ValueError."""
    from dswheels.kernel.wheel_contents import parse_metadata

    error_of(lambda: parse_metadata(data), ValueError)


@pytest.mark.parametrize("tag", ['1"x', "1<x", "1%2Fx"])
def test_publish_refuses_names_that_need_escaping(tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str) -> None:
    """Such a name would go raw into a multipart filename="", a link and a path (issue 13)."""
    wheel = write_deepspeed_wheel(tmp_path / "dist", variant="cpu", torch="2.13", build="1")
    odd = wheel.rename(wheel.with_name(wheel.name.replace("-1-", f"-{tag}-")))
    code, err = run_cli(capsys, "publish", "--dir", str(tmp_path / "published"), str(odd))
    assert code == 2, err
    one_paragraph(err)
    assert not (tmp_path / "published").exists()
