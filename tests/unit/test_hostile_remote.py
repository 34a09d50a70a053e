# ruff: noqa: RUF001 - other scripts' digits beside ASCII ones are among the hostile values
"""Every field of every remote JSON document dswheels reads, fed the wrong type, nothing, and hostile text.

The documents: GitHub's releases, assets, issues and workflow runs (``GITHUB_API_URL`` may name any
server), PyPI's project JSON (``--pypi`` may name any mirror) and NVIDIA's ``redistrib_X.Y.Z.json``
(``--redist-url``/``--redist-sha256``). Each has one reader; here each field of a real-shaped document
(GitHub's documented examples as tests/support/github_fake.py serves them, PyPI's and NVIDIA's recorded
JSON in tests/data) is replaced in turn, and the reader either refuses it with an error naming that
very field (``assets[3].digest``) and showing no raw control or bidi character, or takes it, where
docs/hostile-input.md says it may, giving values in which nothing hostile survives. The same readers
run under Hypothesis on documents built from their own keys with values of every type. The command
line's exit codes for them are tests/integration/test_hostile_remote.py's.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dswheels.cli import main
from dswheels.cuda.redist import archives_for, parse_redist
from dswheels.kernel.compat import load_compat
from dswheels.kernel.github_api import (
    Asset,
    GitHubPlace,
    error_summary,
    read_artifacts,
    read_asset,
    read_blob_sha,
    read_comment,
    read_issue,
    read_pull,
    read_release,
    read_runs,
)
from dswheels.kernel.jsondoc import parse_json
from dswheels.kernel.pypi_project import read_pypi_project
from dswheels.kernel.remote_json import RemoteDocumentError, RemoteJson
from tests.conftest import DATA
from tests.support.fuzz import examples
from tests.support.hostile_values import ABSENT, HOSTILE_TEXT, VARIANTS, clean, hostile_in


def _outcome(call: Callable[[], object]) -> tuple[object, Exception | None]:
    """What ``call`` returned, or the reader's error it raised (a ``RemoteDocumentError`` is a ``ValueError``)."""
    try:
        return call(), None
    except ValueError as exc:
        return None, exc


def _set(doc: Any, path: tuple[str | int, ...], value: object) -> Any:
    changed = copy.deepcopy(doc)
    node = changed
    for key in path[:-1]:
        node = node[key]
    if value is ABSENT:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return changed


def _shown_path(prefix: str, path: tuple[str | int, ...]) -> str:
    shown = prefix
    for key in path:
        shown += f"[{key}]" if isinstance(key, int) else (f".{key}" if shown else key)
    return shown


# --- the documents, as their servers send them --------------------------------------------------------------------

