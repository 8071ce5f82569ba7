#include "io.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace deepgreen {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot be opened (prepare it with 'deepgreen data prepare')");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace deepgreen
