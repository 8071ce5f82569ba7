"""One environment per Python framework on a GPU host, and how set-up decides it is one.

Why: in one environment TensorFlow's `[and-cuda]` libraries, JAX's CUDA plugin and torch's CUDA
wheel each pin their own builds of the same NVIDIA libraries (cuDNN, cuBLAS, the CUDA runtime),
and the resolver can only pick one version of each, so a framework either gets libraries it was
not built against or is installed without its GPU build and trains on the CPU.  The study ran
each Python framework in its own environment; so does set-up on a `cuda` host:

- `.venv` as on any host (the tools, the tests, the built stacks' LibTorch), and
- `.venv-pytorch`, `.venv-tensorflow`, `.venv-jax`, each with the project (editable) and that
  framework's GPU build (pyproject.toml extras `pytorch`, `tensorflow-cuda`, `jax-cuda`), at the
  specification's pinned versions (scripts/constraints.py), each resolving its CUDA libraries alone.

A `cpu` host keeps the one `.venv`.  `DEEPGREEN_ACCELERATOR=cuda|cpu` decides; otherwise an
NVIDIA driver (NVML loadable, or `nvidia-smi` answering) means `cuda`.  The dry run resolves every
environment with uv (nothing is installed) and reports the NVIDIA libraries each one gets, what
each would download, and whether the three frameworks would resolve together.

Standard library only, so that `bash scripts/setup.sh --dry-run` runs before `.venv` exists
(with pynvml when it is installed, else `nvidia-smi`); run as
`python -m deepgreen_audit.collect.environments --detect | --dry-run | --install`, or as
`deepgreen envs`.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from deepgreen_audit.errors import UserError

ACCELERATORS = ("cuda", "cpu")
ENV_VARIABLE = "DEEPGREEN_ACCELERATOR"
SETUP_COMMAND = "bash scripts/setup.sh"
#: What the one `.venv` holds on every host (scripts/setup.sh installs it).
SHARED_EXTRAS = ("dev", "render", "collect", "pytorch", "tensorflow", "jax")
#: The platform the dry run resolves for: the manylinux wheels torch and jaxlib ship.
RESOLVE_PLATFORM = f"{platform.machine() or 'x86_64'}-manylinux_2_28"
#: Marks an environment's install as done (and stale when the spec or pyproject is newer).
STAMP = ".deepgreen-installed"


class EnvsError(UserError):
    """A problem with set-up's environments that the user can fix (a bad setting, a missing tool)."""

    def __init__(self, message: str):
        super().__init__(message, code="envs-error")


class ResolverUnavailable(EnvsError):
    """The resolver cannot run here: uv is missing, or PyPI cannot be reached."""


@dataclass(frozen=True)
class Accelerator:
    kind: str     # cuda or cpu
    reason: str   # one line: why set-up decided so


@dataclass(frozen=True)
class FrameworkEnv:
    """The environment of one Python stack on a cuda host."""

    ecosystem: str
    framework: str
    folder: str
    extra: str

    @property
    def extras(self) -> tuple[str, ...]:
        return ("collect", self.extra)

    @property
    def requirement(self) -> str:
        return f"-e .[{','.join(self.extras)}]"

    def python(self, root: Path) -> Path:
        return root / self.folder / "bin" / "python"


FRAMEWORK_ENVS = (
    # PyPI's default torch wheel is already its CUDA build (it pulls the nvidia-* libraries).
    FrameworkEnv("python-pytorch", "torch", ".venv-pytorch", "pytorch"),
    FrameworkEnv("python-tensorflow", "tensorflow", ".venv-tensorflow", "tensorflow-cuda"),
    FrameworkEnv("python-jax", "jax", ".venv-jax", "jax-cuda"),
)


def env_for(ecosystem: str) -> FrameworkEnv | None:
    return next((e for e in FRAMEWORK_ENVS if e.ecosystem == ecosystem), None)


