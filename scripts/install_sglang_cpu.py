"""Build SGLang's CPU path into the virtualenv whose python runs this script (``make sglang``).

    .venv-sglang/bin/python scripts/install_sglang_cpu.py --sources ../shared/sglang-cpu [--jobs 1]
    SGLANG_SRC=CHECKOUT .venv-sglang/bin/python scripts/install_sglang_cpu.py

PyPI has no CPU build of SGLang's kernel (its sgl-kernel / sglang-kernel wheels are CUDA builds,
no sdist), so both halves are built from upstream commit 2f14d6c: from the tarballs in
``--sources`` (``sgl-kernel-2f14d6c.tar.xz``, ``sglang-python-2f14d6c.tar.xz``), or from the
checkout ``SGLANG_SRC`` names (its ``sgl-kernel/`` and ``python/``; copied, never modified).

1. The sources go to ``--build-dir`` (fresh) and get ``scripts/sglang-cpu.patch`` (four one-line
   changes to the CPU path: ``python/sglang/srt/layers/attention/intel_amx_backend.py``,
   ``python/sglang/srt/speculative/eagle_utils.py``,
   ``python/sglang/jit_kernel/csrc/ngram_corpus/result.h`` and the start-up fallback in
   ``python/sglang/srt/arg_groups/overrides.py`` that asked for AMX; the patch says why).
2. ``scripts/sglang-cpu-requirements.txt``: every runtime and build requirement, pinned, with
   ``torch==2.13.0`` (the CPU build, as the rest of the project; upstream's pyproject_cpu.toml
   asks for 2.12.0) and without torchvision, torchaudio and timm (media only; PyPI's builds are
   for a CUDA torch).
3. The kernel (``sglang-kernel-cpu`` 0.4.5, ``sgl-kernel/pyproject_cpu.toml``), built with
   ``--jobs`` compile jobs (libnuma-dev needed), then the Python package
   (``python/pyproject_cpu.toml``) with ``--no-deps``.
4. ``scripts/sglang_torchvision_stub.py`` as ``torchvision`` (SGLang imports it unconditionally).

Any failing step ends the script with one line naming it and a non-zero status.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
PATCH = SCRIPTS / "sglang-cpu.patch"
REQUIREMENTS = SCRIPTS / "sglang-cpu-requirements.txt"
TORCHVISION_STUB = SCRIPTS / "sglang_torchvision_stub.py"
COMMIT = "2f14d6c"
TARBALLS = {"sgl-kernel": f"sgl-kernel-{COMMIT}.tar.xz", "python": f"sglang-python-{COMMIT}.tar.xz"}
# The patched line, looked for after patching (python/sglang/srt/layers/attention/intel_amx_backend.py).
FAULTY_LINE = "        seq_lens = forward_batch.seq_lens\n"


class BuildError(RuntimeError):
    """A build step failed; the message is the one line printed."""


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> None:
    """Run one step; BuildError if it fails."""
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}).returncode != 0:
        raise BuildError(f"failed: {' '.join(cmd)}")


def pip(*args: str, cwd: Path | None = None, env: dict | None = None) -> None:
    run([sys.executable, "-m", "pip", *args], cwd=cwd, env=env)


def unpack(sources: Path | None, checkout: Path | None, build: Path) -> None:
    """Fresh ``build/sgl-kernel`` and ``build/python`` from the checkout or the tarballs."""
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    for part, tarball in TARBALLS.items():
        if checkout is not None:
            if not (checkout / part).is_dir():
                raise BuildError(f"SGLANG_SRC={checkout}: no {part}/ (a checkout of sgl-project/sglang {COMMIT})")
            shutil.copytree(checkout / part, build / part, ignore=shutil.ignore_patterns(".git"))
            continue
        path = sources / tarball
        if not path.is_file():
            raise BuildError(f"{path} is missing (set SGLANG_CPU_SOURCES or SGLANG_SRC)")
        with tarfile.open(path) as archive:
            archive.extractall(build, filter="data")
        if not (build / part).is_dir():
            raise BuildError(f"{path} holds no {part}/")


def apply_patch(build: Path) -> None:
    """Apply PATCH with git (outside any repository: GIT_CEILING_DIRECTORIES stops the search)."""
    run(["git", "apply", "--verbose", str(PATCH)], cwd=build,
        env={"GIT_CEILING_DIRECTORIES": str(build.parent)})
    backend = build / "python/sglang/srt/layers/attention/intel_amx_backend.py"
    text = backend.read_text()
    if "_, max_extend_len = self.forward_metadata\n" + FAULTY_LINE in text:
        raise BuildError(f"{backend}: the patched line is still there")


def build_kernel(build: Path, jobs: int) -> None:
    source = build / "sgl-kernel"
    shutil.copyfile(source / "pyproject_cpu.toml", source / "pyproject.toml")
    pip("install", "--no-build-isolation", "-C", f"build.tool-args=-j{jobs}", ".",
        cwd=source, env={"MAX_JOBS": str(jobs), "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)})


def build_python(build: Path) -> None:
    source = build / "python"
    shutil.copyfile(source / "pyproject_cpu.toml", source / "pyproject.toml")
    # No .git in the copy: setuptools-scm would fall back to 0.0.0.dev0; say which commit it is.
    pip("install", "-q", "--no-deps", "--no-build-isolation", ".", cwd=source,
        env={"SETUPTOOLS_SCM_PRETEND_VERSION": f"0.0.0.dev0+g{COMMIT}"})


def install_torchvision_stub() -> None:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "torchvision"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = Path(sysconfig.get_paths()["purelib"]) / "torchvision"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    shutil.copyfile(TORCHVISION_STUB, target / "__init__.py")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, default=Path("../shared/sglang-cpu"),
                        help="directory with the two tarballs (default ../shared/sglang-cpu)")
    parser.add_argument("--build-dir", type=Path, default=Path(".cache/sglang-build"))
    parser.add_argument("--jobs", type=int, default=1, help="compile jobs for the kernel")
    args = parser.parse_args()
    checkout = Path(os.environ["SGLANG_SRC"]) if os.environ.get("SGLANG_SRC") else None
    build = args.build_dir.resolve()
    try:
        unpack(args.sources, checkout, build)
        apply_patch(build)
        pip("install", "-q", "-r", str(REQUIREMENTS))
        build_kernel(build, args.jobs)
        build_python(build)
        install_torchvision_stub()
        run([sys.executable, "-c", "import sgl_kernel, sglang.srt.server_args; print('sglang CPU build ready')"])
    except BuildError as exc:
        print(f"install_sglang_cpu: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
