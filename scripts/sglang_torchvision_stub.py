"""A stand-in ``torchvision`` for a text-only SGLang on a CPU torch (installed by
scripts/install_sglang_cpu.py as ``site-packages/torchvision/__init__.py``, with no dist-info).

SGLang imports torchvision unconditionally (``python/sglang/srt/utils/common.py``: ``from
torchvision.io import decode_jpeg``; ``python/sglang/srt/configs/deepseek_ocr.py``: ``from
torchvision.transforms import InterpolationMode``), but PyPI's torchvision is built for a CUDA
torch and fails to import beside the CPU one ("operator torchvision::nms does not exist"); the
PyTorch CPU index is not reachable from every build machine. A text model never calls it. This
module lets those imports succeed; anything actually used raises one clear error. With no
dist-info, ``importlib.metadata`` finds no torchvision, so transformers' ``is_torchvision_available``
stays False and no image code path is chosen.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

MESSAGE = ("torchvision is a stub in this SGLang CPU build (scripts/sglang_torchvision_stub.py): "
           "image and video inputs are not supported")


class _Missing:
    """Any torchvision name: attribute access gives another one, calling it raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> "_Missing":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: {MESSAGE}")

    def __mro_entries__(self, bases):
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> _Missing:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds every ``torchvision.*`` submodule as a stub package."""

    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        return None


__version__ = "0.0.0+stub"
__path__ = []   # a package: submodules come from _Finder
sys.meta_path.insert(0, _Finder())


def __getattr__(attr: str) -> _Missing:
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Missing(f"torchvision.{attr}")
