#include "handoff/serve/http_connection_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "handoff/error.h"
#include "handoff/log.h"

namespace handoff::serve {

struct HttpConnection {
  enum class Phase {
    kReading,  // waiting for (the rest of) a request
    kWriting,  // the I/O thread's answer is in `out`
    kClosing,  // answered; the write side is shut, the rest of the input is discarded
  };
  HttpConnection(FileDescriptor socket, const HttpLimits& limits)
      : fd(std::move(socket)), parser(limits) {}

  FileDescriptor fd;
  std::string in, out;
  HttpRequestParser parser;
  Phase phase = Phase::kReading;
  Clock::time_point deadline;
  int served = 0;
  bool keep_alive = false;  // after `out` is written: read the next request, or close
  bool counted = true;      // inside the connection cap (a refused connection is not)
};

namespace {

using Phase = HttpConnection::Phase;

// How long a closing connection's unread input is discarded, so that the client reads the
// error instead of a reset; and how long a refused connection may take to read its 503.
constexpr std::chrono::milliseconds kLinger{2000};
constexpr std::chrono::milliseconds kRefusedWrite{1000};
// Deadlines are checked this often; they are precise to about this much.
constexpr int kTickMs = 100;
// Bytes one readable event may take from one connection before others get their turn.
constexpr size_t kReadPerEvent = size_t{1} << 20;
// File descriptors besides connections: the model's files, epoll, logs, ...
constexpr rlim_t kSpareFiles = 128;

}  // namespace

void reserve_files_for_connections(int max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t want = static_cast<rlim_t>(max_connections) * 2 + kSpareFiles;
  if (limit.rlim_cur >= want) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? want : std::min(want, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < static_cast<rlim_t>(max_connections) + kSpareFiles)
    fail_input(
        "--max-connections {} needs at least {} open files but the hard limit is {} "
        "(ulimit -Hn)",
        max_connections, max_connections + kSpareFiles, limit.rlim_max);
}

// --- HttpExchange ---

HttpExchange::HttpExchange(HttpConnection& connection, std::chrono::milliseconds write_timeout,
                           bool keep_alive, const std::atomic<bool>& stopping)
    : connection_(connection),
      write_timeout_(write_timeout),
      keep_alive_(keep_alive),
      stopping_(stopping) {}

const HttpRequest& HttpExchange::request() const { return connection_.parser.request(); }

bool HttpExchange::write(std::string_view bytes) {
  if (failed_) return false;
  if (!write_all(connection_.fd.get(), bytes, Clock::now() + write_timeout_)) failed_ = true;
  return !failed_;
}

bool HttpExchange::send(const HttpResponse& response) {
  responded_ = finished_ = true;
  return write(serialize(response, keep_alive_));
}

bool HttpExchange::start_stream(int status, std::string_view content_type,
                                const HttpHeaders& headers) {
  responded_ = true;
  return write(chunked_head(status, content_type, headers, keep_alive_));
}

bool HttpExchange::send_chunk(std::string_view data) { return data.empty() || write(chunk(data)); }

bool HttpExchange::end_stream() {
  finished_ = true;
  return write(kLastChunk);
}

bool HttpExchange::client_gone() const {
  return failed_ || stopping_ || peer_gone(connection_.fd.get());
}

// --- HttpConnectionLoop ---

HttpConnectionLoop::HttpConnectionLoop(const HttpLoopOptions& options, InlineHandler answer_inline,
                                       WorkerHandler answer_on_worker,
                                       ErrorResponder error_response)
    : options_(options),
      answer_inline_(std::move(answer_inline)),
      answer_on_worker_(std::move(answer_on_worker)),
      error_response_(std::move(error_response)) {
  reserve_files_for_connections(options_.max_connections);
  epoll_ = FileDescriptor(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = FileDescriptor(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) fail("epoll / eventfd: {}", std::strerror(errno));
}

HttpConnectionLoop::~HttpConnectionLoop() {
  stop();
  {
    std::lock_guard lock(mutex_);
    workers_stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
}

void HttpConnectionLoop::stop() {
  stop_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void HttpConnectionLoop::run(FileDescriptor listener) {
  listener_ = std::move(listener);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener_.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  ev.data.fd = wake_.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  workers_stopping_ = false;
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { work(); });

  std::array<epoll_event, 256> events{};
  while (!stop_) {
    const int n =
        ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), kTickMs);
    if (n < 0 && errno != EINTR) fail("epoll_wait: {}", std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener_.get()) {
        accept_all();
      } else if (fd == wake_.get()) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_.get(), &count, sizeof count);
        take_returned();
      } else {
        on_event(fd, events[i].events);
      }
    }
    sweep();
  }

  // Stopping: no new connections; workers finish what they hold, queued requests included.
  listener_ = FileDescriptor();
  {
    std::lock_guard lock(mutex_);
    workers_stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  open_ -= static_cast<int64_t>(returned_.size());
  returned_.clear();
  for (auto& [fd, c] : connections_)
    if (c->counted) --open_;
  connections_.clear();
}

