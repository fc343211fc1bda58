#pragma once
// The socket calls of the HTTP front: an owned file descriptor, a listening socket that refuses
// a busy port, and writes and liveness checks bounded by a deadline.
#include <chrono>
#include <string>
#include <string_view>

namespace handoff::serve {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor and closes it.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// A non-blocking TCP socket bound to host:port (port 0: any free port), not yet listening, so a
// server can claim its port before a long load and accept only once it can answer.
// SO_REUSEADDR only (a restart may bind over TIME_WAIT); never SO_REUSEPORT, so a port another
// server holds is refused: InputError naming host:port.
FileDescriptor bind_tcp(const std::string& host, int port);
// Starts accepting on a bound socket with the kernel's largest backlog (SOMAXCONN). Two
// servers may both bind over SO_REUSEADDR while neither listens yet; the second to listen gets
// the same InputError naming `where` (host:port).
void start_listening(int fd, const std::string& where);
// The port a socket is bound to.
int bound_port(int fd);
void set_nonblocking(int fd);

// Writes all of `data` to a non-blocking socket; false when the peer is gone or `deadline`
// passes first.
bool write_all(int fd, std::string_view data, Clock::time_point deadline);
// True when the peer closed or reset the connection (checked without blocking or reading).
bool peer_gone(int fd);

}  // namespace handoff::serve
