"""The pyarrow compute functions validation and the audit use, called by name.

`import pyarrow.compute` writes a Python wrapper, with its docstring and signature, for each
of several hundred functions: 20 ms, a tenth of the read-and-hash floor that `validate` and
`audit` are measured against (benchmarks/bench_floor.py).  The kernels themselves are
reached through `call_function` and the option classes of pyarrow's compiled module, which
`pyarrow.compute` is built on and which costs a third of that.  Each function here is the
`pyarrow.compute` function of the same name, with the arguments this project passes
(tests/test_compute.py holds them equal).  An array's own `cast`, `unique` and
`dictionary_encode` methods import `pyarrow.compute`: use these instead.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyarrow._compute import (
    CastOptions,
    JoinOptions,
    MatchSubstringOptions,
    ReplaceSubstringOptions,
    SetLookupOptions,
    SplitPatternOptions,
    call_function,
)


def cast(arr: Any, target_type: pa.DataType) -> Any:
    """`arr` as `target_type`; a value that does not convert raises pa.ArrowInvalid."""
    return call_function("cast", [arr], CastOptions.safe(target_type))


def fill_null(arr: Any, value: Any) -> Any:
    """`arr` with its nulls replaced by `value` (of the array's type)."""
    return call_function("coalesce", [arr, pa.scalar(value, type=arr.type)])


def match_substring(arr: Any, pattern: str) -> Any:
    return call_function("match_substring", [arr], MatchSubstringOptions(pattern))


def match_substring_regex(arr: Any, pattern: str) -> Any:
    return call_function("match_substring_regex", [arr], MatchSubstringOptions(pattern))


def replace_substring_regex(arr: Any, pattern: str, replacement: str) -> Any:
    return call_function("replace_substring_regex", [arr],
                         ReplaceSubstringOptions(pattern, replacement))


def is_in(arr: Any, value_set: pa.Array) -> Any:
    return call_function("is_in", [arr], SetLookupOptions(value_set))


def split_pattern(arr: Any, pattern: str) -> Any:
    return call_function("split_pattern", [arr], SplitPatternOptions(pattern))


def binary_join_element_wise(*strings: Any, separator: str) -> Any:
    """The texts of each row of `strings` joined by `separator` (null where one is null)."""
    return call_function("binary_join_element_wise", [*strings, separator], JoinOptions())


def _plain(name: str):
    """The function `name`, whose arguments are arrays or scalars and which has no options."""
    def function(*args: Any) -> Any:
        return call_function(name, list(args))
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"pyarrow's `{name}` compute function."
    return function


utf8_length = _plain("utf8_length")
equal = _plain("equal")
not_equal = _plain("not_equal")
or_ = _plain("or")
is_finite = _plain("is_finite")
is_null = _plain("is_null")
if_else = _plain("if_else")
unique = _plain("unique")
filter = _plain("filter")  # noqa: A001  (pyarrow's name)
dictionary_encode = _plain("dictionary_encode")
list_value_length = _plain("list_value_length")
list_flatten = _plain("list_flatten")
