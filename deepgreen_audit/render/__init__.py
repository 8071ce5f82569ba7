"""The renderer: the analysis's results into numbers.tex, tables and figures, and the PDF.

`render(package)` writes paper/generated/ through the Jinja templates of
paper/templates/ (LaTeX-safe delimiters, StrictUndefined, a finalize hook
refusing None and NaN); `build_pdf()` compiles paper/paper.tex with
latexmk; `lint.find_typed_numbers` checks that the results text types no
number of its own.
"""

_EXPORTS = dict.fromkeys(("RenderReport", "build_pdf", "render"), "deepgreen_audit.render.build")

__all__ = ["RenderReport", "build_pdf", "render"]


def __getattr__(name: str):
    # Imported on first use, so that `deepgreen --help` and light verbs do not pay
    # for the heavy modules (scipy, matplotlib) behind this package.
    import importlib

    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
