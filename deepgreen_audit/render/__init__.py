"""The renderer: the analysis's results into numbers.tex, tables and figures, and the PDF.

`render(package)` writes paper/generated/ through the Jinja templates of
paper/templates/ (LaTeX-safe delimiters, StrictUndefined, a finalize hook
refusing None and NaN); `build_pdf()` compiles paper/paper.tex with
latexmk; `lint.find_typed_numbers` checks that the results text types no
number of its own.
"""

from deepgreen_audit.render.build import RenderReport, build_pdf, render

__all__ = ["RenderReport", "build_pdf", "render"]
