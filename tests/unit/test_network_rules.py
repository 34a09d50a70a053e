"""The rules behind what dswheels shows, signs and installs from a server (docs/hostile-input.md).

Credentials only to their origin, redirects included (item 2 of issue 20); a downloaded wheel
judged against its name and against what DeepSpeed installs (items 4 and 17); URLs in shell
lines (item 11); userinfo never shown (item 15); a yanked wheel called yanked (item 16).
The admission cases are real zip files read by the same reader as publish, index and install.
"""

from __future__ import annotations

import ast
import string
import sys
import zipfile
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from dswheels.cli import main
from dswheels.doctor.pick import Wanted, nearest
from dswheels.host.github import GitHub
from dswheels.host.http import OriginAuth, session
from dswheels.host.proc import run
from dswheels.host.wheel_file import read_admitted
from dswheels.kernel.errors import PublishError
from dswheels.kernel.index_files import IndexFile
from dswheels.kernel.index_links import install_command
from dswheels.kernel.model import Platform, Python, Variant
from dswheels.kernel.naming import parse_wheel, try_parse_wheel
from dswheels.kernel.urls import origin, page_url_problem, redact_text, shell_url_problem, shell_word
from dswheels.kernel.versions import TorchMinor
from tests.conftest import ROOT
from tests.support.fuzz import examples

LINUX = "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-linux_x86_64.whl"
WINDOWS = "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"
VERSION = "0.19.8+cu128torch2.9"
DIST = f"deepspeed-{VERSION}.dist-info"
DATA = f"deepspeed-{VERSION}.data"


# --- 15. userinfo is never shown ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://alice:s3cret@127.0.0.1:8000/simple/", "http://alice:****@127.0.0.1:8000/simple/"),
        ("https://ghp_token@github.com/o/r", "https://****@github.com/o/r"),
        ('{"url": "http://a:p%40ss@h/x"}', '{"url": "http://a:****@h/x"}'),
        ("http://a:b@c@host/x@y", "http://a:****@host/x@y"),  # an unencoded @ in the password
        ("HTTPS://u:p@[::1]:8443/", "HTTPS://u:****@[::1]:8443/"),
        ("two: http://u:p@a/ and file://v:q@b/", "two: http://u:****@a/ and file://v:****@b/"),
        ("<http://u:p@h/>", "<http://u:****@h/>"),
        ("git@github.com:o/r.git https://example.org/a@b mailto:x@y", None),  # no userinfo: unchanged
    ],
)
def test_userinfo_is_masked_wherever_it_appears(text: str, shown: str | None) -> None:
    assert redact_text(text) == (shown if shown is not None else text)
    assert "p%40ss" not in redact_text(text)


_SECRET = st.text(alphabet=string.ascii_letters + string.digits + "!$&()*+,;=%-._~:@", min_size=8, max_size=40)


@settings(max_examples=examples(200), deadline=None)
@given(
    user=st.text(alphabet=string.ascii_letters + string.digits + "-._~", min_size=1, max_size=12),
    secret=_SECRET,
    host=st.sampled_from(["h.example", "127.0.0.1:8000", "[::1]:8443"]),
    scheme=st.sampled_from(["http", "https", "HTTPS", "file", "git+https"]),
    before=st.sampled_from(["", "x ", '"', "(", "\n", "url="]),
)
def test_no_password_survives_redaction(user: str, secret: str, host: str, scheme: str, before: str) -> None:
    """Any password (unencoded ``:`` and ``@`` included) is gone; the host stays."""
    text = f"{before}{scheme}://{user}:{secret}@{host}/simple/deepspeed/ and more"
    shown = redact_text(text)
    assert f"{secret}@" not in shown
    assert f"@{host}/simple/deepspeed/ and more" in shown
    assert redact_text(shown) == shown


