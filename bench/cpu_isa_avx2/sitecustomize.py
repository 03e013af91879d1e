"""Imported by every Python process started with bench/cpu_isa.py's ``avx2_env``: torch's
CPU probe stops reporting AVX-512 and AMX, so vLLM loads its AVX2 kernels (``_C_AVX2``).

Only what ``torch.cpu.get_capabilities()`` returns changes; torch is imported when it is
first needed, by a finder that patches ``torch.cpu`` once it has loaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any


def _hide_avx512(module: Any) -> None:
    real = module.get_capabilities

    def get_capabilities() -> dict[str, Any]:
        return {k: False if k.startswith(("avx512", "amx")) else v for k, v in real().items()}

    module.get_capabilities = get_capabilities


class _PatchTorchCpu(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps ``torch.cpu``'s loader so the patch follows its import."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch.cpu":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _hide_avx512(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _PatchTorchCpu())
