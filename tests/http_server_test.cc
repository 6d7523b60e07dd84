// http_server_test.cc — chapter 5's capstone, end to end.
//
// Starts //ch05_shutdown/examples:http_server as a child process, reads the
// port it prints, and talks HTTP/1.1 to it over loopback with a client of
// its own: first the protocol (keep-alive, 404, 400, 431, 405, HEAD,
// HTTP/1.0, pipelining, absolute-form targets, Date, non-HTTP bytes), then
// the shutdown — idle connections, a request in flight, a stalled client
// (and that the drain sleeps meanwhile), then fairness — a client that
// pipelines without pause must not delay the others nor stretch the grace
// period, and running out of descriptors is logged and survived — and last
// 200 busy keep-alive connections that get SIGTERM in the middle of their
// traffic.
//
// The rule checked under load: every request whose bytes were all sent
// before the signal gets its full, correct answer. A request sent after it
// may be answered or refused by a close, but no connection ever ends with
// part of an answer. The server closes every connection, and exits with
// status 0 within its grace period.
//
// Configurations. The server is a data dependency, built in the same
// configuration as this test: under --config=asan, ubsan or tsan it carries
// the same sanitizer, and a report makes it exit non-zero, which fails the
// exit-status checks here. Under --config=valgrind only this client runs
// under memcheck (Valgrind does not follow the child without
// --trace-children); the client is then some 30 times slower, so the load
// test sends fewer requests before the signal (the 200 connections stay).

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kDefaultGraceMs = 5000;
// On top of a grace period: a loaded machine under a sanitizer is slow (to
// run the server's last steps, print its stats, tear down the process).
// That the server finished its work within the grace period is checked
// exactly, by its own count: "abandoned: 0".
constexpr milliseconds kSlack{5000};
// How long a blocking read waits for an answer before the test gives up.
constexpr int kReadTimeoutMs = 10000;

bool UnderValgrind() { return RUNNING_ON_VALGRIND != 0; }

long MillisecondsSince(Clock::time_point start) {
  return static_cast<long>(
      std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
}

std::string ServerPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return "";
  return std::string(srcdir) + "/" + workspace +
         "/ch05_shutdown/examples/http_server";
}

// ---------------------------------------------------------------------------
// The server, as a child process.

