"""Facts to and from JSON: the ``facts`` part of ``dswheels doctor --json`` (docs/doctor.md).

The part reads back with :func:`facts_from_data`, so a user's output can be judged again
(``doctor --facts FILE``) and recordings of real machines serve as test data.
"""

from __future__ import annotations

from dswheels.doctor.machine_facts import (
    DeepSpeedFacts,
    Facts,
    Gpu,
    LinuxRuntime,
    PythonFacts,
    Toolkit,
    TorchFacts,
    VisualStudio,
)
from dswheels.kernel.untyped import Untyped

__all__ = ["FactsError", "facts_from_data", "facts_to_data"]


class FactsError(ValueError):
    """A facts document does not have the expected shape."""


# --- facts -> data ------------------------------------------------------------------------------


def _gpu(gpu: Gpu) -> dict[str, object]:
    return {"name": gpu.name, "capability": gpu.capability, "memory_mib": gpu.memory_mib}


def facts_to_data(facts: Facts) -> dict[str, object]:
    data = _facts_to_data(facts)
    lr = facts.linux_runtime
    if lr is not None:  # absent (not null) off Linux, as in facts recorded before it was probed
        data["linux_runtime"] = {
            "glibc": lr.glibc,
            "libstdcxx": lr.libstdcxx,
            "glibcxx": lr.glibcxx,
            "cxxabi": lr.cxxabi,
            "how": lr.how,
            "error": lr.error,
        }
    return data


def _facts_to_data(facts: Facts) -> dict[str, object]:
    py, torch, ds, vs = facts.python, facts.torch, facts.deepspeed, facts.visual_studio
    return {
        "os": facts.os,
        "machine": facts.machine,
        "python": None
        if py is None
        else {
            "executable": py.executable,
            "version": py.version,
            "implementation": py.implementation,
            "free_threaded": py.free_threaded,
            "bits": py.bits,
            "platform": py.platform,
            "prefix": py.prefix,
            "base_prefix": py.base_prefix,
            "conda": py.conda,
        },
        "python_error": facts.python_error,
        "torch": None
        if torch is None
        else {
            "version": torch.version,
            "cuda": torch.cuda,
            "hip": torch.hip,
            "cuda_available": torch.cuda_available,
            "devices": [_gpu(g) for g in torch.devices],
            "arch_list": list(torch.arch_list),
            "cuda_home": torch.cuda_home,
            "cuda_home_error": torch.cuda_home_error,
        },
        "torch_error": facts.torch_error,
        "deepspeed": None
        if ds is None
        else {
            "version": ds.version,
            "installed_ops": dict(ds.installed_ops),
            "accelerator": ds.accelerator,
            "torch_version": ds.torch_version,
            "cuda_version": ds.cuda_version,
            "error": ds.error,
        },
        "env": dict(sorted(facts.env.items())),
        "path_nvcc": facts.path_nvcc,
        "toolkits": [
            {
                "root": t.root,
                "aliases": list(t.aliases),
                "found_via": list(t.found_via),
                "nvcc_output": t.nvcc_output,
                "files": sorted(t.files),
            }
            for t in facts.toolkits
        ],
        "pip_cuda_headers": {k: list(v) for k, v in sorted(facts.pip_cuda_headers.items())},
        "nvidia_smi": facts.nvidia_smi,
        "nvidia_smi_error": facts.nvidia_smi_error,
        "visual_studio": None
        if vs is None
        else {
            "vswhere": vs.vswhere,
            "toolsets": {k: list(v) for k, v in vs.toolsets.items()},
            "defaults": dict(vs.defaults),
        },
        "long_paths": facts.long_paths,
        "ninja": facts.ninja,
        "gcc": facts.gcc,
    }


# --- data -> facts ------------------------------------------------------------------------------