def test_the_command_line_and_the_logs_mask_userinfo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What dswheels prints (an error naming the index here) and a process's log file (CI artifacts)."""
    index = "http://alice:s3cret@127.0.0.1:9/"  # nothing listens there: the error names the index
    assert main(["install", "--index", index, "--dry-run", "--python", sys.executable]) in {4, 9}
    out, err = capsys.readouterr()
    assert "alice:****@127.0.0.1:9" in out + err
    log = tmp_path / "build.log"
    run(
        [sys.executable, "-c", "print('fetching https://tok3n@h/x')", "https://bob:hunter2@h/"],
        log_file=log,
        echo=False,
    )
    text = log.read_text()
    assert "https://****@h/x" in text
    assert "https://bob:****@h/" in text
    assert "s3cret" not in out + err
    assert "hunter2" not in text
    assert "tok3n" not in text


# --- 2. credentials go only to their origin ------------------------------------------------------------------------


def test_origins() -> None:
    assert origin("https://h/x") == origin("https://H:443/y") == ("https", "h", 443)
    assert origin("http://127.0.0.1:8000/") != origin("http://localhost:8000/")
    assert origin("http://h/") != origin("https://h/")
    assert origin("http://[::1") == ("", "", None)


def _signed(auth: OriginAuth, url: str) -> bool:
    prepared = requests.Request("GET", url, auth=auth).prepare()
    return "Authorization" in prepared.headers


def test_upload_credentials_sign_only_their_origin() -> None:
    auth = OriginAuth("https://upload.example:8443/legacy/", "alice", "s3cret")
    assert _signed(auth, "https://upload.example:8443/simple/deepspeed/")
    for elsewhere in (
        "https://cdn.example:8443/x.whl",  # another host
        "https://upload.example/x.whl",  # another port
        "http://upload.example:8443/x.whl",  # another scheme
        "https://upload.example.evil:8443/x.whl",  # a host that starts alike
    ):
        assert not _signed(auth, elsewhere), elsewhere
    assert "s3cret" not in repr(auth)


@pytest.mark.parametrize(
    ("old", "new", "strip"),
    [
        ("http://h/a", "https://h/b", True),  # requests alone keeps it on this upgrade
        ("https://h/a", "https://h:8443/b", True),
        ("https://h/a", "https://g/b", True),
        ("https://h/a", "https://h:443/b", False),
    ],
)
def test_a_redirect_to_another_origin_drops_the_authorization(old: str, new: str, strip: bool) -> None:
    assert session().should_strip_auth(old, new) is strip  # type: ignore[no-untyped-call] # requests: untyped


def test_the_github_token_goes_to_the_api_origin_only() -> None:
    gh = GitHub("o/r", token="ghp_secret", api_url="https://api.example")  # noqa: S106 - a test's
    assert "Authorization" in gh._headers("https://api.example/repos/o/r/releases", None)
    assert "Authorization" not in gh._headers("http://api.example/repos/o/r/releases", None)  # plain http
    assert "Authorization" not in gh._headers("https://api.example:8443/x", None)


# --- 11. URLs in shell lines ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://x.example/$(touch${IFS}/tmp/pwn)/",
        "http://x.example/`id`/",
        "http://x.example/a b/",
        "http://x.example/a;b/",
        "http://x.example/a'b/",
        "http://x.example/a\nb/",
        "javascript:alert(1)",
        "ftp://x.example/",
    ],
)
def test_a_url_a_shell_would_read_is_refused(url: str) -> None:
    assert shell_url_problem(url)
    assert page_url_problem(url)


def test_a_page_url_has_a_host_and_no_credentials() -> None:
    assert page_url_problem("https://wheels.example.org/dswheels/") == ""
    assert page_url_problem("http:///nohost/") == "it names no host"
    assert "s3cret" not in page_url_problem("https://alice:s3cret@wheels.example.org/")


def test_install_lines_quote_every_url() -> None:
    line = install_command(
        tool="pip", version=VERSION, site_url="https://h/~me/", part="cu128-torch2.9", torch_index="https://t/cu128"
    )
    assert line == (
        f"pip install \"deepspeed=={VERSION}\" --extra-index-url 'https://h/~me/whl/cu128-torch2.9/simple/' "
        "--extra-index-url https://t/cu128"
    )
    assert shell_word("http://x/a b\nc") == "http://x/a%20b%0Ac"


# --- 4 and 17. a wheel is what its name says, and writes only DeepSpeed's files --------------------------------------


