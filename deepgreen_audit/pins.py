"""The pinned framework versions (`S4_backend.pinned_versions` of the specification) and where
each one is installed from: the one place a framework version is written down.

Standard library only: `scripts/setup.sh` reads the pip constraints from here before the
project and its dependencies are installed (`python scripts/constraints.py`).  Everything
else compares against these: `deepgreen build` (the DL4J version handed to Maven, tch's pin
in Cargo.toml), `deepgreen preflight` (what is installed), and the audit's
`S4.pinned-versions` (what the runs recorded).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from deepgreen_audit.resources import checkout, project_file

SPEC_FILE = project_file("collect", "experiment.toml")

#: Frameworks installed with pip, and the distributions that must carry the pinned version.
PIP_DISTRIBUTIONS = {"torch": ("torch",), "tensorflow": ("tensorflow",), "jax": ("jax", "jaxlib")}


def pinned(spec_file: Path = SPEC_FILE) -> dict[str, str]:
    with open(spec_file, "rb") as fh:
        return dict(tomllib.load(fh)["S4_backend"]["pinned_versions"])


def pip_constraints(spec_file: Path = SPEC_FILE) -> str:
    """A pip constraints file holding the Python frameworks at their pinned versions."""
    pins = pinned(spec_file)
    return "".join(f"{dist}=={pins[framework]}\n"
                   for framework, dists in PIP_DISTRIBUTIONS.items() for dist in dists)


_INSTALLED_PROBE = "import json; from deepgreen_audit.pins import installed; print(json.dumps(installed()))"


def installed_in(python: str) -> dict[str, str | None]:
    """`installed()` as another interpreter sees it (a stack's own environment, where its
    framework is installed); {} when that interpreter cannot answer (its stack check says why)."""
    import json
    import subprocess
    import sys

    if python == sys.executable:
        return installed()
    try:
        proc = subprocess.run([python, "-c", _INSTALLED_PROBE], capture_output=True, text=True, timeout=120)
        return dict(json.loads(proc.stdout)) if proc.returncode == 0 else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def _distribution(name: str) -> str | None:
    from importlib import metadata  # 20 ms: not at the command line's start-up

    try:
        return metadata.version(name).split("+")[0]
    except metadata.PackageNotFoundError:
        return None


def cargo_lock_version(lock: Path, package: str) -> str | None:
    """The version of `package` that a Cargo.lock resolved."""
    if not lock.is_file():
        return None
    for block in lock.read_text(encoding="utf-8").split("[[package]]"):
        if re.search(rf'^name = "{re.escape(package)}"$', block, re.M):
            found = re.search(r'^version = "([^"]+)"$', block, re.M)
            return found.group(1) if found else None
    return None


def maven_built_version(lib_dir: Path, artifact: str) -> str | None:
    """The version of `artifact` among the jars a Maven build copied into lib_dir."""
    jars = sorted(lib_dir.glob(f"{artifact}-*.jar")) if lib_dir.is_dir() else []
    return jars[0].name[len(artifact) + 1:-len(".jar")] if jars else None


def installed() -> dict[str, str | None]:
    """What this checkout would run, framework by framework (None: not installed or built;
    the native stacks' versions are None in an installed copy, which has no builds)."""
    root = checkout()
    versions = {framework: _distribution(dists[0]) for framework, dists in PIP_DISTRIBUTIONS.items()}
    for framework, dists in PIP_DISTRIBUTIONS.items():
        if any(_distribution(d) != versions[framework] for d in dists[1:]):
            versions[framework] = "mixed: " + ", ".join(f"{d} {_distribution(d)}" for d in dists)
    versions["libtorch"] = versions["torch"]     # the C++ stack links the torch wheel's LibTorch
    stacks = root / "stacks" if root else None
    versions["tch"] = cargo_lock_version(stacks / "rust_tch" / "Cargo.lock", "tch") if stacks else None
    versions["dl4j"] = (maven_built_version(stacks / "java_dl4j" / "target" / "lib", "deeplearning4j-nn")
                        if stacks else None)
    versions["torch-r"] = None
    return versions
