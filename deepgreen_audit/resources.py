"""Where the code finds the files the project keeps beside its Python package: the Table
Schemas (schemas/), the specification and the campaign's configuration (collect/), the
paper's templates and text (paper/) and the stack sources (stacks/).

They stay at the top of the checkout, where users look for them.  `deepgreen_audit/project/`
holds one symbolic link to each of those folders, and the wheel ships the files the links
reach as package data (pyproject.toml, [tool.setuptools.package-data]).  So the code reads
them through importlib.resources in one way, from a checkout (editable install, or the
source tree on sys.path) and from an installed wheel alike, whatever the working folder.

What only a checkout has (the stacks' builds, docs/ and the paper's build, the collected
pilot) is asked of `require_checkout`, which says so plainly in an installed copy.

Standard library only: `scripts/setup.sh` reads the specification through deepgreen_audit.pins
before anything is installed.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from deepgreen_audit.errors import UserError

#: The folder of the package that mirrors the checkout's top level.
SHIPPED = "project"


def shipped_root() -> Path:
    """The shipped files, laid out as at the top of the checkout (stacks/, paper/, ...)."""
    # the package's files lie in a folder (an installed or editable package, not a zip)
    return Path(os.fspath(resources.files("deepgreen_audit") / SHIPPED))  # type: ignore[call-overload]


def project_file(*parts: str) -> Path:
    """One shipped file or folder (`project_file("collect", "experiment.toml")`); the real
    path, so that messages name the file a user edits (collect/..., not the link)."""
    return shipped_root().joinpath(*parts).resolve()


def checkout() -> Path | None:
    """The source checkout this package runs from, or None when it is installed from a wheel."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def checkout_package(name: str) -> Path | None:
    """The checkout's package folder `name` (calibration/) when it holds one, else None."""
    root = checkout()
    path = root / name / "datapackage.json" if root else None
    return path.parent if path is not None and path.is_file() else None


def shipped_calibration(location) -> Path | None:
    """The checkout's calibration/ when the package at `location` (a folder or descriptor) is
    the checkout's shipped one (./datapackage.json), else None: the default of `audit` and
    `render --calibration`, since a calibration belongs to the campaign it was collected beside."""
    root = checkout()
    if root is None or location is None:
        return None
    shipped = (root / "datapackage.json").resolve()
    try:
        path = Path(location)
        path = (path / "datapackage.json" if path.is_dir() else path).resolve()
    except OSError:  # a name this file system cannot look up is not the shipped package
        return None
    return checkout_package("calibration") if path == shipped else None


def require_checkout(purpose: str) -> Path:
    """The checkout, for work that needs one (`purpose` says which); a UserError without."""
    root = checkout()
    if root is None:
        raise UserError(f"{purpose} needs a checkout of the project (clone it and run "
                        f"scripts/setup.sh): this copy, {Path(__file__).parent}, is installed "
                        "from a wheel, which ships what validate, audit and render read, not "
                        "the stacks, their builds, docs/ or the paper's build",
                        code="needs-checkout")
    return root
