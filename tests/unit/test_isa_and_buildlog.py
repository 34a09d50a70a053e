"""CPU-baseline proof from disassembly, build-log reading, the end-of-run summary."""

from __future__ import annotations

from dswheels.building.output_reading import (
    OpSources,
    extension_started,
    failing_ops,
    failure_excerpt,
    parse_ccache_stats_log,
    parse_sccache_stats,
)
from dswheels.building.summary import CellOutcome, render_results_markdown, render_results_table
from dswheels.kernel.binaries.isa import scan_disassembly
from dswheels.kernel.compat import load_compat

# `objdump -d --no-show-raw-insn` of `float sc(float x, float y) { return x * y + 1.0f; }` and a dot
# product, compiled by gcc 12 -O3 with each -march (recorded on the build machine)
V2 = """\
00000000000000e0 <sc>:
  e0:\tmulss  %xmm1,%xmm0
  e4:\taddss  0x0(%rip),%xmm0        # ec <sc+0xc>
  ec:\tret
  1b:\tpxor   %xmm0,%xmm0
  30:\tmovups (%rcx,%rax,1),%xmm1
"""
V3_SCALAR = """\
0000000000000140 <sc>:
 140:\tvfmadd213ss 0x0(%rip),%xmm1,%xmm0        # 149 <sc+0x9>
 149:\tret
"""
V3_VECTOR = """\
  30:\tvmovups (%rdi,%rax,1),%ymm4
  35:\tvmulps (%rcx,%rax,1),%ymm4,%ymm1
"""
V4 = """\
  30:\tvmovups (%rdi,%rax,1),%zmm5
  37:\tvmulps (%rcx,%rax,1),%zmm5,%zmm1
  40:\tkmovw  %k1,%eax
"""
RAW = "   0:\t48 89 f1             \tmov    %rsi,%rcx\n   3:\tc5 fc 58 c1          \tvaddps %ymm1,%ymm0,%ymm0\n"


def _forbidden(name: str) -> tuple[str, ...]:
    return load_compat().cpu_baselines[name].forbidden_registers


def test_v2_code_passes_v2() -> None:
    report = scan_disassembly(V2, _forbidden("x86-64-v2"))
    assert report.ok
    assert report.instructions == 5


def test_avx_scalar_code_fails_v2_without_any_ymm() -> None:
    # what -march=native on an AVX2 host makes of plain scalar code: VEX-encoded, xmm only
    report = scan_disassembly(V3_SCALAR, _forbidden("x86-64-v2"))
    assert not report.ok
    assert report.kinds == ("AVX (VEX-encoded) instructions",)
    assert "vfmadd213ss" in report.examples[0]


def test_levels() -> None:
    assert scan_disassembly(V3_VECTOR, _forbidden("x86-64-v3")).ok
    assert not scan_disassembly(V3_VECTOR, _forbidden("x86-64-v2")).ok
    v4 = scan_disassembly(V4, _forbidden("x86-64-v3"))
    assert (v4.violations, v4.kinds) == (3, ("AVX-512 instructions (zmm or opmask registers)",))
    assert scan_disassembly(V4, _forbidden("x86-64-v4")).ok


def test_raw_bytes_format_is_read_too() -> None:
    report = scan_disassembly(RAW, _forbidden("x86-64-v2"))
    assert (report.instructions, report.violations) == (2, 1)


# objdump -d (with bytes) of what each level must not hold, as GCC 12 emits it: an AVX-512VL instruction on ymm
# without a mask (EVEX-encoded, no zmm, no %k), BMI2's shlx (VEX on general registers), lzcnt, a long EVEX
# instruction whose bytes go on over a second line, and instructions of extensions above x86-64-v4
EVEX_YMM = "  40:\t62 f3 75 28 25 c2 96 \tvpternlogd $0x96,%ymm2,%ymm1,%ymm0\n"
LONG = "  50:\t62 f1 7c 48 10 84 24 \tvmovups 0x100(%rsp),%zmm0\n  57:\t00 01 00 00 \n"
BMI = "  60:\tc4 e2 f9 f7 c6       \tshlx   %rax,%rsi,%rax\n  65:\tf3 48 0f bd c7       \tlzcnt  %rdi,%rax\n"
ABOVE_V4 = (
    "  70:\t62 f2 7e 48 52 c2    \tvdpbf16ps %zmm2,%zmm0,%zmm0\n"
    "  76:\tc4 e2 75 50 c2       \t{vex} vpdpbusd %ymm2,%ymm1,%ymm0\n"
    "  7b:\t62 f5 7c 48 58 c1    \tvaddph %zmm1,%zmm0,%zmm0\n"
)
F16C = "  80:\tc4 e3 7d 1d c0 00    \tvcvtps2ph $0x0,%ymm0,%xmm0\n"


def test_evex_without_zmm_or_mask_is_above_v3() -> None:
    report = scan_disassembly(EVEX_YMM, _forbidden("x86-64-v3"))
    assert (report.violations, report.kinds) == (1, ("AVX-512 instructions (EVEX-encoded)",))
    assert scan_disassembly(EVEX_YMM, _forbidden("x86-64-v4")).ok


