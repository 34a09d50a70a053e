"""The AArch64 instruction reader (dswheels.kernel.binaries.a64) on real machine code: GNU as 2.40's encodings of
every class it knows and of a baseline, and a kernel compiled by Debian's arm64 GCC 12 two ways
(tests/data/a64/README.md)."""

from __future__ import annotations

import struct

import pytest

from dswheels.kernel.binaries.a64 import FEATURES, A64Error, code_sections, elf_machine, scan_a64, scan_words
from dswheels.kernel.compat import load_compat
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "a64"
BASELINE = load_compat().cpu_baselines["armv8.2-a"]


def _words(name: str) -> list[int]:
    return [w for (w,) in struct.iter_unpack("<I", (DATA / name).read_bytes())]


def _lines(name: str) -> list[str]:
    text = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [line for line in text if line and not line.startswith("//")]


def test_each_class_reads_exactly_its_feature_in_what_gnu_as_wrote() -> None:
    lines, words = _lines("features.s"), _words("features.bin")
    assert len(lines) == len(words) == sum(len(e) for e in FEATURES.values())
    for line, word in zip(lines, words, strict=True):
        feature = line.rsplit("//", 1)[1].strip()
        found = [name for name, encodings in FEATURES.items() if any(e.matches(word) for e in encodings)]
        assert found == [feature], (line, f"{word:08x}")


def test_no_instruction_of_the_baseline_is_taken_for_a_newer_one() -> None:
    words = _words("baseline.bin")
    assert len(words) == len(_lines("baseline.s"))
    report = scan_words([struct.pack(f"<{len(words)}I", *words)], list(FEATURES))
    assert (report.instructions, report.violations) == (len(words), 0), report.examples


def test_the_baseline_forbids_every_feature_the_reader_knows() -> None:
    assert BASELINE.arch == "aarch64"
    assert set(BASELINE.forbidden_features) == set(FEATURES)


def test_dswheels_flags_stay_within_armv8_2_a() -> None:
    data = (DATA / "libadam-armv8.2-a.so").read_bytes()
    assert elf_machine(data) == "aarch64"
    report = scan_a64(data, BASELINE.forbidden_features)
    assert report.instructions > 50
    assert report.ok, report.examples


def test_deepspeeds_native_flags_on_an_arm64_runner_fail_the_baseline() -> None:
    # -march=native -D__SVE__ on a Neoverse N2 (what DeepSpeed's builders give on GitHub's arm64 runner)
    report = scan_a64((DATA / "libadam-native-n2.so").read_bytes(), BASELINE.forbidden_features)
    assert not report.ok
    assert (report.instructions, report.violations) == (37, 28)  # objdump -d: 28 SVE instructions of 37
    assert report.kinds == ("SVE/SVE2 (Armv9.0; optional from 8.2)",)
    assert report.describe("armv8.2-a").startswith("28 of 37 instructions above armv8.2-a")
    # the same code judged against a baseline that has SVE passes
    assert scan_a64((DATA / "libadam-native-n2.so").read_bytes(), ["sme"]).ok


def test_other_files_are_refused_not_misread(tmp_path: object) -> None:
    x86 = (ROOT / "tests" / "data" / "elf" / "libfixture.so").read_bytes()
    assert elf_machine(x86) == "x86_64"
    with pytest.raises(A64Error, match="not an AArch64"):
        code_sections(x86)
    arm = bytearray((DATA / "libadam-armv8.2-a.so").read_bytes())
    struct.pack_into("<Q", arm, 0x28, len(arm) - 8)  # section headers past the end
    with pytest.raises(A64Error, match="run past the end"):
        code_sections(bytes(arm))
    with pytest.raises(ValueError, match="unknown AArch64 features"):
        scan_words([b""], ["avx2"])