def _wheel(tmp_path: Path, name: str, members: dict[str, str]) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
    return path


def _members(
    *, version: str = VERSION, torch: str = "torch==2.9.*", tag: str = "cp312-cp312-linux_x86_64"
) -> dict[str, str]:
    return {
        "deepspeed/__init__.py": "",
        f"deepspeed-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: deepspeed\nVersion: {version}\n"
        + (f"Requires-Dist: {torch}\n" if torch else "")
        + "Requires-Dist: torchvision; extra == 'dev'\n",
        f"deepspeed-{version}.dist-info/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n",
        f"deepspeed-{version}.dist-info/RECORD": "",
    }


REAL_0198_SCRIPTS = (
    "deepspeed",
    "deepspeed.pt",
    "ds",
    "ds_bench",
    "ds_io",
    "ds_nvme_tune",
    "ds_report",
    "ds_ssh",
    "dsr",
)


def test_the_real_wheel_layout_is_admitted(tmp_path: Path) -> None:
    """The members of the 0.19.8 wheel `dswheels build` makes (scripts, licence, entry point of another group)."""
    members = _members()
    members.update({f"{DATA}/scripts/{name}": "#!python\n" for name in REAL_0198_SCRIPTS})
    members[f"{DIST}/licenses/LICENSE"] = "Apache"
    members[f"{DIST}/top_level.txt"] = "deepspeed\n"
    members[f"{DIST}/entry_points.txt"] = "[pytest_randomly.random_seeder]\ndeepspeed = deepspeed.runtime.utils:x\n"
    members["deepspeed/ops/adam/cpu_adam_op.cpython-312-x86_64-linux-gnu.so"] = ""
    members[f"{DATA}/platlib/deepspeed/extra.py"] = ""
    path = _wheel(tmp_path, LINUX, members)
    assert read_admitted(path, parse_wheel(LINUX), error=PublishError, hint="").metadata.version == VERSION
    windows = {
        k.replace("linux_x86_64", "win_amd64"): v.replace("linux_x86_64", "win_amd64") for k, v in _members().items()
    }
    windows.update({f"{DATA}/scripts/{name}": "" for name in ("deepspeed.bat", "ds", "ds_report.bat", "ds_report")})
    path = _wheel(tmp_path, WINDOWS, windows)
    read_admitted(path, parse_wheel(WINDOWS), error=PublishError, hint="")


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        (_members(version="0.19.8+cu126torch2.5"), "its METADATA says deepspeed 0.19.8+cu126torch2.5"),
        (_members(torch="torch==2.5.*"), "it requires torch==2.5.*; a wheel for torch 2.9 pins torch==2.9.*"),
        (_members(torch=""), "it requires no torch"),
        (_members(torch="torch>=2.0"), "it requires torch>=2.0"),
        (_members(tag="py3-none-any"), "its WHEEL file says Tag: py3-none-any"),
        ({**_members(), f"{DATA}/scripts/pip": ""}, "a script DeepSpeed does not install (bin/pip)"),
        ({**_members(), f"{DATA}/scripts/deepspeed.bat": ""}, "bin/deepspeed.bat"),  # Windows' only
        ({**_members(), f"{DATA}/scripts/sub/ds": ""}, "bin/sub/ds"),
        ({**_members(), f"{DATA}/data/bin/python3": ""}, "the environment's data directory"),
        ({**_members(), f"{DATA}/headers/x.h": ""}, "the environment's headers directory"),
        ({**_members(), f"{DATA}/purelib/torch/x.py": ""}, "site-packages/torch/x.py"),
        ({**_members(), "sitecustomize.py": ""}, "sitecustomize.py: outside the deepspeed package"),
        ({**_members(), "x.pth": ""}, "x.pth: outside the deepspeed package"),
        ({**_members(), "deepspeed/../pip/__init__.py": ""}, "not a plain relative path"),
        ({**_members(), "/etc/x": ""}, "not a plain relative path"),
        ({**_members(), "deepspeed\\..\\x": ""}, "not a plain relative path"),
        ({**_members(), "deepspeed-9.9.data/scripts/ds": ""}, "deepspeed-9.9.data/scripts/ds: outside"),
        ({**_members(), f"{DIST}/entry_points.txt": "[console_scripts]\npip = x:y\n"}, "scripts DeepSpeed does not"),
        ({**_members(), f"{DIST}/entry_points.txt": "[gui_scripts]\npython3 = x:y\n"}, "install: python3"),
    ],
)
def test_a_wheel_that_is_not_its_name_is_refused(tmp_path: Path, members: dict[str, str], problem: str) -> None:
    path = _wheel(tmp_path, LINUX, members)
    with pytest.raises(PublishError) as caught:
        read_admitted(path, parse_wheel(LINUX), error=PublishError, hint="rebuild it")
    assert problem in f"{caught.value.message}\n{caught.value.details}"