class Server {
 public:
  explicit Server(int grace_ms = kDefaultGraceMs) : grace_ms_(grace_ms) {}
  // Before Start(): run it with at most `n` open descriptors (its soft and
  // hard RLIMIT_NOFILE, so it cannot raise them), and read what it writes
  // to stderr into output() too.
  void LimitDescriptors(int n) { fd_limit_ = n; }
  void CaptureStderr() { capture_stderr_ = true; }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  ~Server() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_fd_ >= 0) close(stdout_fd_);
  }

  // Starts it and reads "listening on port N". Fails the test otherwise.
  void Start() {
    std::string path = ServerPath();
    ASSERT_FALSE(path.empty()) << "TEST_SRCDIR / TEST_WORKSPACE not set";
    std::string grace = std::to_string(grace_ms_);
    int out[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      if (capture_stderr_) dup2(out[1], STDERR_FILENO);
      if (fd_limit_ > 0) {
        // Through the shell's ulimit (soft and hard limit at once), not a
        // setrlimit() here: under Valgrind this child still runs under
        // it, and Valgrind refuses to lower the limit; the shell does not.
        std::string script =
            "ulimit -n " + std::to_string(fd_limit_) + " && exec \"$0\" \"$@\"";
        execl("/bin/sh", "sh", "-c", script.c_str(), path.c_str(), "0",
              grace.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      execl(path.c_str(), path.c_str(), "0", grace.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    stdout_fd_ = out[0];
    std::string line = ReadOutputLine(30000);  // a slow start is no failure
    ASSERT_EQ(std::sscanf(line.c_str(), "listening on port %d", &port_), 1)
        << "the server printed: \"" << line << "\"";
    ASSERT_GT(port_, 0);
  }

  int port() const { return port_; }
  int grace_ms() const { return grace_ms_; }

  // Its resident memory (VmRSS of /proc/PID/status), in KiB; -1 if unknown.
  long ResidentKib() const {
    FILE* f = std::fopen(("/proc/" + std::to_string(pid_) + "/status").c_str(), "r");
    char line[256];
    long kib = -1;
    if (f == nullptr) return -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    }
    std::fclose(f);
    return kib;
  }

  void Signal(int signo) {
    signaled_at_ = Clock::now();
    ASSERT_EQ(kill(pid_, signo), 0);
  }

  // Waits at most `timeout` for the server to exit. True if it did; then
  // exit_status() and output() are final.
  bool WaitForExit(milliseconds timeout) {
    Clock::time_point until = Clock::now() + timeout;
    while (!exited_) {
      pid_t done = waitpid(pid_, &status_, WNOHANG);
      if (done == pid_) {
        exited_ = true;
        exit_ms_ = MillisecondsSince(signaled_at_);
        break;
      }
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    ReadRemainingOutput();
    return true;
  }

  // The exit status, or -1 if it did not exit normally (a signal).
  int exit_status() const {
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  // Milliseconds from Signal() to the exit.
  long exit_ms() const { return exit_ms_; }
  // What it printed after the port.
  const std::string& output() const { return output_; }

  // Signal, then expect a clean exit 0 within the grace period (+ slack),
  // nothing abandoned.
  void ShutDownCleanly(int signo = SIGTERM) {
    ASSERT_NO_FATAL_FAILURE(Signal(signo));
    ASSERT_TRUE(WaitForExit(milliseconds(grace_ms_) + kSlack))
        << "the server did not exit within " << grace_ms_ << " ms + slack; "
        << StuckReport();
    EXPECT_EQ(exit_status(), 0) << output_;
    EXPECT_NE(output_.find("closed:              yes"), std::string::npos)
        << output_;
    EXPECT_NE(output_.find("abandoned:             0\n"), std::string::npos)
        << output_;
  }

 private:
  // For a server that did not exit: what it printed so far, and where each
  // of its threads is (name, state, and the system call it is in, from
  // /proc), so that a hang can be told from a slow machine.
  std::string StuckReport() {
    std::string report = "it printed: \"";
    char ch;
    pollfd p = {stdout_fd_, POLLIN, 0};
    while (poll(&p, 1, 0) == 1 && read(stdout_fd_, &ch, 1) == 1) report += ch;
    report += "\"; its threads (name, kernel wait, syscall):";
    const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    DIR* list = opendir(tasks.c_str());
    if (list == nullptr) return report + " (none found)";
    while (dirent* entry = readdir(list)) {
      if (entry->d_name[0] == '.') continue;
      const std::string dir = tasks + "/" + entry->d_name;
      report += std::string("\n  ") + entry->d_name + ": " +
                FirstLine(dir + "/comm") + ", " + FirstLine(dir + "/wchan") +
                ", " + FirstLine(dir + "/syscall");
    }
    closedir(list);
    return report;
  }

  static std::string FirstLine(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return "?";
    char line[256] = "";
    if (std::fgets(line, sizeof line, f) == nullptr) line[0] = '\0';
    std::fclose(f);
    std::string text(line);
    while (!text.empty() && (text.back() == '\n')) text.pop_back();
    return text;
  }

  std::string ReadOutputLine(int timeout_ms) {
    std::string line;
    char ch;
    pollfd p = {stdout_fd_, POLLIN, 0};
    while (poll(&p, 1, timeout_ms) == 1 && read(stdout_fd_, &ch, 1) == 1) {
      if (ch == '\n') break;
      line += ch;
    }
    return line;
  }

  void ReadRemainingOutput() {
    char buffer[4096];
    ssize_t n;
    while ((n = read(stdout_fd_, buffer, sizeof buffer)) > 0)
      output_.append(buffer, static_cast<size_t>(n));
  }

  int grace_ms_;
  int fd_limit_ = 0;
  bool capture_stderr_ = false;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int status_ = 0;
  long exit_ms_ = 0;
  std::string output_;
  Clock::time_point signaled_at_ = Clock::now();
};

// ---------------------------------------------------------------------------
// Answers, parsed strictly.

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

enum class Parse { kIncomplete, kComplete, kMalformed };

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(ch));
  return s;
}

// Takes one answer off the front of `buffer`. `head`: it answers a HEAD
// request (no body, whatever Content-Length says).
Parse ParseResponse(std::string* buffer, bool head, Response* out) {
  size_t end = buffer->find("\r\n\r\n");
  if (end == std::string::npos)
    return buffer->size() > 65536 ? Parse::kMalformed : Parse::kIncomplete;
  size_t head_len = end + 4;
  std::string block = buffer->substr(0, end + 2);  // every line with its CRLF
  Response r;
  size_t line_end = block.find("\r\n");
  std::string status_line = block.substr(0, line_end);
  if (status_line.size() < 13 || status_line.compare(0, 9, "HTTP/1.1 ") != 0 ||
      status_line[12] != ' ')
    return Parse::kMalformed;
  r.status = std::atoi(status_line.substr(9, 3).c_str());
  if (r.status < 100 || r.status > 599) return Parse::kMalformed;
  for (size_t pos = line_end + 2; pos < block.size();) {
    size_t next = block.find("\r\n", pos);
    std::string line = block.substr(pos, next - pos);
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) return Parse::kMalformed;
    size_t value = line.find_first_not_of(' ', colon + 1);
    r.headers[Lower(line.substr(0, colon))] =
        value == std::string::npos ? "" : line.substr(value);
    pos = next + 2;
  }
  std::string length = r.Header("content-length");
  if (length.empty() ||
      length.find_first_not_of("0123456789") != std::string::npos)
    return Parse::kMalformed;
  size_t body_len = head ? 0 : std::stoul(length);
  if (buffer->size() < head_len + body_len) return Parse::kIncomplete;
  r.body = buffer->substr(head_len, body_len);
  buffer->erase(0, head_len + body_len);
  *out = std::move(r);
  return Parse::kComplete;
}

// ---------------------------------------------------------------------------
// A blocking client connection, for the protocol tests.

class Connection {
 public:
  explicit Connection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    timeval timeout = {kReadTimeoutMs / 1000, 0};
    if (fd_ < 0 ||
        connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0)
      ADD_FAILURE() << "cannot connect to port " << port << ": "
                    << std::strerror(errno);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent,
                       MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // The next answer; nullopt if the connection ends first, the answer is
  // malformed, or none comes within kReadTimeoutMs.
  std::optional<Response> Read(bool head = false) {
    Response r;
    for (;;) {
      Parse p = ParseResponse(&buffer_, head, &r);
      if (p == Parse::kComplete) return r;
      if (p == Parse::kMalformed || !Receive()) return std::nullopt;
    }
  }

  // True if the server closes the connection (end of stream or reset)
  // without sending anything more.
  bool ClosedByServer() {
    while (Receive()) continue;
    return closed_ && buffer_.empty();
  }

 private:
  bool Receive() {
    char chunk[16384];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) {
      closed_ = n == 0 || errno == ECONNRESET;  // not a timeout
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
  bool closed_ = false;
};

const char kGet[] = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";

std::string Get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: test\r\n" + extra + "\r\n";
}

void ExpectHello(const std::optional<Response>& r, const char* connection) {
  ASSERT_TRUE(r.has_value()) << "no complete answer";
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("content-length"), "6");
  EXPECT_EQ(r->body, "hello\n");
  EXPECT_EQ(r->Header("connection"), connection);
}

