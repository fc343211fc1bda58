#pragma once
// Runs `handoff serve` as a child process on a free loopback port for a test, and talks raw
// HTTP/1.1 to it over sockets (so tests can be as slow, partial or hostile as a client can).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

namespace handoff::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline const std::string kServeModel = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_tiny_sparse";

class ServeProcess {
 public:
  // Starts `handoff serve --model <tiny> --port 0 <args>` and waits until it listens.
  // `model`: another model folder (e.g. one with a tokenizer) instead of the tiny one.
  explicit ServeProcess(const std::string& args, const std::string& model = kServeModel) {
    static int counter = 0;
    log_path_ = (std::filesystem::temp_directory_path() /
                 ("handoff_serve_test_" + std::to_string(::getpid()) + "_" +
                  std::to_string(counter++) + ".log"))
                    .string();
    const std::string command = std::string("exec ") + HANDOFF_BINARY + " serve --model " + model +
                                " --port 0 --dtype f32 --threads 1 " + args;
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, listening)) {
        port_ = std::stoi(m[1]);
        return;
      }
      if (wait(milliseconds(0)) >= 0) return;  // exited: port_ stays 0
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  ~ServeProcess() {
    if (exit_code_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(log_path_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  void signal(int sig) { ::kill(pid_, sig); }
  // The exit code once the server exited within `timeout`, else -1.
  int wait(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (exit_code_ < 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (Clock::now() >= deadline) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return exit_code_;
  }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string log_path_;
};

// A client socket connected to 127.0.0.1:port whose reads and writes give up after `timeout`.
class ClientSocket {
 public:
  ClientSocket(int port, milliseconds timeout = milliseconds(5000)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~ClientSocket() { close(); }
  ClientSocket(const ClientSocket&) = delete;
  ClientSocket& operator=(const ClientSocket&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send(const std::string& data) {
    size_t at = 0;
    while (at < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  // Appends what arrives to `received`; false on close, error or timeout.
  bool read_some() {
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    received.append(buffer, static_cast<size_t>(n));
    return true;
  }
  // Reads until `text` arrived (true) or the connection ends or times out (false).
  bool read_until(const std::string& text) {
    while (received.find(text) == std::string::npos)
      if (!read_some()) return false;
    return true;
  }
  // Reads until the server closes (or the read times out).
  void read_all() {
    while (read_some()) {
    }
  }
  // Reads one whole response (Content-Length or chunked) and removes it from `received`.
  std::string read_response() {
    if (!read_until("\r\n\r\n")) return take(received.size());
    const size_t head_end = received.find("\r\n\r\n") + 4;
    const std::string head = received.substr(0, head_end);
    // No std::regex here: its locale cache is a (benign) data race under ThreadSanitizer.
    const size_t length_at = head.find("Content-Length: ");
    if (length_at != std::string::npos) {
      const size_t total = head_end + std::stoul(head.substr(length_at + 16));
      while (received.size() < total)
        if (!read_some()) break;
      return take(std::min(total, received.size()));
    }
    if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
      read_until("\r\n0\r\n\r\n");
      const size_t end = received.find("\r\n0\r\n\r\n");
      return take(end == std::string::npos ? received.size() : end + 7);
    }
    read_all();
    return take(received.size());
  }

  std::string received;

 private:
  std::string take(size_t n) {
    std::string out = received.substr(0, n);
    received.erase(0, n);
    return out;
  }
  int fd_ = -1;
  bool connected_ = false;
};

inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

inline std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// One request on a fresh connection; the whole response text ("" when none came).
inline std::string http(int port, const std::string& request,
                        milliseconds timeout = milliseconds(5000)) {
  ClientSocket c(port, timeout);
  if (!c.connected() || !c.send(request)) return "";
  return c.read_response();
}

inline std::string get(int port, const std::string& path, const std::string& headers = "") {
  return http(port, "GET " + path + " HTTP/1.1\r\nHost: t\r\n" + headers + "\r\n");
}

inline std::string post_request(const std::string& path, const std::string& body,
                                const std::string& headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace handoff::testing
