"""The stacks that are built before they run: C++/LibTorch, Rust/tch and Java/DL4J.

One registry (`NATIVE_STACKS`) says for each where its sources are, which tools
its build needs, what the build produces and how it is built; `deepgreen build`,
the set-up, `deepgreen preflight`, `deepgreen parity`, the tests and the
benchmarks all ask it.  R/torch has no entry: it cannot be built on any machine
this project can use, and `UNAVAILABLE` says exactly why.

The LibTorch control group shares one LibTorch: the C++ stack compiles and links
against the torch wheel's include/ and lib/ (CMake, without `find_package(Torch)`,
which demands a CUDA toolkit for the wheel's CUDA build), and the Rust stack
links the same folder through torch-sys (`LIBTORCH_USE_PYTORCH=1`).  The pinned
versions come from the specification (S4_backend.pinned_versions): the DL4J
version is passed to Maven, and tch's pin in Cargo.toml must equal the spec's.
Builds are incremental (CMake, cargo and Maven decide what is stale); products
live in each stack's build folder, ignored by git.

A build targets a device (`--backend`, default: the host's, `host_device`).  Only
DL4J's build differs by device: its ND4J backend is a Maven artifact of its own
(S4_backend.dl4j_backend), nd4j-native on the CPU, nd4j-cuda on the GPU; the
LibTorch stacks link the torch wheel, which holds both.  The Java build writes the
backend it built next to its jar (`BACKEND_RECORD`), and starts afresh when it
changes, so that no jar of the other backend stays in target/lib.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.errors import UserError, unknown_name
from deepgreen_audit.pins import pinned
from deepgreen_audit.resources import require_checkout
from deepgreen_audit.spec import DEVICES, dl4j_backend

#: The variable that tells `host_device` what the host has, where NVML cannot (or should not) be asked.
ACCELERATOR_VARIABLE = "DEEPGREEN_ACCELERATOR"
#: What `deepgreen build --backend` accepts: a device, or "auto" (the host's).
BACKEND_CHOICES = ("auto", *DEVICES)
#: The file, next to the Java stack's jar, that names the ND4J backend the build put in target/lib.
BACKEND_RECORD = "nd4j-backend"


@dataclass(frozen=True)
class NativeStack:
    ecosystem: str
    source: str                     # its folder, relative to the project
    tools: tuple[str, ...]          # what the build needs on PATH
    runtime_tools: tuple[str, ...]  # what running it needs on PATH
    product: str                    # what the build makes, relative to `source`
    launcher: str                   # what the plan runs, relative to `source`
    inputs: tuple[str, ...]         # globs (relative to `source`) of what the product is built from
    builder: Callable[[NativeStack, bool, str], None]   # (stack, quiet, device)

    @property
    def source_dir(self) -> Path:
        return require_checkout(f"the {self.ecosystem} stack") / self.source

    @property
    def product_path(self) -> Path:
        return self.source_dir / self.product

    @property
    def executable(self) -> Path:
        """The program `train` and `probe` are run with."""
        return self.source_dir / self.launcher

    def missing_tools(self, tools: tuple[str, ...] | None = None) -> list[str]:
        return [t for t in (self.tools if tools is None else tools) if shutil.which(t) is None]

    def stale_inputs(self) -> list[Path]:
        """Sources newer than the product (all of them when it does not exist)."""
        files = sorted({p for pattern in self.inputs for p in self.source_dir.glob(pattern) if p.is_file()})
        if not self.product_path.is_file():
            return files
        built = self.product_path.stat().st_mtime
        return [p for p in files if p.stat().st_mtime > built]

    def fix(self) -> str:
        return f"run 'deepgreen build {self.ecosystem}' (or bash scripts/setup.sh)"

    def build(self, quiet: bool = True, device: str | None = None) -> Path:
        """Build (incrementally) for `device` (default: the host's); returns the executable.  A
        missing tool or a failed build is a UserError naming it."""
        missing = self.missing_tools()
        if missing:
            raise UserError(f"building {self.ecosystem} needs {', '.join(missing)} on PATH "
                            f"({TOOL_HINTS.get(self.ecosystem, '')})", path=self.source_dir,
                            code="missing-tool")
        self.builder(self, quiet, device or host_device())
        if not self.product_path.is_file():
            raise UserError(f"the build of {self.ecosystem} finished without {self.product}",
                            path=self.source_dir, code="build-failed")
        return self.executable


def _run(stack: NativeStack, command: list[str], quiet: bool, env: dict | None = None,
         cwd: Path | None = None) -> None:
    result = subprocess.run(command, cwd=cwd or stack.source_dir, env=env, text=True,
                            stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT if quiet else None)
    if result.returncode != 0:
        tail = (result.stdout or "").strip()[-3000:]
        raise UserError(f"building {stack.ecosystem} failed ({' '.join(command[:3])} ...): {tail}",
                        path=stack.source_dir, code="build-failed")


def torch_package() -> tuple[Path, str, str]:
    """(folder of the installed torch package, its C++ ABI flag, its version), asked of a
    separate interpreter so that this process does not load torch."""
    probe = ("import os, torch; print(os.path.dirname(torch.__file__)); "
             "print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__.split('+')[0])")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError("torch is not installed in this environment; the LibTorch stacks build against "
                        "its wheel (bash scripts/setup.sh installs it)", code="missing-tool")
    folder, abi, version = result.stdout.split()[-3:]
    return Path(folder), abi, version


def _build_cpp(stack: NativeStack, quiet: bool, device: str) -> None:
    torch_dir, abi, _ = torch_package()
    build_dir = stack.product_path.parent
    cache = build_dir / "CMakeCache.txt"
    configured = (build_dir / "Makefile").is_file() and f"TORCH_DIR:PATH={torch_dir}\n" in \
        cache.read_text(encoding="utf-8", errors="replace")
    if not configured:       # first build, a failed configure, or another torch: configure afresh
        if cache.exists():
            cache.unlink()
        _run(stack, ["cmake", "-S", str(stack.source_dir), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DTORCH_DIR={torch_dir}", f"-DTORCH_CXX11_ABI={abi}"], quiet)
    _run(stack, ["cmake", "--build", str(build_dir), "-j", str(os.cpu_count() or 2)], quiet)
    if stack.product_path.is_file() and stack.stale_inputs():
        # CMake found nothing to relink (a change to the tests' part of CMakeLists.txt, say):
        # the product is current, and its time says so for `stale_inputs`.
        os.utime(stack.product_path)


def cargo_tch_pin(source_dir: Path) -> str | None:
    """The exact tch version Cargo.toml asks for (`tch = "=X.Y.Z"`)."""
    match = re.search(r'^tch\s*=\s*"=([^"]+)"', (source_dir / "Cargo.toml").read_text(encoding="utf-8"), re.M)
    return match.group(1) if match else None


def _build_rust(stack: NativeStack, quiet: bool, device: str) -> None:
    pin, spec_pin = cargo_tch_pin(stack.source_dir), pinned().get("tch")
    if pin != spec_pin:
        raise UserError(f"Cargo.toml pins tch {pin!r}, the specification (S4_backend.pinned_versions) "
                        f"{spec_pin!r}: make them agree", path=stack.source_dir / "Cargo.toml",
                        code="build-failed")
    venv_bin = str(Path(sys.executable).parent)
    # torch-sys asks `python` (in a virtual environment) for the wheel's LibTorch.
    env = dict(os.environ, LIBTORCH_USE_PYTORCH="1", VIRTUAL_ENV=sys.prefix,
               PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""))
    _run(stack, ["cargo", "build", "--release", "--locked"], quiet, env=env)


def built_backend(stack: NativeStack) -> str | None:
    """The ND4J backend the Java stack's last build holds (None: not built, or built before the
    backend was recorded)."""
    record = stack.product_path.parent / BACKEND_RECORD
    return record.read_text(encoding="utf-8").strip() if record.is_file() else None


def maven_options(device: str) -> list[str]:
    """What Maven needs to resolve the Java stack for `device` (pom.xml): the pinned DL4J, the
    device's ND4J backend and, for the GPU, the `cuda` profile with its CUDA libraries."""
    pins = pinned()
    options = [f"-Ddl4j.version={pins['dl4j']}", f"-Dnd4j.backend={dl4j_backend(device)}"]
    return options + (["-Pcuda", f"-Dcuda.redist.version={pins['cuda-redist']}"] if device == "cuda" else [])