// Each protocol test starts its own server and shuts it down cleanly.
class HttpServer : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(server_.Start()); }
  void TearDown() override {
    if (!HasFatalFailure()) server_.ShutDownCleanly();
  }
  int port() const { return server_.port(); }

  Server server_;
};

// Sends `request` on a new connection; expects `status`, then a close.
void ExpectErrorAndClose(int port, const std::string& request, int status) {
  Connection c(port);
  ASSERT_TRUE(c.Send(request));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value()) << "no answer to: " << request.substr(0, 80);
  EXPECT_EQ(r->status, status) << "request: " << request.substr(0, 80);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_EQ(r->body.size(), std::stoul(r->Header("content-length")));
  EXPECT_TRUE(c.ClosedByServer());
}

// ---------------------------------------------------------------------------
// The protocol.

TEST_F(HttpServer, KeepAliveServesManyRequestsOnOneConnection) {
  Connection c(port());
  for (int i = 0; i < 5; i++) {
    ASSERT_TRUE(c.Send(kGet));
    ExpectHello(c.Read(), "keep-alive");
  }
}

TEST_F(HttpServer, QueryStringIsIgnored) {
  Connection c(port());
  ASSERT_TRUE(c.Send(Get("/?name=value")));
  ExpectHello(c.Read(), "keep-alive");
}

TEST_F(HttpServer, UnknownPathIs404AndKeepsTheConnection) {
  Connection c(port());
  ASSERT_TRUE(c.Send(Get("/nope")));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->Header("connection"), "keep-alive");
  ASSERT_TRUE(c.Send(kGet));
  ExpectHello(c.Read(), "keep-alive");
}

TEST_F(HttpServer, MalformedRequestsAre400AndClose) {
  const char* requests[] = {
      "GARBAGE\r\n\r\n",
      "GET /\r\nHost: test\r\n\r\n",                      // no version
      "GET  / HTTP/1.1\r\nHost: test\r\n\r\n",            // two spaces
      "GET nope HTTP/1.1\r\nHost: test\r\n\r\n",          // not origin-form
      "GET / HTTX/1.1\r\nHost: test\r\n\r\n",
      "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
      "GET / HTTP/1.1\r\nHost : test\r\n\r\n",            // space before colon
      "GET / HTTP/1.1\r\nHost: test\r\n folded\r\n\r\n",  // obsolete folding
      "GET / HTTP/1.1\r\n\r\n",                           // no Host
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",     // two Hosts
      "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello",
      "GET / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n",
  };
  for (const char* request : requests)
    ExpectErrorAndClose(port(), request, 400);
  std::string with_nul = Get("/", "X-Nul: a\r\n");  // ends "a\r\n\r\n"
  with_nul[with_nul.size() - 5] = '\0';
  ExpectErrorAndClose(port(), with_nul, 400);
}

TEST_F(HttpServer, OversizedHeaderBlockIs431AndCloses) {
  // 16 KiB of header, twice the limit: the server answers after reading
  // 8 KiB and discards the rest while it closes.
  ExpectErrorAndClose(port(), Get("/", "X-Big: " + std::string(16384, 'a') + "\r\n"),
                      431);
}

TEST_F(HttpServer, HeaderBlockJustUnderTheLimitIsServed) {
  std::string request = Get("/", "X-Big: " + std::string(7000, 'a') + "\r\n");
  Connection c(port());
  ASSERT_TRUE(c.Send(request));
  ExpectHello(c.Read(), "keep-alive");
}

TEST_F(HttpServer, OtherMethodsAre405AndClose) {
  ExpectErrorAndClose(port(), "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n",
                      405);
  ExpectErrorAndClose(port(), "DELETE / HTTP/1.1\r\nHost: test\r\n\r\n", 405);
  Connection c(port());
  ASSERT_TRUE(c.Send("PUT / HTTP/1.1\r\nHost: test\r\n\r\n"));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->Header("allow"), "GET, HEAD");
}

TEST_F(HttpServer, UnsupportedVersionIs505) {
  ExpectErrorAndClose(port(), "GET / HTTP/2.0\r\nHost: test\r\n\r\n", 505);
}

TEST_F(HttpServer, HeadAnswersWithoutBody) {
  Connection c(port());
  ASSERT_TRUE(c.Send("HEAD / HTTP/1.1\r\nHost: test\r\n\r\n"));
  std::optional<Response> r = c.Read(/*head=*/true);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("content-length"), "6");
  // The next answer starts right after the head: no stray body bytes.
  ASSERT_TRUE(c.Send(kGet));
  ExpectHello(c.Read(), "keep-alive");
}