def test_many_problems_are_listed_with_a_cap(tmp_path: Path) -> None:
    members = {**_members(), **{f"x{i}.py": "" for i in range(50)}}
    with pytest.raises(PublishError) as caught:
        read_admitted(_wheel(tmp_path, LINUX, members), parse_wheel(LINUX), error=PublishError, hint="")
    assert "... and 42 more" in str(caught.value.details)


# --- 16. a yanked wheel is called yanked ---------------------------------------------------------------------------


def _index_file(name: str, yanked: str | None = None) -> IndexFile:
    return IndexFile(filename=name, url=name, yanked=yanked, wheel=try_parse_wheel(name))


WANTED = Wanted(
    torch=TorchMinor((2, 9)),
    variant=Variant.parse("cu128"),
    python=Python.parse("3.12"),
    platform=Platform.LINUX_X86_64,
)


@pytest.mark.parametrize("reason", ["broken cpu_adam", "", "\x1b[2Jclear\nscreen"])
def test_the_only_fitting_wheel_yanked_is_said_to_be_yanked(reason: str) -> None:
    lines = nearest(WANTED, [_index_file(LINUX, yanked=reason)])
    assert lines[0].startswith(f"{LINUX}, the wheel for this environment, is yanked: ")
    assert lines[0].endswith(reason.replace("\x1b", "?").replace("\n", "?") or "no reason given")
    assert not any("at all" in line for line in lines)


def test_a_yanked_wheel_comes_before_the_nearest_others() -> None:
    other = LINUX.replace("torch2.9", "torch2.8")
    lines = nearest(WANTED, [_index_file(LINUX, yanked="bad"), _index_file(other)])
    assert lines[0] == f"{LINUX}, the wheel for this environment, is yanked: bad"
    assert "wheels exist for torch 2.8" in lines[1]


# --- one timeout policy (host/http.py: TIMEOUTS) -------------------------------------------------------------


def _numbers_in(node: ast.AST | None) -> bool:
    return node is not None and any(
        isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
        for n in ast.walk(node)
    )


def test_every_module_that_talks_http_takes_the_one_timeout_policy() -> None:
    """No module that imports requests sets its own seconds: a request's timeout, a timeout parameter's default
    and a *TIMEOUT* constant come from http.TIMEOUTS (there were five: 15/120, 15/60, 30, 60 and 600 s)."""
    own: list[str] = []
    for path in sorted((ROOT / "dswheels").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path.name == "http.py" or not any(
            isinstance(n, ast.Import) and any(a.name == "requests" for a in n.names) for n in ast.walk(tree)
        ):
            continue
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                own += [f"{where}:{k.lineno}" for k in node.keywords if k.arg == "timeout" and _numbers_in(k.value)]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                pairs = [
                    *zip(args.args[len(args.args) - len(args.defaults) :], args.defaults, strict=True),
                    *zip(args.kwonlyargs, args.kw_defaults, strict=True),
                ]
                own += [f"{where}:{a.lineno}" for a, d in pairs if "timeout" in a.arg and _numbers_in(d)]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = any(isinstance(t, ast.Name) and "TIMEOUT" in t.id.upper() for t in targets)
                own += [f"{where}:{node.lineno}"] if named and _numbers_in(node.value) else []
    assert own == [], "timeouts of their own (take http.TIMEOUTS): " + ", ".join(own)