def own_interpreter(ecosystem: str, root: Path | None) -> Path | None:
    """The interpreter of the ecosystem's own environment when set-up built it in this checkout
    (what a plan's python stack runs in unless the plan names one), else None."""
    env = env_for(ecosystem)
    if env is None or root is None:
        return None
    python = env.python(root)
    return python if python.exists() else None


# ------------------------------------------------------------------ the accelerator

def detect_accelerator(environ=None, pynvml_module=None, nvidia_smi: str = "nvidia-smi") -> Accelerator:
    """cuda or cpu, and why: DEEPGREEN_ACCELERATOR wins; else a GPU that NVML (pynvml) or
    nvidia-smi reports means cuda.  Tests pass a fake pynvml module and nvidia-smi path."""
    environ = os.environ if environ is None else environ
    forced = environ.get(ENV_VARIABLE, "").strip()
    if forced:
        if forced not in ACCELERATORS:
            raise EnvsError(f"{ENV_VARIABLE}={forced!r} is not one of {', '.join(ACCELERATORS)}")
        return Accelerator(forced, f"{ENV_VARIABLE}={forced}")
    found, nvml_said = _nvml_gpus(pynvml_module)
    if found:
        return Accelerator("cuda", found)
    found, smi_said = _nvidia_smi_gpus(nvidia_smi)
    if found:
        return Accelerator("cuda", f"{found}; NVML: {nvml_said}")
    return Accelerator("cpu", f"no NVIDIA driver: NVML: {nvml_said}; {smi_said}")


def _nvml_gpus(module) -> tuple[str | None, str]:
    """(a reason naming the GPUs NVML reports, or None; what NVML said otherwise)."""
    from deepgreen_audit.device.errors import NvmlUnavailable
    from deepgreen_audit.device.nvml import Nvml

    try:
        nvml = Nvml(module)
    except NvmlUnavailable as exc:
        return None, exc.reason
    try:
        names, driver = nvml.names(), nvml.driver_version()
    finally:
        nvml.close()
    return f"NVML reports {len(names)} GPU(s): {', '.join(names)} (driver {driver})", "found"