void HttpConnectionLoop::watch(Connection& c, bool add) {
  epoll_event ev{};
  ev.data.fd = c.fd.get();
  ev.events = c.phase == Phase::kWriting ? 0u : EPOLLIN | EPOLLRDHUP;
  if (!c.out.empty()) ev.events |= EPOLLOUT;
  ::epoll_ctl(epoll_.get(), add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd.get(), &ev);
}

void HttpConnectionLoop::close(int fd) {
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  if (it->second->counted)
    --open_;
  else
    --refusing_;
  connections_.erase(it);  // closing the socket also takes it out of the epoll set
}

void HttpConnectionLoop::accept_all() {
  const auto now = Clock::now();
  if (now < accept_paused_until_) return;
  while (true) {
    FileDescriptor socket(
        ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!socket.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of files: leave the backlog alone for a tick rather than spin on it.
        log::warn("accept: {}; pausing new connections", std::strerror(errno));
        accept_paused_until_ = now + std::chrono::milliseconds(kTickMs);
        epoll_event ev{};
        ev.data.fd = listener_.get();
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
      }
      return;
    }
    const int on = 1;  // stream events go out as they are written
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    const int fd = socket.get();
    auto c = std::make_unique<Connection>(std::move(socket), options_.limits);
    Connection& conn = *c;
    if (open_ >= options_.max_connections) {
      if (refusing_ >= options_.max_connections) continue;  // closed without a word
      conn.counted = false;
      ++refusing_;
      connections_.emplace(fd, std::move(c));
      reply(conn,
            error_response_({503, fmt::format("the server is at its limit of {} connections",
                                              options_.max_connections)}),
            false);
      conn.deadline = now + kRefusedWrite;
      if (flush(conn)) watch(conn, true);
      continue;
    }
    ++open_;
    conn.deadline = now + options_.header_timeout;
    connections_.emplace(fd, std::move(c));
    watch(conn, true);
  }
}

void HttpConnectionLoop::on_event(int fd, uint32_t events) {
  const auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  if ((events & EPOLLERR) != 0) return close(fd);
  if ((events & EPOLLOUT) != 0 && !c.out.empty()) {
    if (!flush(c)) return;
  }
  bool eof = false;
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) != 0 && c.phase != Phase::kWriting) {
    std::array<char, 65536> buffer{};
    size_t taken = 0;
    while (taken < kReadPerEvent) {
      const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
      if (n > 0) {
        if (c.phase == Phase::kReading) c.in.append(buffer.data(), static_cast<size_t>(n));
        taken += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // closed (0) or reset
      break;
    }
  } else if ((events & EPOLLHUP) != 0) {
    return close(fd);
  }
  // New bytes, or a pipelined request left waiting while the previous answer was written.
  if (c.phase == Phase::kReading && !c.in.empty()) {
    process(c);
    if (connections_.find(fd) == connections_.end()) return;  // handed off or closed
  }
  // A client that stops sending before a whole request gets no answer: nothing to answer.
  if (eof && (c.phase != Phase::kWriting || c.out.empty())) return close(fd);
  watch(c, false);
}

void HttpConnectionLoop::process(Connection& c) {
  while (c.phase == Phase::kReading) {
    const bool was_started = c.parser.started();
    const bool had_head = c.parser.head_complete();
    const auto status = c.parser.feed(c.in);
    const auto now = Clock::now();
    // Absolute deadlines: a keep-alive connection's head clock starts at its first byte, the
    // body's at the end of the head. Trickling bytes never extends either.
    if (!was_started && c.parser.started() && c.served > 0)
      c.deadline = now + options_.header_timeout;
    if (!had_head && c.parser.head_complete() && status == HttpRequestParser::Status::kNeedMore) {
      c.deadline = now + options_.body_timeout;
      if (c.parser.expects_continue()) c.out += "HTTP/1.1 100 Continue\r\n\r\n";
    }
    if (status == HttpRequestParser::Status::kNeedMore) {
      if (!c.out.empty()) flush(c);
      return;
    }
    if (status == HttpRequestParser::Status::kError) {
      reply(c, error_response_(c.parser.error()), false);
      flush(c);
      return;
    }
    const HttpRequest& request = c.parser.request();
    ++c.served;
    const bool keep_alive = request.keep_alive && !draining_ && !stop_ &&
                            c.served < options_.max_requests_per_connection;
    std::optional<HttpResponse> response = answer_inline_(request);
    if (!response) return hand_to_worker(c, keep_alive);
    reply(c, *response, keep_alive);
    if (!flush(c)) return;
  }
}