def test_the_rest_of_a_long_instruction_is_not_an_instruction() -> None:
    report = scan_disassembly(LONG, _forbidden("x86-64-v4"))
    assert (report.instructions, report.violations) == (1, 0)


def test_bmi_and_lzcnt_are_above_v2() -> None:
    report = scan_disassembly(BMI, _forbidden("x86-64-v2"))
    assert (report.violations, report.kinds) == (2, ("x86-64-v3 instructions (BMI, LZCNT, MOVBE)",))
    assert scan_disassembly(BMI, _forbidden("x86-64-v3")).ok


def test_extensions_above_v4_fail_even_the_top_level() -> None:
    report = scan_disassembly(ABOVE_V4, _forbidden("x86-64-v4"))
    assert report.violations == 3
    assert report.kinds == (
        "instructions above x86-64-v4 (AVX512-BF16)",
        "instructions above x86-64-v4 (AVX512-FP16)",
        "instructions above x86-64-v4 (VNNI (AVX512-VNNI, AVX-VNNI))",
    )
    assert scan_disassembly(F16C, _forbidden("x86-64-v3")).ok  # F16C's conversion is x86-64-v3


LOG = """\
running build_ext
building 'deepspeed.ops.adam.cpu_adam_op' extension
building 'deepspeed.ops.comm.deepspeed_ccl_comm_op' extension
[1/2] c++ -MMD -MF /w/build/temp.linux-x86_64-cpython-311/csrc/cpu/comm/ccl.o.d -c /w/csrc/cpu/comm/ccl.cpp
FAILED: /w/build/temp.linux-x86_64-cpython-311/csrc/cpu/comm/ccl.o
c++ -MMD -MF /w/build/temp.linux-x86_64-cpython-311/csrc/cpu/comm/ccl.o.d -c /w/csrc/cpu/comm/ccl.cpp
/w/csrc/cpu/comm/ccl.cpp:8:10: fatal error: oneapi/ccl.hpp: No such file or directory
    8 | #include <oneapi/ccl.hpp>
compilation terminated.
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
RuntimeError: Error compiling objects for extension
ERROR Backend subprocess exited when trying to invoke build_wheel
""".splitlines()
OPS = [
    OpSources("cpu_adam", "DS_BUILD_CPU_ADAM", "deepspeed.ops.adam.cpu_adam_op", ("csrc/adam/cpu_adam.cpp",)),
    OpSources(
        "deepspeed_ccl_comm",
        "DS_BUILD_CCL_COMM",
        "deepspeed.ops.comm.deepspeed_ccl_comm_op",
        ("csrc/cpu/comm/ccl.cpp", "csrc/cpu/comm/shm.cpp"),
    ),
]


def test_failing_op_is_named_from_the_log() -> None:
    started = [m for line in LOG if (m := extension_started(line))]
    assert started == ["deepspeed.ops.adam.cpu_adam_op", "deepspeed.ops.comm.deepspeed_ccl_comm_op"]
    assert failing_ops(LOG, OPS, started) == ["deepspeed_ccl_comm"]
    # no source named: the op that was compiling last is blamed
    assert failing_ops(["error: something"], OPS, started[:1]) == ["cpu_adam"]


def test_failure_excerpt_keeps_the_first_error() -> None:
    noise = [f"copying file {i}" for i in range(500)]
    excerpt = failure_excerpt(noise + LOG + noise[:30], limit=30)
    assert any("fatal error: oneapi/ccl.hpp" in line for line in excerpt)
    assert excerpt[-1] == "copying file 29"
    assert "  [...]" in excerpt
    assert len(excerpt) <= 32


def test_ccache_and_sccache_stats() -> None:
    # ccache 4.7's stats log of a warm rebuild of cpu_adam (recorded): a compiler probe in /tmp
    # misses every time and is not the build's
    log = (
        "# /tmp/tmpubqjkwry/test.c\ncache_miss\ndirect_cache_miss\nlocal_storage_miss\n"
        "# /tmp/tmpubqjkwry/test.o\ncalled_for_link\n# \nno_input_file\n"
        "# ../../csrc/adam/cpu_adam.cpp\ndirect_cache_hit\nlocal_storage_hit\nlocal_storage_read_hit\n"
        "# ../../csrc/adam/cpu_adam_impl.cpp\ndirect_cache_hit\nlocal_storage_hit\n"
        "# build/temp.linux-x86_64-cpython-311/csrc/adam/cpu_adam.o\ncalled_for_link\n"
    )
    stats = parse_ccache_stats_log(log, base_dir="/cache/w/34f27d54e0")
    assert (stats.hits, stats.misses, stats.uncacheable) == (2, 0, 1)
    assert stats.describe() == "ccache: 2 hits, 0 misses (100%)"
    before = {"stats": {"cache_hits": {"counts": {"C/C++": 2}}, "cache_misses": {"counts": {"CUDA": 1}}}}
    after = {"stats": {"cache_hits": {"counts": {"C/C++": 5, "CUDA": 1}}, "cache_misses": {"counts": {"CUDA": 1}}}}
    assert parse_sccache_stats(after, before).as_json()["hits"] == 4