TEST_F(HttpServer, Http10ClosesUnlessAskedToKeepAlive) {
  {
    Connection c(port());
    ASSERT_TRUE(c.Send("GET / HTTP/1.0\r\n\r\n"));
    ExpectHello(c.Read(), "close");
    EXPECT_TRUE(c.ClosedByServer());
  }
  Connection c(port());
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(c.Send("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    ExpectHello(c.Read(), "keep-alive");
  }
}

TEST_F(HttpServer, ConnectionCloseIsHonoured) {
  Connection c(port());
  ASSERT_TRUE(c.Send(Get("/", "Connection: keep-alive, close\r\n")));
  ExpectHello(c.Read(), "close");
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  std::string batch;
  for (int i = 0; i < 20; i++) batch += Get(i % 3 == 2 ? "/missing" : "/");
  batch += "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n";
  batch += Get("/", "Connection: close\r\n");
  batch += kGet;  // after "close": never answered
  Connection c(port());
  ASSERT_TRUE(c.Send(batch));  // one write: the server reads them at once
  for (int i = 0; i < 20; i++) {
    std::optional<Response> r = c.Read();
    ASSERT_TRUE(r.has_value()) << "answer " << i;
    EXPECT_EQ(r->status, i % 3 == 2 ? 404 : 200) << "answer " << i;
  }
  std::optional<Response> head = c.Read(/*head=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  ExpectHello(c.Read(), "close");
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServer, RequestArrivingInPiecesIsAssembled) {
  std::string request = Get("/", "User-Agent: slow\r\n");
  Connection c(port());
  for (char ch : request) {
    ASSERT_TRUE(c.Send(std::string(1, ch)));
    std::this_thread::sleep_for(milliseconds(1));
  }
  ExpectHello(c.Read(), "keep-alive");
}

TEST_F(HttpServer, BareLineFeedsAndLeadingBlankLinesAreAccepted) {
  Connection c(port());
  ASSERT_TRUE(c.Send("\r\n\nGET / HTTP/1.1\nHost: test\n\n"));
  ExpectHello(c.Read(), "keep-alive");
}

TEST_F(HttpServer, AbsoluteFormTargetIsAccepted) {
  // RFC 9112, section 3.2.2: a server must accept the form a client sends
  // to a proxy. Its path decides, as in origin form; "" means "/".
  Connection c(port());
  for (const char* target :
       {"http://test/", "http://test", "HTTP://test:80/?q=1", "https://test/"}) {
    ASSERT_TRUE(c.Send(Get(target)));
    ExpectHello(c.Read(), "keep-alive");
  }
  ASSERT_TRUE(c.Send(Get("http://test/nope")));
  std::optional<Response> r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 404);
  ExpectErrorAndClose(port(), Get("http:///"), 400);  // no host
  ExpectErrorAndClose(port(), Get("ftp://test/"), 400);
}

// "Sun, 06 Nov 1994 08:49:37 GMT", as a time; -1 if it is not that format.
time_t ParseImfFixdate(const std::string& text) {
  static const char* const kDays[] = {"Sun", "Mon", "Tue", "Wed",
                                      "Thu", "Fri", "Sat"};
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr",
                                        "May", "Jun", "Jul", "Aug",
                                        "Sep", "Oct", "Nov", "Dec"};
  char day[4], month[4];
  int mday, year, hour, minute, second, length = 0;
  if (text.size() != 29 ||
      std::sscanf(text.c_str(), "%3s, %2d %3s %4d %2d:%2d:%2d GMT%n", day,
                  &mday, month, &year, &hour, &minute, &second, &length) != 7 ||
      length != 29 || text[7] != ' ' || text[11] != ' ' || text[16] != ' ')
    return -1;
  tm t = {};
  t.tm_mon = -1;
  for (int i = 0; i < 12; i++)
    if (std::strcmp(month, kMonths[i]) == 0) t.tm_mon = i;
  t.tm_mday = mday;
  t.tm_year = year - 1900;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = second;
  time_t when = timegm(&t);
  tm check;
  if (t.tm_mon < 0 || gmtime_r(&when, &check) == nullptr ||
      std::strcmp(day, kDays[check.tm_wday]) != 0 || check.tm_mday != mday)
    return -1;  // a wrong weekday, or a day the month does not have
  return when;
}

TEST_F(HttpServer, EveryAnswerCarriesDate) {
  // RFC 9110, section 6.6.1: an origin server with a clock sends Date, in
  // IMF-fixdate (section 5.6.7). On a good answer, a 404 and a 400 alike.
  Connection c(port());
  ASSERT_TRUE(c.Send(kGet));
  std::optional<Response> ok = c.Read();
  ASSERT_TRUE(c.Send(Get("/nope")));
  std::optional<Response> missing = c.Read();
  ASSERT_TRUE(c.Send("GARBAGE\r\n\r\n"));
  std::optional<Response> bad = c.Read();
  time_t now = time(nullptr);
  for (const std::optional<Response>& r : {ok, missing, bad}) {
    ASSERT_TRUE(r.has_value());
    time_t date = ParseImfFixdate(r->Header("date"));
    EXPECT_NE(date, -1) << "Date: \"" << r->Header("date") << "\"";
    EXPECT_LE(std::labs(static_cast<long>(date - now)), 60L)
        << "Date: \"" << r->Header("date") << "\"";
  }
}

// Bytes that cannot start a request get their 400 at once, not at the I/O
// timeout (60 s), which is how long the server waited for an empty line.
TEST_F(HttpServer, NonHttpBytesAre400AtOnce) {
  // The start of a TLS 1.2/1.3 ClientHello: a handshake record (0x16),
  // version 3.1, length 512; a handshake of type 1.
  std::string client_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  client_hello += std::string(32, '\x5a');  // the client's random
  std::string noise(512, '\0');
  std::mt19937 random(20261201);
  for (char& ch : noise) ch = static_cast<char>(random() & 0xff);
  noise[0] = '\x9c';  // whatever the seed gives: not a method's character
  const std::string inputs[] = {client_hello, std::string(4096, '\0'), noise,
                                "GET\t/ HTTP/1.1\r\n", "GET / HTTP/1.1x",
                                "GET / HTTP/1.1\r\r"};
  for (const std::string& input : inputs) {
    Clock::time_point start = Clock::now();
    ASSERT_NO_FATAL_FAILURE(ExpectErrorAndClose(port(), input, 400));
    EXPECT_LT(MillisecondsSince(start), 1000) << "input: " << input.substr(0, 16);
  }
  // A request that arrives in pieces is still fine: every piece so far
  // could be the start of one (RequestArrivingInPiecesIsAssembled).
}

// ---------------------------------------------------------------------------
// Shutdown, one case at a time.

// With only idle connections the server has no reason to use its grace
// period: a long one (30 s), so that "at once" (within 10 s, on a loaded
// machine under a sanitizer) tells the two apart.
TEST(HttpServerShutdown, IdleConnectionsAreClosedAtOnce) {
  Server server(30000);
  ASSERT_NO_FATAL_FAILURE(server.Start());
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 50; i++) {
    idle.push_back(std::make_unique<Connection>(server.port()));
    ASSERT_TRUE(idle.back()->Send(kGet));
    ExpectHello(idle.back()->Read(), "keep-alive");
  }
  ASSERT_NO_FATAL_FAILURE(server.ShutDownCleanly(SIGTERM));
  for (auto& c : idle) EXPECT_TRUE(c->ClosedByServer());
  // Nothing was in flight: no reason to use the grace period.
  EXPECT_LT(server.exit_ms(), 10000);
}

TEST(HttpServerShutdown, SigintWorksLikeSigterm) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Connection c(server.port());
  ASSERT_TRUE(c.Send(kGet));
  ExpectHello(c.Read(), "keep-alive");
  ASSERT_NO_FATAL_FAILURE(server.ShutDownCleanly(SIGINT));
  EXPECT_TRUE(c.ClosedByServer());
}

TEST(HttpServerShutdown, RequestInFlightIsFinished) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Connection busy(server.port());
  Connection idle(server.port());
  ASSERT_TRUE(idle.Send(kGet));
  ExpectHello(idle.Read(), "keep-alive");
  // Half a request, then the signal, then the other half.
  std::string request = kGet;
  ASSERT_TRUE(busy.Send(request.substr(0, 20)));
  std::this_thread::sleep_for(milliseconds(100));  // it reaches the server
  ASSERT_NO_FATAL_FAILURE(server.Signal(SIGTERM));
  EXPECT_TRUE(idle.ClosedByServer());
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_TRUE(busy.Send(request.substr(20)));
  ExpectHello(busy.Read(), "close");  // finished, and told it is the last
  EXPECT_TRUE(busy.ClosedByServer());
  ASSERT_TRUE(server.WaitForExit(milliseconds(server.grace_ms()) + kSlack));
  EXPECT_EQ(server.exit_status(), 0) << server.output();
  EXPECT_NE(server.output().find("abandoned:             0\n"),
            std::string::npos) << server.output();
}

TEST(HttpServerShutdown, PipelinedRequestsBeforeTheSignalAreAllAnswered) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Connection c(server.port());
  ASSERT_TRUE(c.Send(kGet));
  ExpectHello(c.Read(), "keep-alive");
  std::string batch;
  for (int i = 0; i < 10; i++) batch += kGet;
  ASSERT_TRUE(c.Send(batch));
  ASSERT_NO_FATAL_FAILURE(server.Signal(SIGTERM));
  for (int i = 0; i < 9; i++) ExpectHello(c.Read(), "keep-alive");
  // The last says "close" if the close came before the server reached it;
  // otherwise the connection is closed as idle right after.
  std::optional<Response> last = c.Read();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->body, "hello\n");
  EXPECT_TRUE(c.ClosedByServer());
  ASSERT_TRUE(server.WaitForExit(milliseconds(server.grace_ms()) + kSlack));
  EXPECT_EQ(server.exit_status(), 0) << server.output();
}

// The server gives a request in flight until nine tenths of its grace
// period, then drops it itself (nothing abandoned). The default 5 s grace
// leaves its last tenth, 500 ms, for that last step on a loaded machine.
TEST(HttpServerShutdown, StalledRequestIsDroppedWithinTheGracePeriod) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Connection c(server.port());
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: te"));  // and never the rest
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_NO_FATAL_FAILURE(server.ShutDownCleanly(SIGTERM));
  EXPECT_TRUE(c.ClosedByServer());  // no answer to half a request
  // It waited for the rest of the request (it would have closed it at once
  // as idle otherwise), and did not go past the grace period (it exited
  // within it plus slack, with nothing abandoned: ShutDownCleanly).
  EXPECT_GE(server.exit_ms(), server.grace_ms() / 2);
}

// ---------------------------------------------------------------------------
// A client that pipelines without pause, and the others.

// One connection that pipelines GETs without pause: a writer thread sends
// 256 KiB batches of them back to back, a reader thread takes the answers
// as fast as they come, so the server never has to wait for this socket.
// Until Stop(), or until the server closes the connection.
class Flooder {
 public:
  explicit Flooder(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 ||
        connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "cannot connect: " << std::strerror(errno);
      return;
    }
    std::string batch;
    while (batch.size() < 256 * 1024) batch += kGet;
    writer_ = std::thread([this, batch] {
      while (!stop_) {
        for (size_t sent = 0; sent < batch.size() && !stop_;) {
          ssize_t n = send(fd_, batch.data() + sent, batch.size() - sent,
                           MSG_NOSIGNAL);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return;  // closed by the server, or Stop()
          sent += static_cast<size_t>(n);
        }
      }
    });
    reader_ = std::thread([this] {
      char chunk[65536];
      for (;;) {
        ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        received_ += static_cast<uint64_t>(n);
      }
    });
  }
  Flooder(const Flooder&) = delete;
  Flooder& operator=(const Flooder&) = delete;
  ~Flooder() { Stop(); }

  // True once the answers flow (a first megabyte of them), within 30 s.
  bool WaitUntilFlowing() {
    Clock::time_point until = Clock::now() + milliseconds(30000);
    while (received_ < 1024 * 1024) {
      if (Clock::now() >= until) return false;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return true;
  }

  uint64_t received() const { return received_; }

  void Stop() {
    if (fd_ < 0) return;
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);  // ends the blocked send() and recv()
    if (writer_.joinable()) writer_.join();
    if (reader_.joinable()) reader_.join();
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> received_{0};
  std::thread writer_, reader_;
};

// While one client floods, a new client's GET (connect, ask, answer) still
// comes back promptly: the flooding connection yields between requests.
// Without that it kept the pump until its socket ran dry, which it never
// did: other clients waited seconds (here: no answer within 10 s). The
// bound is generous (sanitizers, a loaded machine, one core); the figures
// go to the log.
TEST(HttpServerFairness, PipeliningClientDoesNotDelayTheOthers) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Flooder flood(server.port());
  ASSERT_TRUE(flood.WaitUntilFlowing()) << "the flood never got going";
  std::vector<long> micros;
  for (int i = 0; i < 20; i++) {
    Clock::time_point start = Clock::now();
    Connection c(server.port());
    ASSERT_TRUE(c.Send(kGet));
    std::optional<Response> r = c.Read();
    ASSERT_TRUE(r.has_value()) << "no answer within " << kReadTimeoutMs << " ms";
    EXPECT_EQ(r->status, 200);
    micros.push_back(static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start)
            .count()));
    std::this_thread::sleep_for(milliseconds(10));
  }
  uint64_t flooded = flood.received();
  flood.Stop();
  std::sort(micros.begin(), micros.end());
  std::printf("other clients during the flood: median %.1f ms, max %.1f ms; "
              "%.1f MB of answers to the flooder\n",
              micros[micros.size() / 2] / 1e3, micros.back() / 1e3,
              static_cast<double>(flooded) / 1e6);
  // Under Valgrind this client's threads take turns on one lock.
  long bound_ms = UnderValgrind() ? 1000 : 200;
  EXPECT_LT(micros.back(), bound_ms * 1000) << "a client waited behind the flooder";
  ASSERT_NO_FATAL_FAILURE(server.ShutDownCleanly());
}

// SIGTERM while a client floods: that connection answers what had arrived
// and then says "Connection: close", so the server still exits within its
// grace period (a short one here, 1 s) plus a small margin. It used to
// serve the flood for as long as it lasted.
// The flooding client never closes its side, so the lingering close after
// the last answer lasts until the drain deadline (nine tenths of the grace
// period), and the pump then has the last tenth to finish. 2 s of grace
// leave it 200 ms. (With 1 s, 100 ms, the test failed once on a loaded
// machine; which check failed was not kept.)
TEST(HttpServerFairness, GracePeriodHoldsUnderAPipeliningClient) {
  Server server(2000);
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Flooder flood(server.port());
  ASSERT_TRUE(flood.WaitUntilFlowing()) << "the flood never got going";
  ASSERT_NO_FATAL_FAILURE(server.Signal(SIGTERM));
  bool exited = server.WaitForExit(milliseconds(server.grace_ms()) + kSlack);
  flood.Stop();
  ASSERT_TRUE(exited) << "still running " << server.grace_ms() << " ms + "
                      << kSlack.count() << " ms after the signal";
  EXPECT_EQ(server.exit_status(), 0) << server.output();
  EXPECT_LT(server.exit_ms(), server.grace_ms() + 1500) << server.output();
  EXPECT_NE(server.output().find("abandoned:             0\n"),
            std::string::npos) << server.output();
  std::printf("exit %ld ms after the signal (grace %d ms)\n%s",
              server.exit_ms(), server.grace_ms(), server.output().c_str());
}

// The scheduler's count of resumes, from the report; -1 if it is missing.
long long ResumesReported(const std::string& output) {
  size_t at = output.find("resumes:");
  if (at == std::string::npos) return -1;
  return std::atoll(output.c_str() + at + std::strlen("resumes:"));
}

// After the close a coroutine cannot park, so a drain that waits for a
// socket by yielding and retrying spins: with one half-sent request head
// held open, the pump ran at 100% CPU, millions of resumes, until the end
// of the grace period. The drain must sleep instead. A few hundred resumes
// are plenty for what the server does here; the spin made millions.
TEST(HttpServerShutdown, DrainSleepsWhileARequestIsHalfSent) {
  Server server(2000);
  ASSERT_NO_FATAL_FAILURE(server.Start());
  Connection c(server.port());
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: te"));  // and never the rest
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_NO_FATAL_FAILURE(server.ShutDownCleanly(SIGTERM));
  EXPECT_TRUE(c.ClosedByServer());
  EXPECT_GE(server.exit_ms(), server.grace_ms() / 2);  // it did wait
  long long resumes = ResumesReported(server.output());
  EXPECT_GE(resumes, 0) << server.output();
  EXPECT_LT(resumes, 10000) << server.output();
}

// Out of descriptors: the server says so in its log, keeps serving the
// connections it has, refuses the clients it cannot take (they see their
// connection end instead of hanging), and serves new ones again once
// descriptors are free.
// A keep-alive client between two requests holds no buffer: its
// connection costs its coroutine (a page of stack in use) and a small
// struct. With 8 + 4 KiB of buffers fixed per connection, as before, the
// server grew by 12.5 KiB per idle client; now by about 4.5.
TEST(HttpServerMemory, IdleKeepAliveConnectionsHoldNoBuffers) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator keeps freed memory resident";
#endif
  constexpr int kClients = 400;
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  const long before = server.ResidentKib();
  std::vector<std::unique_ptr<Connection>> clients;
  for (int i = 0; i < kClients; i++) {
    clients.push_back(std::make_unique<Connection>(server.port()));
    ASSERT_TRUE(clients.back()->Send(kGet));
  }
  for (auto& c : clients) ExpectHello(c->Read(), "keep-alive");
  std::this_thread::sleep_for(milliseconds(100));  // every one waits again
  const long after = server.ResidentKib();
  ASSERT_GT(before, 0);
  ASSERT_GT(after, 0);
  const double per_client = double(after - before) / kClients;
  EXPECT_LT(per_client, 8.0)
      << "KiB resident per idle keep-alive connection (" << before << " -> "
      << after << " KiB for " << kClients << ")";
  clients.clear();
  server.ShutDownCleanly();
}

TEST(HttpServerFairness, DescriptorExhaustionIsLoggedAndSurvived) {
  constexpr int kLimit = 64;     // descriptors the server may have
  constexpr int kClients = 100;  // more than fit
  Server server;
  server.LimitDescriptors(kLimit);
  server.CaptureStderr();
  ASSERT_NO_FATAL_FAILURE(server.Start());
  std::vector<std::unique_ptr<Connection>> clients;
  for (int i = 0; i < kClients; i++) {
    clients.push_back(std::make_unique<Connection>(server.port()));
    ASSERT_TRUE(clients.back()->Send(kGet));
  }
  int served = 0, refused = 0;
  for (auto& c : clients) {
    if (c->Read().has_value()) {
      served++;
    } else if (c->ClosedByServer()) {
      refused++;
    } else {
      ADD_FAILURE() << "client " << served + refused
                    << " got neither an answer nor a close: it hangs";
      break;
    }
  }
  EXPECT_GT(served, 0);
  EXPECT_GT(refused, 0);
  // The served ones are still served.
  ASSERT_TRUE(clients.front()->Send(kGet));
  ExpectHello(clients.front()->Read(), "keep-alive");
  clients.clear();
  // Once their descriptors are closed, a new client is served. (The
  // server sees the closes a moment later: retry for a while.)
  bool served_again = false;
  for (int attempt = 0; attempt < 100 && !served_again; attempt++) {
    Connection c(server.port());
    served_again = c.Send(kGet) && c.Read().has_value();
    if (!served_again) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(served_again);
  ASSERT_NO_FATAL_FAILURE(server.ShutDownCleanly());
  EXPECT_NE(server.output().find("out of file descriptors"), std::string::npos)
      << server.output();
  std::printf("served %d, refused %d of %d clients under a limit of %d\n%s",
              served, refused, kClients, kLimit, server.output().c_str());
}

// ---------------------------------------------------------------------------
// SIGTERM in the middle of the traffic of 200 keep-alive connections.

// One client connection of the load test, driven by epoll.
struct LoadConnection {
  struct Pending {
    uint64_t end;        // offset just past the request in the byte stream
    bool before_signal;  // all of it was sent before the signal
  };

  int fd = -1;
  int depth = 1;  // requests sent back to back (pipelined) per round
  std::string unsent;
  std::string received;
  uint64_t queued = 0;  // bytes of requests queued, ever
  uint64_t sent = 0;    // bytes of requests sent, ever
  std::deque<Pending> pending;
  int answered = 0;
  bool last = false;    // the server answered "Connection: close"
  bool closed = false;  // by the server: end of stream or reset
};

class LoadTest {
 public:
  static constexpr int kConnections = 200;

  explicit LoadTest(int port) : port_(port) {}

  ~LoadTest() {
    for (LoadConnection& c : conns_)
      if (c.fd >= 0) close(c.fd);
    if (epoll_ >= 0) close(epoll_);
  }

  void Connect() {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(epoll_, 0);
    conns_.resize(kConnections);
    for (int i = 0; i < kConnections; i++) {
      LoadConnection& c = conns_[i];
      c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr = {};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port_));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
          << std::strerror(errno);
      int one = 1;
      setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
      epoll_event ev = {};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.u32 = static_cast<uint32_t>(i);
      ASSERT_EQ(epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev), 0);
      c.depth = i % 4 == 3 ? 3 : 1;  // a quarter of them pipeline
      SendRound(c);
    }
  }

  // Runs the traffic; `signal` is called once every connection has had
  // `answers_first` answers. Returns when the server has closed every
  // connection, or at `deadline` after the signal.
  template <typename SignalFn>
  void Run(int answers_first, SignalFn signal, milliseconds deadline) {
    int open = kConnections;
    int warmed_up = 0;
    Clock::time_point signaled_at;
    while (open > 0) {
      if (!signaled_ && warmed_up == kConnections) {
        signal();
        signaled_at = Clock::now();
        MarkSentBeforeSignal();
      }
      if (signaled_ && Clock::now() - signaled_at > deadline) {
        ADD_FAILURE() << open << " connections still open "
                      << deadline.count() << " ms after the signal";
        return;
      }
      epoll_event events[256];
      int n = epoll_wait(epoll_, events, 256, 100);
      ASSERT_GE(n, 0) << std::strerror(errno);
      for (int i = 0; i < n; i++) {
        LoadConnection& c = conns_[events[i].data.u32];
        int before = c.answered;
        if (events[i].events & EPOLLOUT) Flush(c);
        ReceiveAndCheck(c);
        if (before < answers_first && c.answered >= answers_first) warmed_up++;
        if (c.closed) {
          CheckClosed(c);
          close(c.fd);
          c.fd = -1;
          open--;
        }
      }
    }
  }

  int in_flight_at_signal() const { return in_flight_at_signal_; }
  int answered_before() const { return answered_before_; }
  int answered_after() const { return answered_after_; }
  int refused_after() const { return refused_after_; }

 private:
  void SendRound(LoadConnection& c) {
    for (int i = 0; i < c.depth; i++) {
      c.unsent += kGet;
      c.queued += sizeof kGet - 1;
      c.pending.push_back({c.queued, false});
    }
    Flush(c);
  }

  void Flush(LoadConnection& c) {
    while (!c.unsent.empty()) {
      ssize_t n = send(c.fd, c.unsent.data(), c.unsent.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // EAGAIN: EPOLLOUT below; an error: recv sees it
      c.unsent.erase(0, static_cast<size_t>(n));
      c.sent += static_cast<uint64_t>(n);
    }
    epoll_event ev = {};
    ev.events = EPOLLIN | EPOLLRDHUP | (c.unsent.empty() ? 0u : EPOLLOUT);
    ev.data.u32 = static_cast<uint32_t>(&c - conns_.data());
    epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  void MarkSentBeforeSignal() {
    signaled_ = true;
    for (LoadConnection& c : conns_)
      for (LoadConnection::Pending& p : c.pending)
        if (p.end <= c.sent) {
          p.before_signal = true;
          in_flight_at_signal_++;
        }
  }

  void ReceiveAndCheck(LoadConnection& c) {
    char chunk[16384];
    for (;;) {
      ssize_t n = recv(c.fd, chunk, sizeof chunk, 0);
      if (n > 0) {
        c.received.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      c.closed = true;  // end of stream, or reset
      break;
    }
    Response r;
    Parse p;
    while ((p = ParseResponse(&c.received, false, &r)) == Parse::kComplete) {
      if (c.pending.empty() || c.last) {
        ADD_FAILURE() << "an answer nobody asked for";
        return;
      }
      LoadConnection::Pending request = c.pending.front();
      c.pending.pop_front();
      c.answered++;
      if (request.before_signal || !signaled_)
        answered_before_++;
      else
        answered_after_++;
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.body, "hello\n");
      c.last = r.Header("connection") == "close";
      EXPECT_TRUE(c.last || r.Header("connection") == "keep-alive");
      EXPECT_TRUE(!c.last || signaled_) << "closed before the signal";
    }
    EXPECT_NE(p, Parse::kMalformed) << "garbled answer: " << c.received.substr(0, 200);
    if (!c.closed && !c.last && c.pending.empty()) SendRound(c);
  }

  void CheckClosed(LoadConnection& c) {
    EXPECT_TRUE(signaled_) << "the server closed a connection before the signal";
    EXPECT_TRUE(c.received.empty())
        << "the connection ended in the middle of an answer: \""
        << c.received.substr(0, 200) << "\"";
    for (const LoadConnection::Pending& p : c.pending) {
      EXPECT_FALSE(p.before_signal)
          << "a request sent before the signal got no answer";
      if (!p.before_signal) refused_after_++;
    }
  }

  int port_;
  int epoll_ = -1;
  std::vector<LoadConnection> conns_;
  bool signaled_ = false;
  int in_flight_at_signal_ = 0;
  int answered_before_ = 0;
  int answered_after_ = 0;
  int refused_after_ = 0;
};

TEST(HttpServerShutdown, SigtermUnderLoadLosesNoRequest) {
  Server server;
  ASSERT_NO_FATAL_FAILURE(server.Start());
  LoadTest load(server.port());
  ASSERT_NO_FATAL_FAILURE(load.Connect());
  int answers_first = UnderValgrind() ? 3 : 30;
  ASSERT_NO_FATAL_FAILURE(load.Run(
      answers_first, [&server] { server.Signal(SIGTERM); },
      milliseconds(server.grace_ms()) + kSlack));
  ASSERT_TRUE(server.WaitForExit(milliseconds(server.grace_ms()) + kSlack))
      << "the server did not exit";
  EXPECT_EQ(server.exit_status(), 0) << server.output();
  EXPECT_LT(server.exit_ms(), server.grace_ms() + kSlack.count());
  EXPECT_NE(server.output().find("abandoned:             0\n"),
            std::string::npos) << server.output();
  // The test tested something: requests were in flight at the signal.
  EXPECT_GT(load.in_flight_at_signal(), 0);
  std::printf("in flight at the signal: %d; answered before/after: %d/%d; "
              "refused after: %d; exit after %ld ms\n%s",
              load.in_flight_at_signal(), load.answered_before(),
              load.answered_after(), load.refused_after(), server.exit_ms(),
              server.output().c_str());
}

}  // namespace