API = "https://api.github.com"
PLACE = GitHubPlace(API, "octo/dswheels")
WHEEL = "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"
ASSET = {  # docs.github.com/rest/releases/assets "List release assets", with June 2025's digest
    "url": f"{API}/repos/octo/dswheels/releases/assets/17",
    "browser_download_url": f"https://github.com/octo/dswheels/releases/download/v2026.11.23/{WHEEL}",
    "id": 17,
    "node_id": "RA_17",
    "name": WHEEL,
    "label": "",
    "state": "uploaded",
    "content_type": "application/octet-stream",
    "size": 2048,
    "digest": "sha256:" + "ab" * 32,
    "download_count": 0,
    "created_at": "2026-11-23T00:00:00Z",
    "updated_at": "2026-11-23T00:00:00Z",
    "uploader": {"login": "octo", "id": 1},
}
RELEASE = {  # "List releases" / "Create a release"
    "url": f"{API}/repos/octo/dswheels/releases/5",
    "html_url": "https://github.com/octo/dswheels/releases/tag/v2026.11.23",
    "assets_url": f"{API}/repos/octo/dswheels/releases/5/assets",
    "upload_url": "https://uploads.github.com/repos/octo/dswheels/releases/5/assets{?name,label}",
    "id": 5,
    "tag_name": "v2026.11.23",
    "target_commitish": "main",
    "name": "v2026.11.23",
    "body": "",
    "draft": False,
    "prerelease": False,
    "immutable": True,
    "assets": [ASSET],
}
ISSUE = {"number": 7, "title": "compat.yml drifted from its sources", "body": "findings", "state": "open"}
RUN = {  # "List workflow runs for a workflow"
    "id": 3,
    "name": "wheels",
    "display_title": "wheels 0.19.8",
    "status": "completed",
    "conclusion": "success",
    "event": "workflow_dispatch",
    "created_at": "2026-11-24T04:23:00Z",
}
RUNS = {"total_count": 1, "workflow_runs": [RUN]}
COMMENT = {  # "List issue comments"
    "id": 11,
    "body": "<!-- dswheels: answer -->",
    "user": {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"},
    "created_at": "2026-11-24T04:23:00Z",
}
ARTIFACTS = {  # "List workflow run artifacts"
    "total_count": 1,
    "artifacts": [{"id": 8, "name": "measurements-build-1", "size_in_bytes": 4096, "expired": False}],
}
PULL = {  # "Create a pull request" / "List pull requests"
    "id": 9,
    "number": 12,
    "state": "open",
    "html_url": "https://github.com/octo/dswheels/pull/12",
}
CONTENT = {"name": "compile_times.yml", "path": "dswheels/compile_times.yml", "sha": "3d21ec53" * 5, "type": "file"}
PYPI_URL = "https://pypi.org/pypi/deepspeed/json"
PYPI = json.loads((DATA / "upstream" / "pypi" / "deepspeed" / "json").read_text(encoding="utf-8"))
REDIST = json.loads((DATA / "cuda-redist" / "redistrib_13.0.3.json").read_text(encoding="utf-8"))


def _asset(doc: object) -> object:
    return read_asset(RemoteJson(doc, "assets[3]", document="GitHub's answer"), PLACE)


def _release(doc: object) -> object:
    return read_release(RemoteJson(doc, "releases[0]", document="GitHub's answer"), PLACE)


def _issue(doc: object) -> object:
    return read_issue(RemoteJson(doc, "issues[0]", document="GitHub's answer"))


def _runs(doc: object) -> object:
    return read_runs(RemoteJson(doc, "", document="GitHub's answer"))


def _comment(doc: object) -> object:
    return read_comment(RemoteJson(doc, "comments[0]", document="GitHub's answer"))


def _artifacts(doc: object) -> object:
    return read_artifacts(RemoteJson(doc, "", document="GitHub's answer"))


def _pull(doc: object) -> object:
    return read_pull(RemoteJson(doc, "pull", document="GitHub's answer"), PLACE)


def _blob(doc: object) -> object:
    return read_blob_sha(RemoteJson(doc, "", document="GitHub's answer"))


def _pypi(doc: object) -> object:
    return read_pypi_project(doc, json_url=PYPI_URL)


def _redist(doc: object) -> object:
    return archives_for(parse_redist(doc), NVCC, "linux")


NVCC = [c for c in load_compat().components_for((13, 0)) if c.redist == "cuda_nvcc"]


def _ascii_line(limit: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, str) and 0 < len(v) <= limit and v.isascii() and v.isprintable()


def _word(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,31}", value) is not None


def _never(_value: object) -> bool:
    return False


def _one_of(*values: object) -> Callable[[object], bool]:
    return lambda v: any(v is x or (type(v) is type(x) and v == x) for x in values)


@dataclass(frozen=True)
class Field:
    """A field of a document: which values its reader may take besides the document's own (``may``), the
    fields an error about it may name instead (a download URL must end with the asset's name), and
    whether the text it keeps is opaque (compared or searched, never shown, linked or used as a name)."""

    read: Callable[[object], object]
    doc: object
    prefix: str
    path: tuple[str | int, ...]
    may: Callable[[object], bool] = _never
    related: tuple[str, ...] = ()
    opaque: bool = False
    shown_as_is: frozenset[str] = frozenset()  # marks of _hostile_in that are harmless in this field


_SDIST = ("releases", "0.19.8", 0)
_OTHER_SCRIPTS = frozenset({"٠.١٩", "１２"})
FIELDS = [
    Field(_asset, ASSET, "assets[3]", ("id",), _one_of(7)),
    Field(_asset, ASSET, "assets[3]", ("name",), related=("browser_download_url",)),  # its URL names it
    Field(_asset, ASSET, "assets[3]", ("state",), _word),  # not "uploaded": never listed
    Field(_asset, ASSET, "assets[3]", ("size",), _one_of(7)),
    Field(_asset, ASSET, "assets[3]", ("digest",), _one_of(None, ABSENT)),  # hashed by downloading
    Field(_asset, ASSET, "assets[3]", ("browser_download_url",)),
    Field(_release, RELEASE, "releases[0]", ("id",), related=("upload_url",)),  # the upload URL names it
    Field(_release, RELEASE, "releases[0]", ("tag_name",), _one_of("12", "٠.١٩.٨", "１２"), shown_as_is=_OTHER_SCRIPTS),
    Field(_release, RELEASE, "releases[0]", ("draft",), lambda v: v is True),
    Field(_release, RELEASE, "releases[0]", ("upload_url",)),
    Field(_issue, ISSUE, "issues[0]", ("number",), _one_of(7)),
    Field(
        _issue,
        ISSUE,
        "issues[0]",
        ("body",),
        lambda v: v is ABSENT or v is None or (isinstance(v, str) and len(v) < 2**20),
        opaque=True,
    ),
    Field(
        _issue,
        ISSUE,
        "issues[0]",
        ("title",),  # searched for a runner image's retirement (facts check), never shown
        lambda v: v is ABSENT or v is None or (isinstance(v, str) and len(v) <= 1024),
        opaque=True,
    ),
    Field(_runs, RUNS, "", ("workflow_runs",)),
    Field(_runs, RUNS, "", ("workflow_runs", 0, "id"), _one_of(7)),
    Field(_runs, RUNS, "", ("workflow_runs", 0, "conclusion"), lambda v: v in (ABSENT, None) or _word(v)),
    Field(_runs, RUNS, "", ("workflow_runs", 0, "created_at")),
    Field(_comment, COMMENT, "comments[0]", ("id",), _one_of(7)),
    Field(
        _comment,
        COMMENT,
        "comments[0]",
        ("body",),
        lambda v: v is ABSENT or v is None or (isinstance(v, str) and len(v) < 2**20),
        opaque=True,
    ),
    Field(_comment, COMMENT, "comments[0]", ("user",)),
    Field(_comment, COMMENT, "comments[0]", ("user", "type"), _ascii_line(32)),  # only "Bot" counts
    Field(_artifacts, ARTIFACTS, "", ("artifacts",)),
    Field(
        _artifacts,
        ARTIFACTS,
        "",
        ("artifacts", 0, "name"),
        lambda v: isinstance(v, str) and 0 < len(v) <= 255 and v.isprintable() and "/" not in v,
        opaque=True,  # compared with a prefix and counted, never shown
    ),
    Field(_artifacts, ARTIFACTS, "", ("artifacts", 0, "expired"), lambda v: v is True),
    Field(_pull, PULL, "pull", ("number",), related=("html_url",)),  # its page names it
    Field(_pull, PULL, "pull", ("html_url",)),
    Field(_blob, CONTENT, "", ("sha",)),
    Field(_runs, RUNS, "", ("workflow_runs", 0, "status"), _word),
    Field(
        _runs,
        RUNS,
        "",
        ("workflow_runs", 0, "display_title"),
        lambda v: v is ABSENT or v is None or (isinstance(v, str) and len(v) < 2**20),
        opaque=True,
    ),
    Field(_pypi, PYPI, "", ("releases",)),
    Field(_pypi, PYPI, "", ("releases", "0.19.8"), _one_of(ABSENT, [])),
    Field(_pypi, PYPI, "", (*_SDIST, "filename"), related=("url",)),  # its URL names it
    Field(_pypi, PYPI, "", (*_SDIST, "url")),
    Field(_pypi, PYPI, "", (*_SDIST, "digests")),
    Field(_pypi, PYPI, "", (*_SDIST, "digests", "sha256")),
    Field(_pypi, PYPI, "", (*_SDIST, "size"), _one_of(7)),
    Field(_pypi, PYPI, "", (*_SDIST, "packagetype"), _word),
    Field(_pypi, PYPI, "", (*_SDIST, "yanked"), lambda v: v is ABSENT or v is None or v is True),
    Field(_pypi, PYPI, "", (*_SDIST, "requires_python"), lambda v: v is ABSENT or v is None or isinstance(v, str)),
    Field(_pypi, PYPI, "", (*_SDIST, "upload_time_iso_8601"), _one_of(ABSENT, None)),  # upload_time is there
    Field(_pypi, PYPI, "", ("info",), _one_of(ABSENT, None, {"a": 1})),
    Field(_pypi, PYPI, "", ("info", "version"), _one_of(ABSENT, None, "12")),
    Field(_pypi, PYPI, "", ("info", "requires_dist"), _one_of(ABSENT, None, ["x"])),
    Field(_redist, REDIST, "", ("release_label",)),
    Field(_redist, REDIST, "", ("cuda_nvcc", "version"), _one_of("12")),
    Field(_redist, REDIST, "", ("cuda_nvcc", "linux-x86_64", "relative_path")),
    Field(_redist, REDIST, "", ("cuda_nvcc", "linux-x86_64", "sha256")),
    Field(_redist, REDIST, "", ("cuda_nvcc", "linux-x86_64", "size"), _one_of(7, "12")),
]


def _cases() -> Iterator[Any]:
    for field in FIELDS:
        for variant, value in VARIANTS.items():
            label = f"{field.read.__name__.strip('_')}:{'.'.join(map(str, field.path))}:{variant}"
            yield pytest.param(field, value, id=label)


def test_the_documents_as_their_servers_send_them_are_read() -> None:
    documents = [(_asset, ASSET), (_release, RELEASE), (_issue, ISSUE), (_runs, RUNS), (_pypi, PYPI)]
    documents += [(_comment, COMMENT), (_artifacts, ARTIFACTS), (_pull, PULL), (_blob, CONTENT)]
    for read, doc in documents:
        assert hostile_in(read(doc)) == []
    assert _redist(REDIST) != ()


@pytest.mark.parametrize(("field", "value"), list(_cases()))
def test_each_field_of_each_document(field: Field, value: object) -> None:
    result, exc = _outcome(lambda: field.read(_set(field.doc, field.path, value)))
    if exc is not None:
        message = str(exc)
        assert clean(message), message  # no control, bidi or invisible character
        assert [m for m in hostile_in(message) if m != "../"] == [], message[:300]  # the value described, not shown
        assert len(message) < 1000, message[:300]  # and short
        named = [
            _shown_path(field.prefix, field.path),
            *(_shown_path(field.prefix, (*field.path[:-1], r)) for r in field.related),
        ]
        if isinstance(exc, RemoteDocumentError):
            assert any(exc.path.startswith(n) for n in named) or exc.path == _shown_path(
                field.prefix, field.path[:-1]
            ), exc.path
        else:  # the redist reader words its own errors: "redistrib JSON: cuda_nvcc.linux-x86_64: ..."
            assert any(str(k) in message for k in field.path[-2:]), message[:300]
        return
    assert field.may(value), f"took {value!r:.80} at {field.path}"
    if not field.opaque:
        assert set(hostile_in(result)) <= field.shown_as_is


# --- the URLs GitHub makes, relative to the API asked -----------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "url"),
    [
        (API, f"https://github.com/octo/dswheels/releases/download/v1/{WHEEL}"),
        (API, f"https://github.com/Octo/DSWheels/releases/download/v1/{WHEEL.replace('+', '%2B')}"),
        ("https://ghe.example.com/api/v3", f"https://ghe.example.com/octo/dswheels/releases/download/v1/{WHEEL}"),
        ("https://api.acme.ghe.com", f"https://acme.ghe.com/octo/dswheels/releases/download/v1/{WHEEL}"),
        ("http://127.0.0.1:8080", f"http://127.0.0.1:8080/octo/dswheels/releases/download/v1/{WHEEL}"),
    ],
)
def test_download_urls_github_makes_are_taken(api: str, url: str) -> None:
    assert GitHubPlace(api, "octo/dswheels").download_url_problem(url, WHEEL) == ""


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "javascript://github.com/%0aalert(1)",
        f"http://github.com/octo/dswheels/releases/download/v1/{WHEEL}",  # another origin: plain http
        f"https://github.com.evil.example/octo/dswheels/releases/download/v1/{WHEEL}",
        f"https://evil.example/octo/dswheels/releases/download/v1/{WHEEL}",
        f"https://user@github.com/octo/dswheels/releases/download/v1/{WHEEL}",
        f"https://github.com/other/repo/releases/download/v1/{WHEEL}",
        "https://github.com/octo/dswheels/releases/download/v1/other.whl",
        f"https://github.com/octo/dswheels/releases/download/v1/{WHEEL}?x=1",
        f"https://github.com/octo/dswheels/releases/download/v1/{WHEEL}#x",
        f"https://github.com/octo/dswheels/releases/download/../../{WHEEL}",
        f"https://github.com/octo/dswheels/releases/download/v1/x/../{WHEEL}",
        f"https://github.com/octo/dswheels/releases/download/v1/{WHEEL}%00",
        f"https://github.com/octo/dswheels/releases/download/v1/{WHEEL}\n",
        f'https://github.com/octo/dswheels/releases/download/v1/{WHEEL}"><script>',
        f"https://github.com/octo/dswheels/releases/download/%2F/{WHEEL}",
        f"https://github.com/octo/dswheels/releases/download/v1/{WHEEL.replace('deepspeed', 'deepspeed%2F..')}",
        f"https://github.com/octo/dswheels/releases/download/v\u202e1/{WHEEL}",
        f"https://github.com/octo/dswheels/releases/download/v%E2%80%AE1/{WHEEL}",  # bidi, percent-encoded
    ],
)
def test_download_urls_of_any_other_shape_are_refused(url: str) -> None:
    assert PLACE.download_url_problem(url, WHEEL) != ""