def test_summary_tables() -> None:
    ok = CellOutcome(
        cell_id="ds0.19.8-torch2.14-cu130-cp311-linux_x86_64",
        ok=True,
        wheel="deepspeed.whl",
        size=9_800_000,
        sha256="f" * 64,
        seconds=200.0,
        ops=(("fused_adam", 150.0),),
        cache="ccache",
        cache_hits=2,
        cache_misses=0,
        error="",
        log="/l.log",
    )
    bad = CellOutcome(
        cell_id="ds0.19.8-torch2.13-cpu-cp311-linux_x86_64",
        ok=False,
        wheel="",
        size=0,
        sha256="",
        seconds=12.0,
        ops=(),
        cache="",
        cache_hits=None,
        cache_misses=None,
        error="compiling deepspeed_ccl_comm failed | exit 1",
        log="/l2.log",
    )
    text = render_results_table([ok, bad], skipped=["ds0.19.8-torch2.13-cpu-cp312-linux_x86_64"])
    assert "built 1 of 3 cell(s)" in text
    assert "fused_adam 2m30s" in text
    assert "FAILED  ds0.19.8-torch2.13-cpu-cp311-linux_x86_64" in text
    assert "log: /l2.log" in text
    md = render_results_markdown([ok, bad])
    assert "| `ds0.19.8-torch2.14-cu130-cp311-linux_x86_64` | ok |" in md
    assert "failed \\| exit 1" in md  # a pipe in an error cannot break the table
    assert "ccache 2/2 hits" in md


# --- fatbin ---------------------------------------------------------------------------------------


def _elf_with_section(name: bytes, payload: bytes) -> bytes:
    """A minimal little-endian ELF64 with a null section, ``name`` and .shstrtab."""
    import struct

    shstrtab = b"\0" + name + b"\0.shstrtab\0"
    body_off = 64
    data_off = body_off
    str_off = data_off + len(payload)
    shoff = (str_off + len(shstrtab) + 7) // 8 * 8
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, 3, 2)
    out = bytearray(header) + payload + shstrtab
    out += b"\0" * (shoff - len(out))
    out += bytes(64)  # null section
    out += struct.pack("<IIQQQQ", 1, 1, 0, 0, data_off, len(payload)) + bytes(24)
    out += struct.pack("<IIQQQQ", 1 + len(name) + 1, 3, 0, 0, str_off, len(shstrtab)) + bytes(24)
    return bytes(out)


def _fatbin(entries: list[tuple[int, int, int]]) -> bytes:
    """A fatbin container: (kind, arch, payload size) entries with 0x50-byte headers, like nvcc's."""
    import struct

    body = b""
    for kind, arch, size in entries:
        head = bytearray(0x50)
        struct.pack_into("<HHIQ", head, 0, kind, 0x101, 0x50, size)
        struct.pack_into("<I", head, 0x1C, arch)
        body += bytes(head) + b"\xab" * size
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_fatbin_sass_and_ptx() -> None:
    from dswheels.kernel.binaries.fatbin import arch_number, gpu_code

    # what nvcc made of TORCH_CUDA_ARCH_LIST="7.5;8.0+PTX" for fused_adam (recorded shape)
    so = _elf_with_section(b".nv_fatbin", _fatbin([(2, 75, 40), (1, 80, 24), (2, 80, 40)]) + bytes(8))
    code = gpu_code(so)
    assert code is not None
    assert (code.sass, code.ptx) == ((75, 80), (80,))
    assert code.describe() == "SASS sm_75, sm_80; PTX compute_80"
    assert gpu_code(_elf_with_section(b".text", b"\x90" * 16)) is None  # a CPU-only extension
    assert [arch_number(t) for t in ["7.5", "8.0", "9.0a", "12.0+PTX"]] == [75, 80, 90, 120]


def test_runtime_dispatched_code_is_told_apart() -> None:
    # DeepSpeed 0.19.8's shm_comm: AVX-512 kernels behind __builtin_cpu_supports (libgcc's cpuid probe)
    dispatched = V4 + "  90:\tcpuid\n"
    report = scan_disassembly(dispatched, _forbidden("x86-64-v2"))
    assert report.violations == 3
    assert report.runtime_dispatch
    assert report.ok
    assert "selects at run time by CPU feature detection" in report.describe("x86-64-v2")
    plain = scan_disassembly(V4, _forbidden("x86-64-v2"))
    assert not plain.ok
    assert "no CPU feature detection" in plain.describe("x86-64-v2")
    assert scan_disassembly(V2, _forbidden("x86-64-v2")).describe("x86-64-v2") == "5 instructions, none above x86-64-v2"
