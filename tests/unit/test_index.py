"""The release index: naming, pages, the human page, the install line, the site on disk.

Pages are read back with pypi-simple (the parser pip-adjacent tools use) and with our own
reader; both must agree on every link of every page.

Longer than most modules: the site is one artefact, and its cases share one published set.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from pypi_simple import IndexPage, ProjectPage, RepositoryPage

from dswheels.index.effects.site_files import local_index_files, write_site
from dswheels.index.pages import MARKER, render_site
from dswheels.index.yank import apply_yanked, parse_yanked
from dswheels.kernel.errors import ConfigError, PublishError
from dswheels.kernel.index_files import IndexFile, parse_project_page
from dswheels.kernel.index_links import file_href, install_command, partition_url, uv_project
from dswheels.kernel.manifest import manifest_name
from dswheels.kernel.model import Cell, Platform, Python, Variant
from dswheels.kernel.naming import parse_wheel, partition, wheel_filename
from dswheels.kernel.versions import TorchMinor
from dswheels.stores import list_published
from dswheels.stores.directory import scan_directory
from tests.conftest import ROOT
from tests.support.wheels import write_deepspeed_wheel, write_manifest
from tests.unit.strategies import any_cells

TORCH_INDEX = "https://download.pytorch.org/whl/{variant}"
SITE = "https://octo.github.io/dswheels/"

# --- wheel names -------------------------------------------------------------------------------------


@given(any_cells)
def test_every_wheel_name_parses_back_to_its_cell_and_partition(cell: Cell) -> None:
    wheel = parse_wheel(wheel_filename(cell))
    assert wheel.cell == cell
    assert wheel.partition == partition(cell)
    assert wheel.canonical == wheel_filename(cell)
    assert wheel.build == ""


def test_a_build_tag_respin_is_the_same_cell() -> None:
    wheel = parse_wheel("deepspeed-0.19.8+cu128torch2.9-1-cp312-cp312-win_amd64.whl")
    assert wheel.build == "1"
    assert wheel.canonical == "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("deepspeed-0.19.8-cp312-cp312-win_amd64.whl", "no '+<variant>torch<M.m>' label"),
        ("torch-2.9.1+cu128-cp312-cp312-win_amd64.whl", "a wheel of torch"),
        ("deepspeed-0.19.8+cu128torch2.9-cp312-cp312-macosx_11_0_arm64.whl", "macosx_11_0_arm64"),
        ("deepspeed-0.19.8+rocm6torch2.9-cp312-cp312-linux_x86_64.whl", "not a torch variant"),
        ("deepspeed-0.19.8+cu128torch2.9-py3-none-any.whl", "not a Python version"),
        ("deepspeed-0.19.8+cu128torch2-cp312-cp312-win_amd64.whl", "expected <X.Y.Z>"),
        ("deepspeed-0.19.8+cu128.torch2.9-cp312-cp312-win_amd64.whl", "not a torch variant"),
        ("deepspeed-0.19.8.whl", "not a wheel filename"),
    ],
)
def test_foreign_or_malformed_names_are_refused_with_the_reason(name: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        parse_wheel(name)


# --- hrefs ---------------------------------------------------------------------------------------------


def test_hrefs_are_relative_to_the_page_and_encode_plus() -> None:
    name = "deepspeed-0.19.8+cu128torch2.9-cp312-cp312-win_amd64.whl"
    assert file_href(f"files/{name}", page="index.html") == f"files/{name.replace('+', '%2B')}"
    assert file_href(f"files/{name}", page="simple/deepspeed/index.html").startswith("../../files/deepspeed-0.19.8%2B")
    absolute = f"https://github.com/o/r/releases/download/v1/{name}"
    assert file_href(absolute, page="whl/x/index.html") == absolute.replace("+", "%2B")
    # an already encoded URL is not encoded twice
    assert file_href(absolute.replace("+", "%2B"), page="index.html") == absolute.replace("+", "%2B")


# --- a published set -------------------------------------------------------------------------------


def _entry(cell: Cell, *, requires_python: str | None = ">=3.9", yanked: str | None = None) -> IndexFile:
    name = wheel_filename(cell)
    digest = hashlib.sha256(name.encode()).hexdigest()
    return IndexFile(
        filename=name,
        wheel=parse_wheel(name),
        url=f"files/{name}",
        sha256=digest,
        size=1234,
        requires_python=requires_python,
        metadata_sha256=hashlib.sha256(digest.encode()).hexdigest(),
        yanked=yanked,
    )


def _cells() -> list[Cell]:
    return [
        Cell((0, 19, ds), TorchMinor(torch), Variant.parse(variant), Python.parse(py), platform)
        for ds in (7, 8)
        for torch, variant in (((2, 9), "cu128"), ((2, 10), "cu128"), ((2, 9), "cpu"), ((2, 10), "cu130"))
        for py in ("3.11", "3.12")
        for platform in Platform
        if not (variant == "cpu" and platform is Platform.WIN_AMD64)
    ]


@pytest.fixture
def entries() -> list[IndexFile]:
    files = [_entry(c) for c in _cells()]
    files[0] = _entry(_cells()[0], yanked="broken FusedAdam")
    files[1] = _entry(_cells()[1], requires_python=">=3.10,<3.14")
    return files


def _pages(entries: list[IndexFile]) -> dict[str, str]:
    return render_site(entries, site_url=SITE, torch_index=TORCH_INDEX)


def test_the_site_has_the_documented_layout(entries: list[IndexFile]) -> None:
    pages = _pages(entries)
    partitions = sorted({e.published.partition for e in entries})
    expected = {
        MARKER,
        ".nojekyll",
        "index.html",
        "site.css",
        "pick.js",
        "simple/index.html",
        "simple/deepspeed/index.html",
    }
    for part in partitions:
        expected |= {
            f"whl/{part}/index.html",
            f"whl/{part}/simple/index.html",
            f"whl/{part}/simple/deepspeed/index.html",
        }
    assert set(pages) == expected
    layout = (ROOT / "docs" / "index-layout.md").read_text(encoding="utf-8")
    for documented in ("simple/deepspeed/index.html", "whl/<partition>/simple/deepspeed/index.html", MARKER, "pick.js"):
        assert documented in layout


def test_output_depends_only_on_the_set_not_its_order(entries: list[IndexFile]) -> None:
    shuffled = entries[:]
    random.Random(4).shuffle(shuffled)  # noqa: S311 - a fixed shuffle
    assert _pages(shuffled) == _pages(entries)


def _page_url(path: str) -> str:
    return SITE + path.removesuffix("index.html")


def test_every_page_parses_with_pypi_simple_and_carries_every_attribute(entries: list[IndexFile]) -> None:
    pages = _pages(entries)
    by_name = {e.filename: e for e in entries}
    project_pages = [p for p in pages if p.endswith("deepspeed/index.html") or re.fullmatch(r"whl/[^/]+/index.html", p)]
    assert len(project_pages) == 1 + 2 * len({e.published.partition for e in entries})
    for path in project_pages:
        page = ProjectPage.from_html("deepspeed", pages[path], base_url=_page_url(path))
        assert page.repository_version == "1.0"
        assert page.packages, path
        part = path.split("/")[1] if path.startswith("whl/") else None
        for package in page.packages:
            entry = by_name[package.filename]
            assert part is None or entry.published.partition == part, f"{package.filename} leaked into {path}"
            assert package.url == SITE + "files/" + package.filename.replace("+", "%2B")
            assert package.digests == {"sha256": entry.sha256}
            assert package.has_metadata
            assert package.metadata_url == package.url + ".metadata"
            assert package.metadata_digests == {"sha256": entry.metadata_sha256}
            assert package.requires_python == entry.requires_python
            assert package.is_yanked == (entry.yanked is not None)
            assert package.yanked_reason == entry.yanked
            assert package.version == str(entry.published.version)
            assert package.package_type == "wheel"
        # the reader `dswheels install` and `plan --skip-published` use agrees with pypi-simple
        ours = parse_project_page(pages[path], _page_url(path))
        assert [(f.filename, f.url, f.sha256, f.requires_python, f.is_yanked) for f in ours] == [
            (p.filename, p.url, p.digests["sha256"], p.requires_python, p.is_yanked) for p in page.packages
        ]
    for path in ("simple/index.html", *(p for p in pages if p.endswith("/simple/index.html"))):
        assert IndexPage.from_html(pages[path]).projects == ["deepspeed"]
        root = RepositoryPage.from_html(pages[path], base_url=_page_url(path))
        assert root.repository_version == "1.0"
        assert [link.url for link in root.links] == [_page_url(path) + "deepspeed/"]


def test_the_all_wheels_index_and_partitions_list_every_file_once(entries: list[IndexFile]) -> None:
    pages = _pages(entries)
    everything = [f.filename for f in parse_project_page(pages["simple/deepspeed/index.html"], SITE)]
    assert sorted(everything) == sorted(e.filename for e in entries)
    parts = [
        f.filename
        for path, text in pages.items()
        if re.fullmatch(r"whl/[^/]+/simple/deepspeed/index.html", path)
        for f in parse_project_page(text, SITE)
    ]
    assert sorted(parts) == sorted(everything)


def test_an_aarch64_wheel_is_served_in_its_partition_beside_the_x86_64_one() -> None:
    # a partition is (variant, torch minor): pip and uv choose among its files by the platform tag
    arm = Cell((0, 19, 8), TorchMinor((2, 10)), Variant.parse("cpu"), Python.parse("3.11"), Platform.LINUX_AARCH64)
    x86 = replace(arm, platform=Platform.LINUX_X86_64)
    pages = _pages([_entry(arm), _entry(x86)])
    assert partition(arm) == partition(x86) == "cpu-torch2.10"
    served = [f.filename for f in parse_project_page(pages["whl/cpu-torch2.10/simple/deepspeed/index.html"], SITE)]
    assert sorted(served) == sorted([wheel_filename(arm), wheel_filename(x86)])
    assert wheel_filename(arm).endswith("-cp311-cp311-linux_aarch64.whl")


def test_a_file_published_twice_is_an_error(entries: list[IndexFile]) -> None:
    with pytest.raises(ValueError, match="published twice"):
        _pages([*entries, entries[3]])


# --- the human page ----------------------------------------------------------------------------------


def test_the_home_page_shows_coverage_and_one_install_line_per_partition(entries: list[IndexFile]) -> None:
    home = _pages(entries)["index.html"]
    assert home.startswith("<!DOCTYPE html>")
    for ds in ("0.19.8", "0.19.7"):
        assert f'id="deepspeed-{ds}"' in home
    # every published wheel is linked from the coverage table
    linked = {f.filename for f in parse_project_page(home, SITE) if f.filename.endswith(".whl")}
    assert linked == {e.filename for e in entries}
    # a (partition, python) without a wheel shows a dash, e.g. cpu on Windows is linux-only here
    cpu_row = re.search(r'<tr><td class="row"><a href="#cpu-torch2.9">.*?</tr>', home)
    assert cpu_row is not None
    assert "windows" not in cpu_row.group(0)
    assert "linux" in cpu_row.group(0)
    for part in sorted({e.published.partition for e in entries}):
        newest = max(
            (e for e in entries if e.published.partition == part and e.yanked is None),
            key=lambda e: e.published.version,
        )
        variant = part.split("-torch")[0]
        for tool in ("pip", "uv"):
            line = install_command(
                tool=tool,
                version=str(newest.published.version),
                site_url=SITE,
                part=part,
                torch_index=TORCH_INDEX.format(variant=variant),
            )
            assert line.replace('"', "&quot;") in home
    assert 'class="yanked"' in home


def test_page_text_is_escaped(entries: list[IndexFile]) -> None:
    home = render_site(entries, site_url=SITE, torch_index=TORCH_INDEX, title="<script>x</script>")["index.html"]
    assert "<script>x" not in home
    assert "&lt;script&gt;x" in home


def test_the_pickers_data_cannot_end_its_script_element(entries: list[IndexFile]) -> None:
    """A yanked reason is text from a file anyone with write access to the yank list wrote: in the picker's JSON
    it stays data (no "</script>", "<!--" or "&" an HTML parser reads), and it reads back exactly."""
    import json

    hostile = "</script><script>alert(1)</script><!-- & \u2028"
    yanked = [replace(e, yanked=hostile) if n % 2 else e for n, e in enumerate(entries)]
    home = render_site(yanked, site_url=SITE, torch_index=TORCH_INDEX)["index.html"]
    scripts = re.findall(r"<script[^>]*>", home)
    assert scripts == ['<script type="application/json" id="pick-data">', '<script src="pick.js" defer>']
    data = home.split('<script type="application/json" id="pick-data">', 1)[1].split("</script>", 1)[0]
    for markup in "<>&":
        assert markup not in data
    assert hostile in {w["yanked"] for w in json.loads(data)["wheels"].values()}
    for inline in ("style=", "<style", "onclick"):  # nothing inline: a strict CSP allows the page
        assert inline not in home


# --- the install line ---------------------------------------------------------------------------------


def test_the_readme_install_lines_are_what_the_index_prints() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for tool in ("pip", "uv"):
        line = install_command(
            tool=tool,
            version="0.19.8+cu128torch2.9",
            site_url="https://OWNER.github.io/dswheels/",
            part="cu128-torch2.9",
            torch_index="https://download.pytorch.org/whl/cu128",
        )
        assert line in readme.replace("\\\n   ", ""), f"README lacks the {tool} line:\n{line}"
    project = uv_project(
        version="0.19.8+cu128torch2.9",
        site_url="https://OWNER.github.io/dswheels/",
        part="cu128-torch2.9",
        torch_index="https://download.pytorch.org/whl/cu128",
    )
    assert f"```toml\n{project}\n```" in readme, f"README lacks the uv project lines:\n{project}"


def test_the_install_line_pins_the_exact_local_version_and_lists_the_partition_first() -> None:
    line = install_command(
        tool="uv",
        version="0.19.8+cputorch2.14",
        site_url="https://h/x",
        part="cpu-torch2.14",
        torch_index="https://t/cpu",
    )
    assert line == (
        'uv pip install "deepspeed==0.19.8+cputorch2.14" --extra-index-url https://h/x/whl/cpu-torch2.14/simple/'
        " --extra-index-url https://t/cpu"
    )
    assert partition_url("https://h/x/", "cpu-torch2.14") == "https://h/x/whl/cpu-torch2.14/simple/"


# --- yanking --------------------------------------------------------------------------------------------


def test_yank_rules_mark_files_and_report_rules_that_match_nothing(entries: list[IndexFile]) -> None:
    rules = parse_yanked(
        "# comment\n\ndeepspeed-0.19.7+cu130torch2.10-* segfaults on import\ndeepspeed-9.9.9+x.whl typo\n"
    )
    marked, unused = apply_yanked(entries, rules)
    yanked = [e.filename for e in marked if e.yanked == "segfaults on import"]
    assert yanked
    assert all(name.startswith("deepspeed-0.19.7+cu130torch2.10-") for name in yanked)
    assert [r.line for r in unused] == [4]
    with pytest.raises(ValueError, match="names no wheel"):
        parse_yanked("deepspeed-0.19.7 reason")


# --- on disk ---------------------------------------------------------------------------------------------


def _published(tmp_path: Path) -> Path:
    published = tmp_path / "published"
    for version in ("0.19.7", "0.19.8"):
        for variant, torch in (("cu128", "2.9"), ("cpu", "2.9")):
            write_deepspeed_wheel(published, version=version, variant=variant, torch=torch)
    return published


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_site_is_written_whole_and_identically_twice(tmp_path: Path) -> None:
    wheels = scan_directory(_published(tmp_path))
    pages = render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX)
    write_site(tmp_path / "a", pages, wheels=wheels)
    write_site(tmp_path / "b", pages, wheels=wheels)
    write_site(tmp_path / "b", pages, wheels=wheels)  # over its own previous output
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    files = tmp_path / "a" / "files"
    for wheel in wheels:
        assert (files / wheel.wheel.filename).read_bytes() == wheel.path.read_bytes()
        metadata = (files / (wheel.wheel.filename + ".metadata")).read_bytes()
        assert hashlib.sha256(metadata).hexdigest() == wheel.metadata_sha256
        assert b"Requires-Dist: torch==2.9.*" in metadata
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".") and p.name != ".dswheels-lock"]  # Windows'
    assert not leftovers, "staging left behind"


def test_files_no_longer_published_leave_the_site_and_others_are_not_relinked(tmp_path: Path) -> None:
    published = _published(tmp_path)
    wheels = scan_directory(published)
    out = tmp_path / "site"
    write_site(out, render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX), wheels=wheels)
    kept = out / "files" / wheels[1].wheel.filename
    inode = kept.stat().st_ino
    gone = wheels[0].wheel.filename
    (published / gone).unlink()
    (published / (gone + ".metadata")).unlink(missing_ok=True)
    wheels = scan_directory(published)
    write_site(out, render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX), wheels=wheels)
    assert not (out / "files" / gone).exists()
    assert not (out / "files" / (gone + ".metadata")).exists()
    assert kept.stat().st_ino == inode
    assert sorted(p.name for p in (out / "files").iterdir()) == sorted(
        n for w in wheels for n in (w.wheel.filename, w.wheel.filename + ".metadata")
    )


def test_a_failed_write_leaves_the_old_site_whole(tmp_path: Path) -> None:
    wheels = scan_directory(_published(tmp_path))
    pages = render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX)
    out = tmp_path / "site"
    write_site(out, pages, wheels=wheels)
    before = _tree(out)
    broken = wheels[0].path
    broken.rename(broken.with_suffix(".gone"))  # the link step fails half-way through
    with pytest.raises(PublishError, match="changed while the site was written"):
        write_site(out, {**pages, "index.html": "new"}, wheels=wheels)
    assert _tree(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site")], "staging left behind"


def test_only_a_dswheels_index_is_ever_replaced(tmp_path: Path) -> None:
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(ConfigError, match="refusing to replace"):
        write_site(precious, {"index.html": "x"})
    assert (precious / "thesis.tex").exists()
    published = _published(tmp_path / "inside")
    (tmp_path / "inside" / MARKER).write_text("")  # an earlier index, with the wheels kept inside it
    with pytest.raises(ConfigError, match="inside the output directory"):
        write_site(tmp_path / "inside", {"index.html": "x"}, wheels=scan_directory(published))


def test_a_renamed_wheel_is_refused(tmp_path: Path) -> None:
    wheel = write_deepspeed_wheel(tmp_path / "w", variant="cu128", torch="2.9")
    renamed = wheel.with_name(wheel.name.replace("cu128", "cu130"))
    wheel.rename(renamed)
    with pytest.raises(PublishError, match=re.escape("its METADATA says deepspeed 0.19.8+cu128torch2.9")):
        scan_directory(tmp_path / "w")
    renamed.write_bytes(b"not a zip")
    with pytest.raises(PublishError, match="File is not a zip file"):
        scan_directory(tmp_path / "w")


def test_published_names_are_read_from_a_site_or_a_wheel_directory(tmp_path: Path) -> None:
    published = _published(tmp_path)
    wheels = scan_directory(published)
    write_site(
        tmp_path / "site", render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX), wheels=wheels
    )
    names = sorted(w.wheel.filename for w in wheels)
    assert sorted(list_published(str(tmp_path / "site"))) == names
    assert sorted(list_published(str(published))) == names
    assert sorted(list_published((tmp_path / "site").as_uri())) == names
    with pytest.raises(ConfigError, match="neither a directory nor an http"):
        list_published(str(tmp_path / "nowhere"))


def test_a_published_manifest_goes_beside_its_wheel_and_leaves_with_it(tmp_path: Path) -> None:
    published = _published(tmp_path)
    wheels = scan_directory(published)
    with_manifest = wheels[1].wheel.filename
    manifest = write_manifest(wheels[1].path)
    assert manifest.name == manifest_name(with_manifest)
    out = tmp_path / "site"
    write_site(out, render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX), wheels=wheels)
    assert (out / "files" / manifest.name).read_bytes() == manifest.read_bytes()
    assert (out / "files" / manifest.name).stat().st_ino == manifest.stat().st_ino  # linked, not copied
    assert not (out / "files" / manifest_name(wheels[0].wheel.filename)).exists()  # none published for it
    page = (out / "simple" / "deepspeed" / "index.html").read_text(encoding="utf-8")
    assert "manifest.json" not in page  # beside the wheel, not an installable link
    manifest.unlink()
    write_site(out, render_site(local_index_files(wheels), site_url=SITE, torch_index=TORCH_INDEX), wheels=wheels)
    assert not (out / "files" / manifest.name).exists()
