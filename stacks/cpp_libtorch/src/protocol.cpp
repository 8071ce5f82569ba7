#include "protocol.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <sstream>
#include <stdexcept>

namespace deepgreen {

namespace {
constexpr int kReplyTimeoutS = 60;  // not-recipe: socket timeout (docs/protocol.md)

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string percent_encode(const std::string& text) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += char(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  return out;
}

std::string percent_decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int high = hex_value(text[i + 1]), low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) throw std::runtime_error("bad percent escape in " + text);
      out += char(high * 16 + low);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::map<std::string, std::string> parse_hello(const std::string& reply) {
  std::map<std::string, std::string> job;
  std::stringstream tokens(reply);
  std::string token;
  tokens >> token >> token;  // "HELLO" "1"
  while (tokens >> token) {
    const size_t eq = token.find('=');
    if (eq != std::string::npos) job[token.substr(0, eq)] = percent_decode(token.substr(eq + 1));
  }
  return job;
}

HarnessClient::HarnessClient(int port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("cannot connect to the harness on port " + std::to_string(port));
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout{kReplyTimeoutS, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
}

HarnessClient::~HarnessClient() {
  if (fd_ >= 0) close(fd_);
}

std::string HarnessClient::request(const std::string& line) {
  const std::string out = line + "\n";
  if (send(fd_, out.data(), out.size(), MSG_NOSIGNAL) != ssize_t(out.size()))
    throw std::runtime_error("the harness went away");
  std::string reply;
  char c;
  while (true) {
    const ssize_t n = recv(fd_, &c, 1, 0);
    if (n < 0) throw std::runtime_error("no reply from the harness within the timeout");
    if (n == 0) throw std::runtime_error("the harness closed the connection");
    if (c == '\n') break;
    reply += c;
  }
  if (!reply.empty() && reply.back() == '\r') reply.pop_back();
  if (reply.rfind("OK ", 0) != 0)
    throw std::runtime_error("harness: " + reply + " (for: " + line.substr(0, 80) + ")");
  return reply.substr(3);
}

std::map<std::string, std::string> HarnessClient::hello(const std::string& stack) {
  return parse_hello(request("HELLO 1 " + stack));
}

}  // namespace deepgreen