@pytest.mark.parametrize(
    ("api", "url", "ok"),
    [
        (API, "https://uploads.github.com/repos/octo/dswheels/releases/5/assets", True),
        ("https://api.acme.ghe.com", "https://uploads.acme.ghe.com/repos/octo/dswheels/releases/5/assets", True),
        (
            "https://ghe.example.com/api/v3",
            "https://ghe.example.com/api/uploads/repos/octo/dswheels/releases/5/assets",
            True,
        ),
        (API, "http://uploads.github.com/repos/octo/dswheels/releases/5/assets", False),  # the token over plain http
        (API, "https://evil.example/repos/octo/dswheels/releases/5/assets", False),  # the token to another host
        (API, "https://uploads.github.com.evil.example/repos/octo/dswheels/releases/5/assets", False),
        (API, "https://uploads.github.com/repos/octo/dswheels/releases/6/assets", False),  # another release
        (API, "https://uploads.github.com/repos/other/repo/releases/5/assets", False),
        (API, "https://x@uploads.github.com/repos/octo/dswheels/releases/5/assets", False),
        (API, "https://uploads.github.com/repos/octo/dswheels/releases/5/assets?name=x", False),
    ],
)
def test_upload_urls(api: str, url: str, ok: bool) -> None:
    assert (GitHubPlace(api, "octo/dswheels").upload_url_problem(url, 5) == "") is ok