class _D(Untyped):
    """A value of a facts document; absent (or null) parts read as empty."""

    mapping_word = "an object"
    __slots__ = ()

    def fail(self, expected: str) -> FactsError:
        return FactsError(f"{self.path}: expected {expected}")

    def present(self) -> bool:
        return self.data is not None

    def text(self, default: str = "") -> str:
        return default if self.data is None else super().text()

    def flag(self, default: bool = False) -> bool:
        return default if self.data is None else super().flag()

    def seq(self) -> list[_D]:
        return [] if self.data is None else super().seq()

    def items(self) -> list[tuple[str, _D]]:
        return [] if self.data is None else super().items()


def _gpu_from(d: _D) -> Gpu:
    return Gpu(
        name=d.at("name").text(), capability=d.at("capability").text(), memory_mib=d.at("memory_mib").opt_integer()
    )


def facts_from_data(data: object) -> Facts:
    """Inverse of :func:`facts_to_data`; missing optional parts read as absent."""
    root = _D(data, "facts")
    lr = root.at("linux_runtime")
    py = root.at("python")
    torch = root.at("torch")
    ds = root.at("deepspeed")
    vs = root.at("visual_studio")
    return Facts(
        os=root.at("os").text(),
        machine=root.at("machine").text(),
        python=PythonFacts(
            executable=py.at("executable").text(),
            version=py.at("version").text(),
            implementation=py.at("implementation").text("cpython"),
            free_threaded=py.at("free_threaded").flag(),
            bits=py.at("bits").opt_integer() or 64,
            platform=py.at("platform").text(),
            prefix=py.at("prefix").text(),
            base_prefix=py.at("base_prefix").text(),
            conda=py.at("conda").flag(),
        )
        if py.present()
        else None,
        python_error=root.at("python_error").text(),
        torch=TorchFacts(
            version=torch.at("version").text(),
            cuda=torch.at("cuda").opt_text(),
            hip=torch.at("hip").opt_text(),
            cuda_available=torch.at("cuda_available").flag(),
            devices=tuple(_gpu_from(g) for g in torch.at("devices").seq()),
            arch_list=torch.at("arch_list").strs(),
            cuda_home=torch.at("cuda_home").opt_text(),
            cuda_home_error=torch.at("cuda_home_error").text(),
        )
        if torch.present()
        else None,
        torch_error=root.at("torch_error").text(),
        deepspeed=DeepSpeedFacts(
            version=ds.at("version").text(),
            installed_ops={k: v.flag() for k, v in ds.at("installed_ops").items()},
            accelerator=ds.at("accelerator").text(),
            torch_version=ds.at("torch_version").text(),
            cuda_version=ds.at("cuda_version").text(),
            error=ds.at("error").text(),
        )
        if ds.present()
        else None,
        env={k: v.text() for k, v in root.at("env").items()},
        path_nvcc=root.at("path_nvcc").text(),
        toolkits=tuple(
            Toolkit(
                root=t.at("root").text(),
                aliases=t.at("aliases").strs(),
                found_via=t.at("found_via").strs(),
                nvcc_output=t.at("nvcc_output").text(),
                files=frozenset(t.at("files").strs()),
            )
            for t in root.at("toolkits").seq()
        ),
        pip_cuda_headers={k: v.strs() for k, v in root.at("pip_cuda_headers").items()},
        nvidia_smi=root.at("nvidia_smi").opt_text(),
        nvidia_smi_error=root.at("nvidia_smi_error").text(),
        visual_studio=VisualStudio(
            vswhere=vs.at("vswhere").opt_text(),
            toolsets={k: v.strs() for k, v in vs.at("toolsets").items()},
            defaults={k: v.text() for k, v in vs.at("defaults").items()},
        )
        if vs.present()
        else None,
        long_paths=root.at("long_paths").opt_flag(),
        ninja=root.at("ninja").opt_text(),
        gcc=root.at("gcc").opt_text(),
        linux_runtime=LinuxRuntime(
            glibc=lr.at("glibc").text(),
            libstdcxx=lr.at("libstdcxx").text(),
            glibcxx=lr.at("glibcxx").text(),
            cxxabi=lr.at("cxxabi").text(),
            how=lr.at("how").text(),
            error=lr.at("error").text(),
        )
        if lr.present()
        else None,
    )
