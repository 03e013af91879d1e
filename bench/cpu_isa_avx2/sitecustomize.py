"""Imported by every Python process started with bench/cpu_isa.py's ``avx2_env``: torch's
CPU probe stops reporting AVX-512, AVX10 and AMX, so vLLM loads its AVX2 kernels
(``_C_AVX2``).

Only what ``torch.cpu.get_capabilities()`` returns changes. torch is patched when
``torch.cpu`` loads (a finder that wraps its loader, then leaves ``sys.meta_path``), or at
once if something imported it before this file ran.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

HIDDEN = ("avx512", "avx10", "amx")


def _hide_wide_vectors(module: Any) -> None:
    real = getattr(module, "get_capabilities", None)
    if real is None or getattr(real, "hides_wide_vectors", False):
        return

    @functools.cache
    def get_capabilities() -> types.MappingProxyType[str, Any]:
        return types.MappingProxyType(
            {k: False if k.startswith(HIDDEN) else v for k, v in real().items()})

    get_capabilities.hides_wide_vectors = True  # type: ignore[attr-defined]
    module.get_capabilities = get_capabilities


class _PatchTorchCpu(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps ``torch.cpu``'s loader so the patch follows its import."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch.cpu":
            return None
        sys.meta_path.remove(self)  # once is enough
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _hide_wide_vectors(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if "torch.cpu" in sys.modules:
    _hide_wide_vectors(sys.modules["torch.cpu"])
else:
    sys.meta_path.insert(0, _PatchTorchCpu())
