// The percent codec both ways, HELLO's job, and the client against a scripted harness on a
// loopback socket.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "protocol.hpp"

using deepgreen::percent_decode;
using deepgreen::percent_encode;

namespace {

TEST(Percent, EncodesAllButTheUnreservedCharacters) {
  EXPECT_EQ(percent_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percent_encode("/srv/deep green/data=1%"), "%2Fsrv%2Fdeep%20green%2Fdata%3D1%25");
  EXPECT_EQ(percent_encode("cuda:0"), "cuda%3A0");
  EXPECT_EQ(percent_encode("2.13.0+cu130"), "2.13.0%2Bcu130");
  EXPECT_EQ(percent_encode("\xc3\xa9"), "%C3%A9");  // UTF-8 bytes, upper-case hex
  EXPECT_EQ(percent_encode(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(percent_encode(""), "");
}

TEST(Percent, DecodesEitherCase) {
  EXPECT_EQ(percent_decode("%2Fsrv%2fdeepgreen%2Fdata"), "/srv/deepgreen/data");
  EXPECT_EQ(percent_decode("%C3%A9t%C3%A9"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(percent_decode("plain"), "plain");
  EXPECT_EQ(percent_decode("a%41"), "aA");
}

TEST(Percent, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += char(c);  // not-recipe: every byte value
  EXPECT_EQ(percent_decode(percent_encode(all)), all);
  const std::string path = "/srv/deep green/data=1%";
  EXPECT_EQ(percent_decode(percent_encode(path)), path);
}

TEST(Percent, AShortEscapeStaysAndABadOneIsAnError) {
  EXPECT_EQ(percent_decode("50%"), "50%");
  EXPECT_EQ(percent_decode("a%4"), "a%4");
  EXPECT_THROW(percent_decode("%zz"), std::runtime_error);
  EXPECT_THROW(percent_decode("%4g"), std::runtime_error);
}

TEST(Hello, TheJobIsItsKeyValueTokensDecoded) {
  const auto job = deepgreen::parse_hello(
      "HELLO 1 run_id=cpp-libtorch.resnet18.digits.r1 seed=7 data_dir=%2Fsrv%2Fdeep%20green bare extra=a%3Db");
  EXPECT_EQ(job.at("run_id"), "cpp-libtorch.resnet18.digits.r1");
  EXPECT_EQ(job.at("seed"), "7");
  EXPECT_EQ(job.at("data_dir"), "/srv/deep green");
  EXPECT_EQ(job.at("extra"), "a=b");
  EXPECT_EQ(job.count("bare"), 0u);
  EXPECT_EQ(job.count("HELLO"), 0u);
}

// A harness that answers each request line with the next of `replies` and records the lines.
class ScriptedHarness {
 public:
  explicit ScriptedHarness(std::vector<std::string> replies) : replies_(std::move(replies)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), size) != 0 || listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size) != 0)
      throw std::runtime_error("cannot listen on the loopback interface");
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedHarness() {
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  const std::vector<std::string>& received() const { return received_; }

 private:
  void serve() {
    const int fd = accept(listener_, nullptr, nullptr);
    std::string line;
    char c;
    size_t next = 0;
    while (next < replies_.size() && recv(fd, &c, 1, 0) == 1) {
      if (c != '\n') { line += c; continue; }
      received_.push_back(line);
      line.clear();
      const std::string reply = replies_[next++];
      send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    }
    close(fd);
  }
  std::vector<std::string> replies_;
  std::vector<std::string> received_;
  int listener_ = -1, port_ = 0;
  std::thread thread_;
};

TEST(Client, SendsLinesAndReturnsWhatFollowsOk) {
  ScriptedHarness harness({"OK HELLO 1 seed=3 data_dir=%2Fdata\n", "OK SET\r\n", "ERR block-open BEGIN while a block is open\n"});
  {
    deepgreen::HarnessClient client(harness.port());
    const auto job = client.hello("cpp-libtorch");
    EXPECT_EQ(job.at("seed"), "3");
    EXPECT_EQ(job.at("data_dir"), "/data");
    EXPECT_EQ(client.request("SET loss=0.5"), "SET");
    try {
      client.request("BEGIN 1 train");
      ADD_FAILURE() << "an ERR reply must throw";
    } catch (const std::runtime_error& exc) {
      EXPECT_STREQ(exc.what(), "harness: ERR block-open BEGIN while a block is open (for: BEGIN 1 train)");
    }
    EXPECT_THROW(client.request("BYE"), std::runtime_error);  // the harness hung up
  }
  const std::vector<std::string> expected = {"HELLO 1 cpp-libtorch", "SET loss=0.5", "BEGIN 1 train"};
  EXPECT_EQ(harness.received(), expected);
}

TEST(Client, NoHarnessIsAnErrorNamingThePort) {
  int port;
  {
    ScriptedHarness closed({});  // listens, accepts nothing it answers: take a free port
    port = closed.port();
    deepgreen::HarnessClient client(port);  // let it accept and finish
  }
  try {
    deepgreen::HarnessClient client(port);
    ADD_FAILURE() << "connecting to a closed port must throw";
  } catch (const std::runtime_error& exc) {
    EXPECT_EQ(std::string(exc.what()), "cannot connect to the harness on port " + std::to_string(port));
  }
}

}  // namespace
