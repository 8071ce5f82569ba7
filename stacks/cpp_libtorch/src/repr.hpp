// Python's repr() of a float: the canonical number form of the package (docs/protocol.md).
#pragma once

#include <string>

namespace deepgreen {

// The shortest digits that read back as `value` (std::to_chars), written as Python writes
// them: positional for decimal exponents -4 .. 15 ("0.0002", "3.0", "123456789012345.6"),
// scientific with a signed, at least two-digit exponent otherwise ("1e-05", "1e+16"), and
// "nan", "inf", "-inf" (which the harness refuses as a loss: ERR bad-value).
std::string python_repr(double value);

}  // namespace deepgreen
