"""Building the C++/LibTorch stack (stacks/cpp_libtorch) with CMake.

It is built against the libtorch inside the installed torch wheel
(``torch.utils.cmake_prefix_path``), so the Python/PyTorch and the C++ stacks
run the same LibTorch.  The build lives in ``stacks/cpp_libtorch/build/``
(ignored by git); binaries are never committed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import project_root

EXECUTABLE = "deepgreen-libtorch"


def source_dir() -> Path:
    return project_root() / "stacks" / "cpp_libtorch"


def default_build_dir() -> Path:
    return source_dir() / "build"


def executable(build_dir: Path | None = None) -> Path:
    return Path(build_dir or default_build_dir()) / EXECUTABLE


def build(build_dir: Path | None = None, jobs: int = 2, quiet: bool = True) -> Path:
    """Configure (once) and build; returns the executable.  Incremental when up to date."""
    import torch.utils

    if shutil.which("cmake") is None:
        raise UserError("cmake is not installed; the C++/LibTorch stack needs cmake >= 3.18 and a C++17 "
                        "compiler", code="missing-tool")
    build_dir = Path(build_dir or default_build_dir())
    out = subprocess.DEVNULL if quiet else None
    steps = []
    if not (build_dir / "CMakeCache.txt").is_file():
        steps.append(["cmake", "-S", str(source_dir()), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                      f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"])
    steps.append(["cmake", "--build", str(build_dir), "-j", str(jobs)])
    for step in steps:
        result = subprocess.run(step, stdout=out, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise UserError(f"building the C++ stack failed ({' '.join(step[:2])}): "
                            f"{result.stderr.strip()[-2000:]}", path=build_dir, code="build-failed")
    return executable(build_dir)
