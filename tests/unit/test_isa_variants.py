"""The CPU ops built once per ISA level: the levels, the build helper, the wheel's dispatch, and their checks."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dswheels.building.output_reading import OpSources
from dswheels.building.patches import (
    PatchError,
    patch_env_report_variants,
    patch_isa_levels,
    patch_portable_cpu,
    patch_setup_variants,
)
from dswheels.kernel.compat import load_compat
from dswheels.kernel.isa_variants import (
    VariantTable,
    capability_from_flags,
    chosen_suffix,
    extension_levels,
    is_shim,
    parse_variant_table,
    variant_levels,
    variant_problems,
)
from dswheels.kernel.manifest import BuiltOp, BuiltVariant, FileInfo, Manifest, parse_manifest, render_manifest
from dswheels.kernel.opload_result import parse_load
from dswheels.probes import isa_dispatch, isa_variants
from dswheels.verify.loaded_checks import ds_report_variant_verdicts, variant_load_verdicts
from dswheels.verify.static_checks import isa_variant_verdicts
from tests.support.planned import planned_cell

ADAM = "deepspeed.ops.adam.cpu_adam_op"
LION = (("cpu_lion", ("-fno-schedule-insns2",)),)  # compat.yml gcc_variant_flags: cpu_lion's alone
LEVELS = (("default", "x86-64-v2"), ("avx2", "x86-64-v3"), ("avx512", "x86-64-v4"))
TABLE = VariantTable(levels=LEVELS, ops={"cpu_adam": ADAM})
SUFFIX = ".cpython-311-x86_64-linux-gnu.so"
NAMES = [
    "deepspeed/dswheels_isa.py",
    "deepspeed/ops/adam/cpu_adam_op.py",
    *(f"deepspeed/ops/adam/cpu_adam_op_{s}{SUFFIX}" for s, _ in LEVELS),
]


# --- which levels a cell builds ------------------------------------------------------------------


def test_the_levels_follow_compat_from_the_baseline_up() -> None:
    baselines = load_compat().cpu_baselines
    gcc = variant_levels(baselines, "x86-64-v2", compiler="gcc")
    assert [(v.suffix, v.level, v.arch_flag, v.simd_flag, v.extra_flags) for v in gcc] == [
        ("default", "x86-64-v2", "-march=x86-64-v2", "-D__SCALAR__", ()),  # as a build without variants
        ("avx2", "x86-64-v3", "-march=x86-64-v3", "-D__AVX256__", LION),
        ("avx512", "x86-64-v4", "-march=x86-64-v4", "-D__AVX512__", LION),
    ]
    msvc = variant_levels(baselines, "x86-64-v2", compiler="msvc")
    assert [(v.arch_flag, v.extra_flags) for v in msvc] == [("", ()), ("/arch:AVX2", ()), ("/arch:AVX512", ())]
    # a higher baseline compiles its own level exactly as a build without variants would
    assert variant_levels(baselines, "x86-64-v3", compiler="gcc")[0].extra_flags == ()
    assert [v.suffix for v in variant_levels(baselines, "x86-64-v3", compiler="gcc")] == ["avx2", "avx512"]
    assert variant_levels(baselines, "x86-64-v4", compiler="gcc") == ()  # the top level: built once


def test_every_level_flag_is_one_the_compilers_take() -> None:
    from dswheels.kernel.compiler_flags.gcc import judge_gcc
    from dswheels.kernel.compiler_flags.msvc import judge_cl

    for level in variant_levels(load_compat().cpu_baselines, "x86-64-v2", compiler="gcc"):
        further = [flag for _, flags in level.extra_flags for flag in flags]
        assert judge_gcc([level.arch_flag, level.simd_flag, *further]) == (), level
    for level in variant_levels(load_compat().cpu_baselines, "x86-64-v2", compiler="msvc"):
        flags = [f for f in (level.arch_flag, level.simd_flag) if f]
        assert not [i for i in judge_cl(flags) if i.fatal or i.code == "D9002"], level


# --- what a wheel says --------------------------------------------------------------------------


def test_the_table_reads_back_from_the_shipped_module() -> None:
    text = patch_isa_levels(Path(isa_dispatch.__file__).read_text(), LEVELS)
    text = isa_variants.fill_constant(text, "OPS", {"cpu_adam": ADAM})
    table = parse_variant_table(text)
    assert table == TABLE
    assert table.modules("cpu_adam") == tuple(f"{ADAM}_{s}" for s, _ in LEVELS)
    assert table.level_of(f"{ADAM}_avx2") == ("cpu_adam", "avx2", "x86-64-v3")
    assert table.level_of(ADAM) is None
    assert extension_levels(table, NAMES) == {f"deepspeed/ops/adam/cpu_adam_op_{s}{SUFFIX}": lv for s, lv in LEVELS}


@pytest.mark.parametrize(
    "text",
    [
        "OPS = {}\n",  # no LEVELS
        "LEVELS = ()\nOPS = {}\n",  # no level at all
        "LEVELS = (('default',),)\nOPS = {}\n",
        "LEVELS = (('a', 1),)\nOPS = {}\n",
        "LEVELS = (('a', 'b'),)\nOPS = []\n",
        "LEVELS = f()\nOPS = {}\n",
        "LEVELS = (\n",
        "LEVELS = " + "(" * 300 + ")" * 300 + "\nOPS = {}\n",
    ],
)
def test_a_malformed_table_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"dswheels_isa\.py"):
        parse_variant_table(text)


def test_what_is_missing_is_named() -> None:
    exts: dict[str, str | None] = {m: f"{m.replace('.', '/')}{SUFFIX}" for m in TABLE.modules("cpu_adam")}
    assert variant_problems(TABLE, NAMES, exts) == []
    exts[f"{ADAM}_avx2"] = None
    problems = variant_problems(TABLE, NAMES[2:], exts)
    assert problems == [
        f"cpu_adam: no deepspeed/ops/adam/cpu_adam_op.py: DeepSpeed imports {ADAM} and finds no dispatch to a variant",
        f"cpu_adam: no extension for {ADAM}_avx2: a CPU that picks it cannot load cpu_adam",
        "no deepspeed/dswheels_isa.py: the ops' modules cannot pick a variant",
    ]


def test_torch_rule_from_cpu_flags() -> None:
    v4 = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    assert capability_from_flags(v4) == "AVX512"
    assert capability_from_flags(v4 - {"avx512dq"}) == "AVX2"  # torch wants VL, BW and DQ
    assert capability_from_flags({"avx2"}) == "DEFAULT"  # and FMA with AVX2
    assert capability_from_flags(v4, "avx2") == "AVX2"
    assert capability_from_flags(v4, "AVX2") == "AVX512"  # torch compares the lower-case values only
    assert capability_from_flags({"sse4_2"}, "avx512") == "AVX512"  # torch's override, not ours to second-guess
    assert [chosen_suffix(TABLE, c) for c in ("DEFAULT", "AVX2", "AVX512", "AVX512_256", "ZVECTOR")] == [
        "default",
        "avx2",
        "avx512",
        "avx512",
        "default",
    ]
    assert chosen_suffix(VariantTable(levels=LEVELS[1:], ops={}), "DEFAULT") is None


# --- the dispatch the wheel ships ------------------------------------------------------------------


def _shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capability: str) -> types.ModuleType:
    """The dispatch module as a wheel ships it, with a fake torch answering ``capability`` and fake variants."""
    text = patch_isa_levels(Path(isa_dispatch.__file__).read_text(), LEVELS)
    path = tmp_path / "dswheels_isa.py"
    path.write_text(isa_variants.fill_constant(text, "OPS", {"cpu_adam": "fake_op"}))
    torch = types.ModuleType("torch")
    torch.backends = types.SimpleNamespace(cpu=types.SimpleNamespace(get_cpu_capability=lambda: capability))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    for suffix, _level in LEVELS:
        variant = types.ModuleType(f"fake_op_{suffix}")
        variant.adam_update = f"{suffix}'s adam_update"  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, f"fake_op_{suffix}", variant)
    spec = importlib.util.spec_from_file_location("dswheels_isa", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("capability", "want"), [("AVX512", "avx512"), ("AVX2", "avx2"), ("DEFAULT", "default")])
def test_the_op_module_becomes_the_variant_torch_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capability: str, want: str
) -> None:
    shipped = _shipped(tmp_path, monkeypatch, capability)
    namespace: dict[str, object] = {"__name__": "fake_op"}
    shipped.load_into(namespace)
    assert namespace["adam_update"] == f"{want}'s adam_update"
    assert namespace["__dswheels_variant__"] == want
    assert namespace["__dswheels_variants__"] == ("default", "avx2", "avx512")
    assert shipped.describe().startswith(f"{want} (")
    assert f"torch CPU capability {capability}; ops: cpu_adam" in shipped.describe()


def test_a_cpu_below_every_variant_is_told_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = _shipped(tmp_path, monkeypatch, "DEFAULT")
    shipped.LEVELS = LEVELS[1:]  # type: ignore[attr-defined]
    with pytest.raises(ImportError, match=r"need at least x86-64-v3 .* torch says this CPU is DEFAULT"):
        shipped.load_into({"__name__": "fake_op"})


# --- the build's helper, in a tree of its own ---------------------------------------------------------


@dataclass
class _Extension:
    name: str
    extra_compile_args: dict[str, list[str]] = field(default_factory=dict)
    extra_link_args: list[str] = field(default_factory=list)
    define_macros: list[str] = field(default_factory=list)


class _Builder:
    """A DeepSpeed builder with the patched cpu_arch()/simd_width(); ``asks``: whether its flags use them."""

    def __init__(self, name: str, *, asks: bool) -> None:
        self.name, self.asks = name, asks

    def absolute_name(self) -> str:
        return f"deepspeed.ops.adam.{self.name}_op"

    def cpu_arch(self) -> str:
        return str(getattr(self, "dswheels_cpu_arch", "-march=x86-64-v2"))

    def simd_width(self) -> str:
        return str(getattr(self, "dswheels_simd_width", "-D__SCALAR__"))

    def builder(self) -> _Extension:
        flags = ["-O3", self.cpu_arch(), self.simd_width()] if self.asks else ["-O2", "-fopenmp"]
        return _Extension(self.absolute_name(), {"cxx": flags})


def test_add_variants_replaces_each_asking_op_by_its_levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [level.helper_row() for level in variant_levels(load_compat().cpu_baselines, "x86-64-v2", compiler="gcc")]
    monkeypatch.setattr(isa_variants, "LEVELS", tuple(rows))
    (tmp_path / "deepspeed" / "ops" / "adam").mkdir(parents=True)
    dispatch = tmp_path / "deepspeed" / "dswheels_isa.py"
    dispatch.write_text(patch_isa_levels(Path(isa_dispatch.__file__).read_text(), [r[:2] for r in rows]))
    adam, shm, off = _Builder("cpu_adam", asks=True), _Builder("shm", asks=False), _Builder("cpu_lion", asks=True)
    exts = [adam.builder(), shm.builder(), off.builder()]
    out = isa_variants.add_variants(
        exts, {"cpu_adam": adam, "shm": shm, "cpu_lion": off}, {"cpu_adam": 1, "shm": 1}, root=str(tmp_path)
    )
    assert [e.name for e in out] == [
        f"{ADAM}_default",
        f"{ADAM}_avx2",
        f"{ADAM}_avx512",
        "deepspeed.ops.adam.shm_op",  # its flags are the same at every level: built once
        "deepspeed.ops.adam.cpu_lion_op",  # not installed: left as it was
    ]
    assert [e.extra_compile_args["cxx"][1:] for e in out[:3]] == [  # cpu_adam: no further flag (cpu_lion's)
        ["-march=x86-64-v2", "-D__SCALAR__"],
        ["-march=x86-64-v3", "-D__AVX256__"],
        ["-march=x86-64-v4", "-D__AVX512__"],
    ]
    assert not hasattr(adam, "dswheels_cpu_arch")  # the builder is left as it was found
    assert is_shim((tmp_path / "deepspeed/ops/adam/cpu_adam_op.py").read_text())
    assert parse_variant_table(dispatch.read_text()) == TABLE
    assert isa_variants.variant_levels(shm) == ()


# --- the patches -----------------------------------------------------------------------------------


def test_the_patched_builder_answers_the_baseline_unless_given_a_level() -> None:
    src = (
        "class OpBuilder:\n    def cpu_arch(self):\n        return '-march=native'\n"
        "    def simd_width(self):\n        return '-D__AVX512__'\n"
    )
    namespace: dict[str, object] = {}
    exec(patch_portable_cpu(src, arch_flag="-march=x86-64-v2", simd_flag="-D__SCALAR__"), namespace)  # noqa: S102
    builder = namespace["OpBuilder"]()  # type: ignore[operator]
    assert (builder.cpu_arch(), builder.simd_width()) == ("-march=x86-64-v2", "-D__SCALAR__")
    builder.dswheels_cpu_arch, builder.dswheels_simd_width = "-march=x86-64-v3", "-D__AVX256__"
    assert (builder.cpu_arch(), builder.simd_width()) == ("-march=x86-64-v3", "-D__AVX256__")


def test_setup_and_env_report_patches_need_their_lines() -> None:
    setup = (
        "ext_modules = []\nfor op_name, builder in ALL_OPS.items():\n    pass\nprint(f'Install Ops={install_ops}')\n"
    )
    out = patch_setup_variants(setup)
    assert out.index("add_variants(ext_modules, ALL_OPS, install_ops)") < out.index("print(f'Install Ops=")
    compile(out, "setup.py", "exec")
    with pytest.raises(PatchError, match="found 0"):
        patch_setup_variants("print('Install Ops')\n")
    report = '    report.append(("shared memory (/dev/shm) size", get_shm_size()))\n'
    patched = patch_env_report_variants("def debug_report():\n    report = []\n" + report)
    compile(patched, "env_report.py", "exec")
    with pytest.raises(PatchError, match="found 2"):
        patch_env_report_variants(report * 2)
    with pytest.raises(PatchError, match="LEVELS"):
        patch_isa_levels("nothing\n", LEVELS)


# --- verify's checks ---------------------------------------------------------------------------------


def test_isa_variant_checks() -> None:
    shim = isa_variants.shim_text("cpu_adam", ["default", "avx2", "avx512"])
    names = [*NAMES, *(f"deepspeed/ops/adam/cpu_adam_op_{s}{SUFFIX}" for s, _ in LEVELS)]
    (good,) = isa_variant_verdicts(TABLE, names, {"deepspeed/ops/adam/cpu_adam_op.py": shim})
    assert good.ok, good.detail
    assert "default (x86-64-v2), avx2 (x86-64-v3), avx512 (x86-64-v4)" in good.detail
    (bad,) = isa_variant_verdicts(TABLE, names, {"deepspeed/ops/adam/cpu_adam_op.py": "print('hi')\n"})
    assert not bad.ok
    assert "does not load a variant" in bad.detail
    assert isa_variant_verdicts(VariantTable(), names, {}) == []


def test_the_loaded_variant_must_be_the_one_torch_picks() -> None:
    def loads(variant: str, capability: str) -> list[tuple[str, bool]]:
        report = parse_load(
            {
                "cpu_capability": capability,
                "ops": {"cpu_adam": {"module": ADAM, "loaded": ADAM, "prebuilt": True, "variant": variant}},
            }
        )
        return [(v.subject, v.ok) for v in variant_load_verdicts(TABLE, report)]

    assert loads("avx2", "AVX2") == [("cpu_adam", True)]
    assert loads("avx512", "AVX2") == [("cpu_adam", False)]  # above torch's answer
    assert loads("", "AVX2") == [("cpu_adam", False)]  # a module that picked nothing
    line = "default (x86-64-v2) of default, avx2, avx512; torch CPU capability DEFAULT; ops: cpu_adam"
    assert [v.ok for v in ds_report_variant_verdicts(TABLE, line, "DEFAULT")] == [True]
    assert [v.ok for v in ds_report_variant_verdicts(TABLE, line, "AVX2")] == [False]
    assert [v.ok for v in ds_report_variant_verdicts(TABLE, None, "AVX2")] == [False]


# --- the manifest and the build's view of an op ------------------------------------------------------


def test_op_sources_of_an_op_per_level() -> None:
    op = OpSources("cpu_adam", "DS_BUILD_CPU_ADAM", ADAM, ("a.cpp",), variants=LEVELS)
    assert op.extension_modules == tuple(f"{ADAM}_{s}" for s, _ in LEVELS)
    assert op.label(f"{ADAM}_avx2") == "cpu_adam (avx2)"
    done = {f"{ADAM}_default": 1.0, f"{ADAM}_avx2": 2.0}
    assert op.seconds(done) is None  # not every level linked yet
    assert op.seconds({**done, f"{ADAM}_avx512": 3.0}) == 6.0
    once = OpSources("shm", "DS_BUILD_SHM_COMM", "m.shm_op", ("s.cpp",))
    assert (once.extension_modules, once.label("m.shm_op"), once.seconds({"m.shm_op": 4.0})) == (
        ("m.shm_op",),
        "shm",
        4.0,
    )


def test_the_manifest_keeps_the_variants() -> None:
    variants = tuple(
        BuiltVariant(suffix=s, level=lv, module=f"{ADAM}_{s}", extension=f"x/{s}.so", size=10 * n, seconds=None)
        for n, (s, lv) in enumerate(LEVELS, 1)
    )
    op = BuiltOp(
        name="cpu_adam",
        env="DS_BUILD_CPU_ADAM",
        extension="x/default.so",
        module=ADAM,
        size=60,
        seconds=None,
        variants=variants,
    )
    manifest = Manifest(
        cell_id="ds0.19.8-torch2.13-cpu-cp311-linux_x86_64",
        plan=planned_cell("ds0.19.8-torch2.13-cpu-cp311-linux_x86_64"),
        wheel=FileInfo(filename="w.whl", size=1, sha256="0" * 64),
        accelerator="cpu",
        torch_version="2.13.0+cpu",
        torch_cuda=None,
        python_version="3.11.7",
        toolchain={},
        cpu_baseline="x86-64-v2",
        arch_list="",
        env={},
        ops_built=(op, dataclasses.replace(op, name="shm", module="m.shm_op", variants=())),
        ops_left_out={},
        durations={},
        source={},
        source_changes=(),
        created="2026-11-23T00:00:00Z",
        dswheels="0.1.0",
    )
    back = parse_manifest(render_manifest(manifest))
    assert back.ops_built == manifest.ops_built
    old = json.loads(render_manifest(manifest))
    del old["ops"]["built"][0]["variants"]  # a manifest written before the ISA variants
    assert parse_manifest(json.dumps(old)).ops_built[0].variants == ()


def test_the_manifest_assembly_records_each_level_and_the_ops_built_once(tmp_path: Path) -> None:
    from dswheels.building.effects import manifest_assembly

    adam = OpSources("cpu_adam", "DS_BUILD_CPU_ADAM", ADAM, ("a.cpp",), variants=LEVELS)
    shm = OpSources("shm", "DS_BUILD_SHM_COMM", "deepspeed.ops.comm.shm_op", ("s.cpp",))
    names = [*NAMES, f"deepspeed/ops/comm/shm_op{SUFFIX}"]
    sizes = {n: 100 * i for i, n in enumerate(names)}
    seconds = {f"{ADAM}_{s}": 10.0 for s, _ in LEVELS} | {"deepspeed.ops.comm.shm_op": 3.0}
    built = manifest_assembly._built_ops([adam, shm], src=tmp_path, names=names, sizes=sizes, op_seconds=seconds)
    assert [(v.suffix, v.extension, v.size) for v in built[0].variants] == [
        (s, n, sizes[n]) for (s, _), n in zip(LEVELS, NAMES[2:], strict=True)
    ]
    assert (built[0].module, built[0].extension, built[0].size, built[0].seconds) == (ADAM, NAMES[2], 900, 30.0)
    assert (built[1].variants, built[1].extension, built[1].seconds) == ((), names[-1], 3.0)


def test_a_further_flag_reaches_only_the_op_it_is_measured_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-fno-schedule-insns2 made cpu_lion's variants as fast as the native build and cpu_adam's slower."""
    levels = variant_levels(load_compat().cpu_baselines, "x86-64-v2", compiler="gcc")
    assert [(v.flags_of("cpu_lion"), v.flags_of("cpu_adam")) for v in levels] == [
        ((), ()),
        (("-fno-schedule-insns2",), ()),
        (("-fno-schedule-insns2",), ()),
    ]
    monkeypatch.setattr(isa_variants, "LEVELS", tuple(level.helper_row() for level in levels))
    (tmp_path / "deepspeed" / "ops" / "adam").mkdir(parents=True)
    dispatch = tmp_path / "deepspeed" / "dswheels_isa.py"
    dispatch.write_text(
        patch_isa_levels(Path(isa_dispatch.__file__).read_text(), [(v.suffix, v.level) for v in levels])
    )
    adam, lion = _Builder("cpu_adam", asks=True), _Builder("cpu_lion", asks=True)
    out = isa_variants.add_variants(
        [adam.builder(), lion.builder()],
        {"cpu_adam": adam, "cpu_lion": lion},
        {"cpu_adam": 1, "cpu_lion": 1},
        str(tmp_path),
    )
    flagged = {e.name: "-fno-schedule-insns2" in e.extra_compile_args["cxx"] for e in out}
    assert flagged == {
        f"{ADAM}_default": False,
        f"{ADAM}_avx2": False,
        f"{ADAM}_avx512": False,
        "deepspeed.ops.adam.cpu_lion_op_default": False,
        "deepspeed.ops.adam.cpu_lion_op_avx2": True,
        "deepspeed.ops.adam.cpu_lion_op_avx512": True,
    }