def _build_java(stack: NativeStack, quiet: bool, device: str) -> None:
    backend, target = dl4j_backend(device), stack.product_path.parent
    if target.is_dir() and built_backend(stack) != backend:
        shutil.rmtree(target)       # copy-dependencies adds to target/lib and never removes
    _run(stack, ["mvn", "-q", "-B", "package", "-DskipTests", *maven_options(device)], quiet)
    (target / BACKEND_RECORD).write_text(backend + "\n", encoding="utf-8")


def host_device() -> str:
    """The device this host offers: $DEEPGREEN_ACCELERATOR where set, else cuda where NVML finds an
    NVIDIA driver and a GPU, else cpu."""
    from deepgreen_audit.device.errors import NvmlUnavailable
    from deepgreen_audit.device.nvml import Nvml

    declared = os.environ.get(ACCELERATOR_VARIABLE)
    if declared:
        if declared not in DEVICES:
            raise UserError(f"{ACCELERATOR_VARIABLE}={declared!r} is not one of {', '.join(DEVICES)}",
                            code="bad-option")
        return declared
    try:
        Nvml().close()
    except NvmlUnavailable:
        return "cpu"
    return "cuda"


NATIVE_STACKS: dict[str, NativeStack] = {s.ecosystem: s for s in (
    NativeStack("cpp-libtorch", "stacks/cpp_libtorch", ("cmake", "c++"), (),
                "build/deepgreen-libtorch", "build/deepgreen-libtorch",
                ("CMakeLists.txt", "*.cpp", "src/*.cpp", "src/*.hpp"),
                _build_cpp),
    NativeStack("rust-tch", "stacks/rust_tch", ("cargo",), (),
                "target/release/deepgreen-tch", "target/release/deepgreen-tch",
                ("Cargo.toml", "Cargo.lock", "build.rs", "src/**/*.rs"), _build_rust),
    NativeStack("java-dl4j", "stacks/java_dl4j", ("mvn", "java"), ("java",),
                "target/deepgreen-dl4j.jar", "deepgreen-dl4j", ("pom.xml", "src/**/*"), _build_java),
)}