def _nvidia_smi_gpus(program: str) -> tuple[str | None, str]:
    """(a reason naming what `nvidia-smi -L` lists, or None; why it did not answer)."""
    path, name = shutil.which(program), Path(program).name
    if path is None:
        return None, f"{name} is not on PATH"
    try:
        proc = subprocess.run([path, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{name} -L failed ({exc})"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return None, f"{name} -L exited {proc.returncode}"
    return f"{name} -L: {lines[0].strip()}", "found"


# ------------------------------------------------------------------ requirements

def project_root() -> Path:
    from deepgreen_audit.resources import require_checkout

    return require_checkout("the per-framework environments (pyproject.toml)")


def extra_requirements(root: Path, extras: tuple[str, ...]) -> list[str]:
    """The requirement strings pyproject.toml's `extras` add to the project's dependencies."""
    optional = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise EnvsError(f"pyproject.toml has no extra {unknown[0]!r} (it has {', '.join(optional)})")
    return [r for e in extras for r in optional[e]]


def constraints_text() -> str:
    from deepgreen_audit.pins import pip_constraints

    return pip_constraints()


# ------------------------------------------------------------------ resolving (uv, nothing installed)

@dataclass(frozen=True)
class Package:
    name: str
    version: str
    size: int | None        # bytes of the file that would be downloaded (None: unknown)


@dataclass(frozen=True)
class Resolution:
    """What one environment resolves to; `packages` is None when it does not resolve (`error`)."""

    name: str
    extras: tuple[str, ...]
    packages: dict[str, Package] | None
    error: str | None = None

    @property
    def download_bytes(self) -> int:
        return sum(p.size or 0 for p in (self.packages or {}).values())


def find_uv() -> str:
    """uv beside this interpreter (the `dev` extra installs it), else on PATH."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("uv")
    if found is None:
        raise ResolverUnavailable("uv is not installed: the dry run resolves with it "
                                  f"(pip install uv, or run {SETUP_COMMAND}, whose dev extra installs it)")
    return found


def uv_version(uv: str) -> str:
    proc = subprocess.run([uv, "--version"], capture_output=True, text=True)
    return proc.stdout.strip() or "uv"


#: uv's words for a network failure (as opposed to requirements that cannot be satisfied).
_NETWORK_ERRORS = ("error sending request", "failed to fetch", "dns error", "connection refused",
                   "network is unreachable", "timed out", "operation timed out", "client error (connect)")


def resolve(name: str, extras: tuple[str, ...], root: Path, uv: str, python_version: str | None = None,
            platform_tag: str = RESOLVE_PLATFORM) -> Resolution:
    """Resolve the project's dependencies with `extras` and the pinned constraints, as uv would
    install them on `platform_tag`, without installing anything (a PEP 751 lock, which names the
    one file per package and its size)."""
    python_version = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    with tempfile.TemporaryDirectory(prefix="deepgreen-envs-") as tmp:
        constraints, lock = Path(tmp) / "constraints.txt", Path(tmp) / "pylock.env.toml"
        constraints.write_text(constraints_text(), encoding="utf-8")
        cmd = [uv, "pip", "compile", str(root / "pyproject.toml"), "--quiet", "--no-header",
               "--constraint", str(constraints), "--python-version", python_version,
               "--python-platform", platform_tag, "--format", "pylock.toml", "--output-file", str(lock)]
        for extra in extras:
            cmd += ["--extra", extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
        if proc.returncode != 0:
            error = _first_error(proc.stderr)
            if any(word in proc.stderr.lower() for word in _NETWORK_ERRORS):
                raise ResolverUnavailable(f"PyPI cannot be reached from here: {error}")
            return Resolution(name, extras, None, error)
        return Resolution(name, extras, parse_pylock(lock.read_text(encoding="utf-8")))


def _first_error(stderr: str) -> str:
    """uv's explanation in one line (its lines after `error:`, joined)."""
    lines = [line.strip().strip("×╰─▶│").strip() for line in stderr.splitlines()]
    lines = [line.removeprefix("error:").strip() for line in lines if line and not line.startswith("hint:")]
    return " ".join(lines)[:600] or "uv failed without a message"


def parse_pylock(text: str) -> dict[str, Package]:
    """name -> Package from a PEP 751 lock for one platform (its one wheel, else its sdist)."""
    packages = {}
    for entry in tomllib.loads(text).get("packages", []):
        files = entry.get("wheels") or ([entry["sdist"]] if "sdist" in entry else [])
        size = files[0].get("size") if files else None
        packages[entry["name"]] = Package(entry["name"], entry.get("version", "?"), size)
    return packages


def resolve_all(root: Path, uv: str, python_version: str | None = None) -> tuple[list[Resolution], Resolution]:
    """Each environment alone, and the three frameworks together in one."""
    alone = [resolve(env.folder, env.extras, root, uv, python_version) for env in FRAMEWORK_ENVS]
    together_extras = ("collect",) + tuple(env.extra for env in FRAMEWORK_ENVS)
    return alone, resolve("together", together_extras, root, uv, python_version)


# ------------------------------------------------------------------ the NVIDIA libraries

def cuda_family(name: str) -> str | None:
    """The library an nvidia-* distribution ships (nvidia-cudnn-cu12 and nvidia-cudnn-cu13 are
    both cudnn), or None for what is no CUDA library (nvidia-ml-py is NVML's binding)."""
    if not name.startswith("nvidia-") or name == "nvidia-ml-py":
        return None
    return re.sub(r"-cu\d+$", "", name[len("nvidia-"):])


def cuda_libraries(resolution: Resolution) -> dict[str, list[Package]]:
    """family -> the nvidia-* packages of that family the resolution holds."""
    found: dict[str, list[Package]] = {}
    for package in (resolution.packages or {}).values():
        family = cuda_family(package.name)
        if family is not None:
            found.setdefault(family, []).append(package)
    return found


def _cell(packages: list[Package] | None) -> str:
    if not packages:
        return "-"
    cells = []
    for p in sorted(packages, key=lambda p: p.name):
        major = re.search(r"-(cu\d+)$", p.name)
        cells.append(p.version + (f" ({major.group(1)})" if major else ""))
    return " + ".join(cells)


@dataclass(frozen=True)
class Comparison:
    """The together resolution against each environment alone."""

    two_builds: list[str]       # a family resolved from two distributions in one environment
    differs: list[str]          # a package whose version differs from an environment alone


def compare(alone: list[Resolution], together: Resolution) -> Comparison:
    two = [f"{family}: " + " and ".join(f"{p.name} {p.version}" for p in sorted(ps, key=lambda p: p.name))
           for family, ps in sorted(cuda_libraries(together).items()) if len(ps) > 1]
    differs = []
    for name, package in sorted((together.packages or {}).items()):
        if cuda_family(name) is None:
            continue
        for res in alone:
            mine = (res.packages or {}).get(name)
            if mine is not None and mine.version != package.version:
                differs.append(f"{name} {package.version} together, {mine.version} in {res.name} alone")
    return Comparison(two, differs)


def without_gpu_build(resolution: Resolution) -> bool:
    """True when an environment resolves no CUDA runtime: its framework would train on the CPU."""
    return resolution.packages is not None and "cuda-runtime" not in cuda_libraries(resolution)


# ------------------------------------------------------------------ the report

def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB"


def format_plan(accelerator: Accelerator, root: Path) -> str:
    """What set-up builds on this host, with the exact requirements of each environment."""
    pins = " ".join(constraints_text().split())
    lines = [f"accelerator: {accelerator.kind} ({accelerator.reason})",
             f"constraints (collect/experiment.toml, S4_backend.pinned_versions): {pins}",
             f".venv: -e .[{','.join(SHARED_EXTRAS)}] (the tools and tests; on every host)"]
    if accelerator.kind != "cuda":
        lines.append("no per-framework environments on a cpu host (set DEEPGREEN_ACCELERATOR=cuda "
                     "to see what a GPU host gets)")
        return "\n".join(lines) + "\n"
    for env in FRAMEWORK_ENVS:
        state = "built" if env.python(root).exists() else "to build"
        lines.append(f"{env.folder} ({env.ecosystem}, {state}): {env.requirement} = "
                     + ", ".join(extra_requirements(root, env.extras)))
    return "\n".join(lines) + "\n"


def format_resolutions(alone: list[Resolution], together: Resolution, resolver: str, target: str) -> str:
    """The NVIDIA libraries each environment resolves to, what each downloads, and the verdict
    on resolving the three frameworks together."""
    lines = [f"resolved with {resolver} for {target}, nothing installed:"]
    for res in alone:
        if res.packages is None:
            lines.append(f"  {res.name}: DOES NOT RESOLVE: {res.error}")
            continue
        nvidia = sum(p.size or 0 for p in res.packages.values() if cuda_family(p.name))
        note = "  NO CUDA RUNTIME: would train on the CPU" if without_gpu_build(res) else ""
        lines.append(f"  {res.name}: {len(res.packages)} packages, {_gb(res.download_bytes)} to download "
                     f"({_gb(nvidia)} of them NVIDIA libraries){note}")
    columns = [r.name for r in alone] + ["together"]
    libraries = [cuda_libraries(r) for r in alone] + [cuda_libraries(together)]
    families = sorted(set().union(*libraries))
    widths = [max([len("library")] + [len(f) for f in families])]
    rows = [[f] + [_cell(libs.get(f)) for libs in libraries] for f in families]
    widths += [max([len(c)] + [len(r[i + 1]) for r in rows]) for i, c in enumerate(columns)]
    lines.append("CUDA libraries (nvidia-* versions; cuNN: the CUDA major a package names):")
    for row in [["library"] + columns] + rows:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    lines += _together_lines(alone, together)
    return "\n".join(lines) + "\n"


def _together_lines(alone: list[Resolution], together: Resolution) -> list[str]:
    if together.packages is None:
        return [f"together (the three frameworks in one environment): does not resolve: {together.error}"]
    found = compare(alone, together)
    head = (f"together (the three frameworks in one environment): resolves ({len(together.packages)} "
            f"packages, {_gb(together.download_bytes)})")
    if not found.two_builds and not found.differs:
        return [head + " to the same CUDA libraries as each environment alone"]
    lines = [head + f", but {len(found.two_builds)} CUDA libraries come in two builds and "
                    f"{len(found.differs)} packages differ from an environment alone:"]
    lines += [f"  two builds: {line}" for line in found.two_builds]
    lines += [f"  differs: {line}" for line in found.differs]
    return lines


def dry_run(accelerator: Accelerator, root: Path, python_version: str | None = None) -> str:
    """The whole dry run as text: the plan, and on a cuda host the resolutions."""
    text = format_plan(accelerator, root)
    if accelerator.kind != "cuda":
        return text
    uv = find_uv()
    alone, together = resolve_all(root, uv, python_version)
    python_version = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    target = f"CPython {python_version} on {RESOLVE_PLATFORM}"
    return text + format_resolutions(alone, together, uv_version(uv), target)


# ------------------------------------------------------------------ installing (a cuda host)

def _stale(folder: Path, root: Path) -> bool:
    stamp = folder / STAMP
    sources = (root / "pyproject.toml", root / "collect" / "experiment.toml")
    return not stamp.is_file() or any(s.stat().st_mtime > stamp.stat().st_mtime for s in sources)


def install(root: Path, uv: str, say=print, base_python: str | None = None) -> list[str]:
    """Create (or bring up to date) each framework's environment: a venv, then the project
    editable with the framework's GPU extra and the pinned constraints, installed by uv.  An
    environment whose stamp is newer than pyproject.toml and the specification is left alone.
    Returns the folders (re)installed."""
    done = []
    for env in FRAMEWORK_ENVS:
        folder = root / env.folder
        if not _stale(folder, root):
            continue
        if not env.python(root).exists():
            say(f"setup: creating {env.folder}")
            _run([base_python or sys.executable, "-m", "venv", "--without-pip", str(folder)], root)
        constraints = folder / "constraints.txt"
        constraints.write_text(constraints_text(), encoding="utf-8")
        say(f"setup: installing {env.requirement} into {env.folder} (its CUDA build; this takes minutes)")
        _run([uv, "pip", "install", "--quiet", "--python", str(env.python(root)), "--constraint",
              str(constraints), "-e", f".[{','.join(env.extras)}]"], root)
        (folder / STAMP).touch()
        done.append(env.folder)
    return done


def _run(cmd: list[str], root: Path) -> None:
    proc = subprocess.run(cmd, cwd=root)
    if proc.returncode != 0:
        raise EnvsError(f"'{' '.join(cmd[:3])} ...' exited {proc.returncode} (its output is above)")


# ------------------------------------------------------------------ entry point

def run(args) -> int:
    """--detect: print cuda or cpu (the reason on stderr); --dry-run: the report; --install: build
    the per-framework environments on a cuda host; none: the plan for this host."""
    accelerator = detect_accelerator()
    if args.detect:
        print(f"setup: accelerator: {accelerator.kind} ({accelerator.reason})", file=sys.stderr)
        print(accelerator.kind)
        return 0
    root = project_root()
    if args.dry_run:
        sys.stdout.write(dry_run(accelerator, root))
        return 0
    if args.install:
        if accelerator.kind != "cuda":
            print(f"setup: {accelerator.kind} host ({accelerator.reason}): only .venv", file=sys.stderr)
            return 0
        install(root, find_uv(), say=lambda line: print(line, file=sys.stderr))
        return 0
    sys.stdout.write(format_plan(accelerator, root))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--detect", action="store_true", help="print cuda or cpu (why: on stderr)")
    what.add_argument("--dry-run", action="store_true",
                      help="resolve every environment with uv (nothing installed): the NVIDIA library "
                           "versions each gets, its download size, and the three frameworks together")
    what.add_argument("--install", action="store_true",
                      help="on a cuda host, create or update .venv-pytorch, .venv-tensorflow, .venv-jax")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deepgreen_audit.collect.environments",
                                     description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except UserError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