def test_an_error_answer_is_shown_printable_and_short() -> None:
    body = {"message": "Bad\x1b]52;c;aGk=\x07 credentials\u202e" + "x" * 5000, "errors": [{"code": 5}, None, "e\nf"]}
    shown = error_summary(body)
    assert clean(shown)
    assert len(shown) <= 300
    assert error_summary([1, 2]) == error_summary("x") == ""


# --- any document: read, or refused with the reader's own error ------------------------------------------------

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(list(HOSTILE_TEXT.values())[:-4])
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
FUZZ = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mutations(doc: object) -> st.SearchStrategy[object]:
    """``doc`` with one of its values (at any depth) replaced by any value, or a key removed."""
    paths: list[tuple[str | int, ...]] = []

    def walk(node: object, path: tuple[str | int, ...]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                paths.append((*path, key))
                walk(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node[:3]):
                paths.append((*path, index))
                walk(value, (*path, index))

    walk(doc, ())
    return st.tuples(st.sampled_from(paths), _VALUES | st.just(ABSENT)).map(
        lambda change: (
            _set(doc, change[0], change[1]) if not isinstance(change[0][-1], int) or change[1] is not ABSENT else doc
        )
    )


# the fields a reader keeps opaque (compared or searched, never shown, linked or used as a name), as FIELDS marks
# them: an issue's title and body, a comment's body, a run's display_title (WorkflowRun.title)
_OPAQUE = frozenset({"title", "body"})


def _shown_parts(value: object, opaque: frozenset[str]) -> object:
    """``value`` as plain data without its fields named in ``opaque``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {k: _shown_parts(v, opaque) for k, v in fields.items() if k not in opaque}
    if isinstance(value, (list, tuple)):
        return [_shown_parts(v, opaque) for v in value]
    return value


def _read_any(read: Callable[[object], object], doc: object, *, opaque: frozenset[str] = frozenset()) -> None:
    result, exc = _outcome(lambda: read(doc))
    assert clean(str(exc)), str(exc)
    if exc is None:
        assert hostile_in(_shown_parts(result, opaque)) == []


SMALL_PYPI = {"info": PYPI["info"], "releases": {k: v for k, v in PYPI["releases"].items() if k >= "0.19.6"}}


@FUZZ
@given(doc=_mutations(ASSET) | _VALUES)
def test_any_asset(doc: object) -> None:
    _read_any(_asset, doc)


@FUZZ
@given(doc=_mutations(RELEASE) | _VALUES)
def test_any_release(doc: object) -> None:
    _read_any(_release, doc)


@FUZZ
@given(doc=_mutations(ISSUE) | _mutations(RUNS) | _mutations(COMMENT) | _VALUES)
def test_any_issue_runs_or_comment(doc: object) -> None:
    _read_any(_issue, doc, opaque=_OPAQUE)
    _read_any(_runs, doc, opaque=_OPAQUE)
    _read_any(_comment, doc, opaque=_OPAQUE)


@FUZZ
@given(doc=_mutations(ARTIFACTS) | _mutations(PULL) | _mutations(CONTENT) | _VALUES)
def test_any_artifacts_pull_or_content(doc: object) -> None:
    _read_any(_artifacts, doc)
    _read_any(_pull, doc)
    _read_any(_blob, doc)


@FUZZ
@given(doc=_mutations(SMALL_PYPI) | _VALUES)
def test_any_pypi_project(doc: object) -> None:
    _read_any(_pypi, doc)


@FUZZ
@given(doc=_mutations({k: REDIST[k] for k in ("release_label", "cuda_nvcc", "cuda_cudart")}) | _VALUES)
def test_any_redistrib_json(doc: object) -> None:
    _read_any(_redist, doc)


@FUZZ
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_any_text_as_a_remote_document(text: str) -> None:
    """What the readers are handed is ``parse_json``'s: any text is a value or its ValueError."""
    try:
        data = parse_json(text, what="x")
    except ValueError:
        return
    for read in (_asset, _release, _issue, _runs, _comment, _artifacts, _pull, _blob, _pypi, _redist):
        _read_any(read, data, opaque=_OPAQUE if read in (_issue, _runs, _comment) else frozenset())


def test_numbers_too_long_for_python_are_the_readers_error_too() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        parse_json('{"size": ' + "9" * 5000 + "}", what="answer")


@pytest.mark.parametrize("name", list(HOSTILE_TEXT.values()), ids=list(HOSTILE_TEXT))
def test_an_asset_name_with_its_own_download_url(name: str) -> None:
    """The name's own rule, apart from its URL's: printable, one plain name; what a page links is the
    percent-encoded URL, never the name's raw text (a name that is no wheel is left out of the index)."""
    base = "https://github.com/octo/dswheels/releases/download/v2026.11.23/"
    doc = {**ASSET, "name": name, "browser_download_url": base + quote(name, safe="")}
    asset, exc = _outcome(lambda: _asset(doc))
    if isinstance(exc, RemoteDocumentError):
        assert exc.path in ("assets[3].name", "assets[3].browser_download_url"), exc.path
        assert clean(str(exc))
        return
    assert exc is None
    assert isinstance(asset, Asset)
    assert name.isprintable()
    assert "/" not in name
    assert 0 < len(name) <= 255
    assert re.fullmatch(r"(?:[A-Za-z0-9._~/:+-]|%[0-9A-F]{2})+", asset.download_url), asset.download_url


@pytest.mark.parametrize("key", [v for v in HOSTILE_TEXT.values() if v], ids=[k for k, v in HOSTILE_TEXT.items() if v])
def test_a_documents_own_keys_are_never_shown(key: str) -> None:
    """A key is the server's text too: a release key of PyPI's JSON, a component of NVIDIA's (the fuzzer's
    first find: a component named with a control character was printed raw in the entry's error)."""
    pypi = {"info": PYPI["info"], "releases": {key: [{"filename": 5}]}}
    redist = {"release_label": "13.0.3", key: {"version": "1", "linux-x86_64": {"relative_path": "x"}}}
    readers: list[tuple[Callable[[object], object], object]] = [
        (_pypi, pypi),
        (lambda d: parse_redist(d).archive(key, "linux-x86_64"), redist),
    ]
    for read, doc in readers:
        _result, exc = _outcome(functools.partial(read, doc))
        assert exc is not None
        assert clean(str(exc)), str(exc)
        assert [m for m in hostile_in(str(exc)) if m != "../"] == [], str(exc)[:300]


@pytest.mark.parametrize("text", ["[" * 100_000, "1" * 5000, '{"a": ' * 50_000])
def test_json_of_the_follow_commands_is_read_by_the_one_json_reader(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--versions-json`` and the facts report were ``json.loads``: deep nesting and a number of more than
    4,300 digits ended in ``RecursionError`` / ``ValueError`` tracebacks (exit 1). Now exit 2."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_unused_token_value")
    report = tmp_path / "report.json"
    report.write_text(text, encoding="utf-8")
    (tmp_path / "report.md").write_text("x\n", encoding="utf-8")
    for args in (
        ["facts", "dispatch", "--versions-json", text, "--repo", "octo/dswheels"],
        ["facts", "issue", "--facts", str(report), "--markdown", str(tmp_path / "report.md"), "--repo", "o/r"],
        ["facts", "builds", "--facts", str(report)],
    ):
        assert main(args) == 2, args[:2]
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.startswith("bad input: "), err[:300]


@pytest.mark.parametrize("text", ["[" * 100_000, "1" * 5000, "[{}]" + "x"])
def test_a_saved_vswhere_answer_is_read_by_the_one_json_reader(text: str) -> None:
    """``doctor --facts`` reads a saved ``vswhere`` answer: deep nesting was a ``RecursionError``."""
    from dswheels.doctor.machine_facts import VisualStudio, parse_vswhere

    assert parse_vswhere(VisualStudio(vswhere=text, toolsets={}, defaults={})) == ()