TOOL_HINTS = {
    "cpp-libtorch": "Debian: apt-get install cmake g++ libssl-dev nlohmann-json3-dev libzip-dev libgtest-dev",
    "rust-tch": "Rust's cargo, from rustup or Debian's cargo package",
    "java-dl4j": "a JDK 17 and Maven; Debian: apt-get install openjdk-17-jdk maven",
}

#: Ecosystems of the study that no machine of this project can build, and why.
UNAVAILABLE = {
    "r-torch": ("R/torch needs R, CRAN's 'torch' package and the LibTorch it downloads, which the set-up "
                "does not install (in R: install.packages('torch'); torch::install_torch(); then a stack "
                "program: stacks/README.md, \"R/torch\"); or leave r-torch out of the plan's [scope] "
                "ecosystems"),
}


def get(ecosystem: str) -> NativeStack:
    try:
        return NATIVE_STACKS[ecosystem]
    except KeyError:
        if ecosystem in UNAVAILABLE:
            raise UserError(f"{ecosystem} cannot be built: {UNAVAILABLE[ecosystem]}",
                            code="unavailable-stack") from None
        raise UserError(unknown_name(ecosystem, list(NATIVE_STACKS), "a built stack"),
                        code="bad-option") from None


def build_all(ecosystems: list[str] | None = None, quiet: bool = True, progress=print,
              backend: str = "auto") -> dict[str, Path]:
    """Build the given native stacks (default: all) for `backend` (a device, or "auto": the
    host's), reporting each; returns their executables."""
    device = host_device() if backend == "auto" else backend
    built = {}
    names = list(NATIVE_STACKS) if ecosystems is None else ecosystems
    root = require_checkout("building the native stacks")
    for i, name in enumerate(names, 1):
        stack = get(name)
        started = time.monotonic()
        progress(f"[{i}/{len(names)}] building {name} in {stack.source} ...")
        built[name] = stack.build(quiet=quiet, device=device)
        holds = f", {built_backend(stack)}" if name == "java-dl4j" else ""
        progress(f"[{i}/{len(names)}] {name}: {built[name].relative_to(root)} "
                 f"({time.monotonic() - started:.0f} s{holds})")
    return built
