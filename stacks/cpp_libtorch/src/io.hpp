#pragma once

#include <string>

namespace deepgreen {

// The bytes of the file at `path`; one that cannot be opened is an error that says how the
// stack's inputs are made.
std::string read_file(const std::string& path);

}  // namespace deepgreen
