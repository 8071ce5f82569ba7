// The client side of the harness line protocol, version 1 (docs/protocol.md): one request
// line, one reply line, synchronously, so that a phase starts and ends only after the
// harness measured its boundary.  Values in key=value tokens are percent-encoded UTF-8.
#pragma once

#include <map>
#include <string>

namespace deepgreen {

// RFC 3986 unreserved characters as they are, every other byte as %XX (upper-case hex).
std::string percent_encode(const std::string& text);
// %XX as its byte; a '%' without two characters after it stays as it is; a '%' followed by
// two characters that are not hex digits is an error (std::runtime_error).
std::string percent_decode(const std::string& text);

// The job in a HELLO reply ("HELLO 1 key=value ..." after "OK "): its key=value tokens,
// values decoded; a token without '=' is ignored.
std::map<std::string, std::string> parse_hello(const std::string& reply);

class HarnessClient {
 public:
  // Connects to 127.0.0.1:port, with TCP_NODELAY and a reply timeout (the stacks wait 60 s).
  explicit HarnessClient(int port);
  ~HarnessClient();
  HarnessClient(const HarnessClient&) = delete;
  HarnessClient& operator=(const HarnessClient&) = delete;

  // Send one request; return the reply after "OK ", or throw with the harness's reply.
  std::string request(const std::string& line);
  // HELLO: the job the harness hands this stack.
  std::map<std::string, std::string> hello(const std::string& stack);

 private:
  int fd_ = -1;
};

}  // namespace deepgreen