void HttpConnectionLoop::reply(Connection& c, const HttpResponse& response, bool keep_alive) {
  c.out += serialize(response, keep_alive);
  c.keep_alive = keep_alive;
  c.phase = Phase::kWriting;
  c.deadline = Clock::now() + options_.write_timeout;
}

bool HttpConnectionLoop::flush(Connection& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // EPOLLOUT resumes
    close(c.fd.get());
    return false;
  }
  if (c.phase != Phase::kWriting) return true;
  if (!c.keep_alive) {
    start_closing(c);
    return true;
  }
  c.parser.reset();
  c.phase = Phase::kReading;
  c.deadline = Clock::now() + options_.idle_timeout;
  return true;
}

void HttpConnectionLoop::start_closing(Connection& c) {
  ::shutdown(c.fd.get(), SHUT_WR);
  c.phase = Phase::kClosing;
  c.in.clear();
  c.deadline = Clock::now() + kLinger;
}

void HttpConnectionLoop::hand_to_worker(Connection& c, bool keep_alive) {
  const int fd = c.fd.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  const auto it = connections_.find(fd);
  std::unique_ptr<Connection> owned = std::move(it->second);
  connections_.erase(it);
  owned->keep_alive = keep_alive;
  {
    std::lock_guard lock(mutex_);
    queued_.push_back(std::move(owned));
  }
  work_ready_.notify_one();
}

void HttpConnectionLoop::take_returned() {
  std::vector<std::unique_ptr<Connection>> back;
  {
    std::lock_guard lock(mutex_);
    back.swap(returned_);
  }
  const auto now = Clock::now();
  for (auto& owned : back) {
    Connection& c = *owned;
    const int fd = c.fd.get();
    c.deadline = now + options_.idle_timeout;
    connections_.emplace(fd, std::move(owned));
    watch(c, true);
    if (!c.in.empty()) {  // a pipelined request arrived with the previous one
      process(c);
      if (connections_.count(fd) != 0) watch(c, false);
    }
  }
}

void HttpConnectionLoop::sweep() {
  const auto now = Clock::now();
  if (now - last_sweep_ < std::chrono::milliseconds(kTickMs)) return;
  last_sweep_ = now;
  if (accept_paused_until_ != Clock::time_point{} && now >= accept_paused_until_) {
    accept_paused_until_ = {};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listener_.get();
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev);
  }
  std::vector<int> expired;
  for (const auto& [fd, c] : connections_) {
    const bool idle = c->phase == Phase::kReading && !c->parser.started();
    if (now >= c->deadline || (draining_ && idle)) expired.push_back(fd);
  }
  for (const int fd : expired) {
    Connection& c = *connections_.at(fd);
    if (c.phase != Phase::kReading || !c.parser.started()) {
      close(fd);  // idle keep-alive, a stalled write, or the end of a linger
      continue;
    }
    const bool in_body = c.parser.head_complete();
    reply(c,
          error_response_(
              {408,
               fmt::format("the request {} did not arrive within {} ms", in_body ? "body" : "head",
                           (in_body ? options_.body_timeout : options_.header_timeout).count())}),
          false);
    if (flush(c)) watch(c, false);
  }
}

void HttpConnectionLoop::work() {
  while (true) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return workers_stopping_ || !queued_.empty(); });
      if (queued_.empty()) return;
      c = std::move(queued_.front());
      queued_.pop_front();
    }
    HttpExchange exchange(*c, options_.write_timeout, c->keep_alive, stop_);
    try {
      answer_on_worker_(exchange);
    } catch (const std::exception& e) {
      log::warn("{} {}: {}", exchange.request().method, exchange.request().path, e.what());
      if (!exchange.responded()) exchange.send(error_response_({500, e.what()}));
    }
    if (!exchange.reusable() || stop_) {
      --open_;
      continue;  // `c` closes its socket
    }
    c->parser.reset();
    c->phase = Phase::kReading;
    {
      std::lock_guard lock(mutex_);
      returned_.push_back(std::move(c));
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
  }
}

}  // namespace handoff::serve
