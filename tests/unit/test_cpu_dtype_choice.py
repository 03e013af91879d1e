"""The engine's and vLLM's CPU dtype follow one capability probe; the probe reads real flags."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator

import pytest
import torch

from agentic_loop.distill.release.serve import cpu_dtype
from agentic_loop.errors import ConfigError
from agentic_loop.models import cpu_caps
from agentic_loop.models.local import DTYPES, default_dtype, dtype_named

AVX512_BF16 = "processor : 0\nflags : fpu sse2 avx2 fma avx512f avx512_bf16 avx512_vnni\n"
AMX_BF16 = "processor : 0\nflags : fpu sse2 avx2 avx512f amx_tile amx_bf16 amx_int8\n"
AVX2_ONLY = "processor : 0\nflags : fpu sse2 avx2 fma f16c\n\nprocessor : 1\nflags : fpu avx2\n"
ARM_BF16 = "processor : 0\nFeatures : fp asimd sve bf16 i8mm\n"
ARM_PLAIN = "processor : 0\nFeatures : fp asimd evtstrm crc32\n"

CPUS = {"avx512_bf16": (AVX512_BF16, True), "amx_bf16": (AMX_BF16, True),
        "avx2 only": (AVX2_ONLY, False), "arm bf16": (ARM_BF16, True),
        "arm without bf16": (ARM_PLAIN, False)}


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """Make the probe read the given ``/proc/cpuinfo`` text (None: there is none)."""

    def use(text: str | None) -> None:
        monkeypatch.setattr(cpu_caps, "read_cpuinfo", lambda: text)
        cpu_caps.native_bf16.cache_clear()

    monkeypatch.delenv("AGENTIC_LOOP_DTYPE", raising=False)
    yield use
    cpu_caps.native_bf16.cache_clear()  # the real machine's answer again


@pytest.mark.parametrize("name", list(CPUS))
def test_the_probe_reads_the_bf16_flags(cpu: Callable[[str | None], None], name: str) -> None:
    text, native = CPUS[name]
    cpu(text)
    assert cpu_caps.native_bf16() is native


@pytest.mark.parametrize("torch_says", [True, False])
def test_without_cpuinfo_the_probe_asks_torch(cpu: Callable[[str | None], None],
                                              monkeypatch: pytest.MonkeyPatch,
                                              torch_says: bool) -> None:
    monkeypatch.setattr(cpu_caps, "_torch_native_bf16", lambda: torch_says)
    cpu(None)
    assert cpu_caps.native_bf16() is torch_says


def test_the_probe_is_asked_once(cpu: Callable[[str | None], None],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    reads = []
    monkeypatch.setattr(cpu_caps, "read_cpuinfo", lambda: reads.append(1) or AVX512_BF16)
    cpu_caps.native_bf16.cache_clear()
    assert [cpu_caps.native_bf16() for _ in range(3)] == [True] * 3 and len(reads) == 1


@pytest.mark.parametrize("name", list(CPUS))
def test_the_cpu_default_follows_the_probe(cpu: Callable[[str | None], None], name: str) -> None:
    """bf16 where the CPU has native bf16 (AVX-512 BF16, AMX-BF16, Arm BF16), fp32 where it
    would be emulated (AVX2 alone); GPUs get bf16 whatever the CPU."""
    text, native = CPUS[name]
    cpu(text)
    assert default_dtype("cpu") is (torch.bfloat16 if native else torch.float32)
    assert default_dtype("cuda") is torch.bfloat16


@pytest.mark.parametrize("name", list(CPUS))
@pytest.mark.parametrize("env", ["bfloat16", "float32", "float16"])
def test_the_environment_wins_both_ways(cpu: Callable[[str | None], None],
                                        monkeypatch: pytest.MonkeyPatch,
                                        name: str, env: str) -> None:
    cpu(CPUS[name][0])
    monkeypatch.setenv("AGENTIC_LOOP_DTYPE", env)
    assert default_dtype("cpu") is DTYPES[env] and default_dtype("cuda") is DTYPES[env]


@pytest.mark.parametrize("env", ["bf16", "int8", "float"])
def test_a_bad_dtype_in_the_environment_is_a_config_error(cpu: Callable[[str | None], None],
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          env: str) -> None:
    cpu(AVX512_BF16)
    monkeypatch.setenv("AGENTIC_LOOP_DTYPE", env)
    with pytest.raises(ConfigError) as caught:
        default_dtype("cpu")
    message = str(caught.value)
    assert "AGENTIC_LOOP_DTYPE" in message and repr(env) in message
    assert all(name in message for name in DTYPES)


def test_a_bad_dtype_argument_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="float32, bfloat16, float16"):
        dtype_named("Tensor")  # torch.Tensor is an attribute of torch, not a dtype


@pytest.mark.parametrize("name", list(CPUS))
def test_vllms_cpu_dtype_follows_the_same_probe(cpu: Callable[[str | None], None],
                                                name: str) -> None:
    text, native = CPUS[name]
    cpu(text)
    assert cpu_dtype() == ("bfloat16" if native else "float32")


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"),
                    reason="torch's own check covers x86 only")
def test_the_probe_agrees_with_torch_on_this_machine() -> None:
    """Two independent readings of the same CPU: our flags and torch's cpuid."""
    cpu_caps.native_bf16.cache_clear()
    assert cpu_caps.native_bf16() is cpu_caps._torch_native_bf16()


@pytest.mark.parametrize(("sysctl", "native"), [("1", True), ("0", False)])
def test_apple_silicon_is_asked_through_sysctl(cpu: Callable[[str | None], None],
                                               monkeypatch: pytest.MonkeyPatch, sysctl: str,
                                               native: bool) -> None:
    """macOS has no /proc/cpuinfo and torch's own probe knows only x86: M2+ has Arm BF16."""
    import subprocess

    ran: list[list[str]] = []

    def fake_run(args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=f"{sysctl}\n", stderr="")

    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    monkeypatch.setattr(subprocess, "run", fake_run)
    cpu(None)
    assert cpu_caps.native_bf16() is native
    assert ran == [["sysctl", "-n", "hw.optional.arm.FEAT_BF16"]]
