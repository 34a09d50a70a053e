"""The shipped facts are consistent: every reference between tables resolves."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from dswheels.kernel.compat import CompatDataError, load_compat, parse_compat
from dswheels.kernel.compat.entries import OSES
from dswheels.kernel.model import Accelerator
from dswheels.kernel.versions import format_version

COMPAT = load_compat()


def test_every_torch_variant_has_a_toolkit_and_an_arch_list() -> None:
    for minor, release in COMPAT.torch.items():
        for os in OSES:
            for variant in release.variants[os]:
                assert variant.cuda in COMPAT.cuda, f"torch {format_version(minor)} {variant} has no toolkit facts"
                row = COMPAT.torch_arch_list(minor, variant.name)
                assert row is not None, f"torch {format_version(minor)} {variant} has no arch list"


def test_arch_lists_only_use_tokens_their_torch_accepts() -> None:
    for row in COMPAT.arch_lists:
        for minor in COMPAT.torch:
            if minor not in row.torch:
                continue
            accepted = COMPAT.arch_tokens(minor)
            for os in row.lists:  # linux, windows, or a platform of its own (linux_aarch64)
                for token in row.lists[os]:
                    assert token.removesuffix("+PTX") in accepted, (format_version(minor), row.variant, token)


def test_the_latest_patch_belongs_to_its_minor() -> None:
    for minor, release in COMPAT.torch.items():
        assert release.latest.startswith(format_version(minor) + ".")


def test_toolkits_are_consistent() -> None:
    for minor, toolkit in COMPAT.cuda.items():
        assert toolkit.install.startswith(format_version(minor) + ".")
        assert toolkit.msvc[0] < toolkit.msvc[1]
        assert toolkit.sm, minor
    # CUDA 13 dropped everything below Turing; 12.8 added Blackwell
    assert "70" not in COMPAT.cuda[(13, 0)].sm
    assert "120" in COMPAT.cuda[(12, 8)].sm
    assert "120" not in COMPAT.cuda[(12, 6)].sm


def test_runner_images_and_baselines() -> None:
    for image in COMPAT.runner_images.values():
        assert image.os in OSES
        assert image.msvc if image.os == "windows" else image.gcc, image.name
    assert "x86-64-v2" in COMPAT.cpu_baselines


def test_rule_ids_are_unique_and_sourced() -> None:
    ids = [r.id for r in COMPAT.rules] + [w.id for w in COMPAT.workarounds]
    assert len(ids) == len(set(ids))
    for rule in COMPAT.rules:
        assert rule.source, rule.id
        assert rule.why, rule.id
        assert rule.fix, rule.id


def test_every_op_is_shipped_or_explained_everywhere() -> None:
    for op in COMPAT.ops:
        assert op.source, op.name
        for os in OSES:
            assert os in op.ship or op.left_out.get(os), (op.accelerator, op.name, os)


def test_ops_of_the_newest_release() -> None:
    cuda = {op.name for op in COMPAT.ops_for((0, 19, 8), Accelerator.CUDA)}
    cpu = {op.name for op in COMPAT.ops_for((0, 19, 8), Accelerator.CPU)}
    assert "sparse_attn" not in cuda  # removed in 0.19.7
    assert {"fused_adam", "cpu_adam", "pin_memory", "utils", "dc"} <= cuda
    assert {"cpu_adam", "cpu_adagrad", "cpu_lion", "deepspeed_shm_comm"} <= cpu
    assert "utils" not in {op.name for op in COMPAT.ops_for((0, 17, 0), Accelerator.CUDA)}


def test_the_mismatch_whitelist_by_version() -> None:
    assert (12, 9) in COMPAT.mismatch_ok((0, 19, 8), 12)
    assert (12, 8) not in COMPAT.mismatch_ok((0, 16, 3), 12)
    assert COMPAT.mismatch_ok((0, 19, 8), 13) == frozenset()


def _raw() -> dict[str, object]:
    data = yaml.safe_load(resources.files("dswheels").joinpath("compat.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_every_entry_names_its_source() -> None:
    data = _raw()
    for table in ("torch", "cuda", "runner_images", "cpu_baselines"):
        entries = data[table]
        assert isinstance(entries, dict)
        for key, entry in entries.items():
            assert isinstance(entry, dict)
            assert entry.get("source"), f"{table}.{key} has no source"
    for table in ("torch_arch_lists", "torch_arch_tokens", "rules", "workarounds", "msvc_stl_cuda_floor"):
        rows = data[table]
        assert isinstance(rows, list)
        for row in rows:
            assert row.get("source"), f"{table}: {row}"


def test_a_broken_entry_names_its_path() -> None:
    data = _raw()
    torch = data["torch"]
    assert isinstance(torch, dict)
    del torch["2.9"]["latest"]
    with pytest.raises(CompatDataError, match=r"torch\.2\.9.*latest"):
        parse_compat(data)
