#include "handoff/cli/server_probes.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "handoff/error.h"

namespace handoff::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A header that never ends: the request line, then one endless header value.
std::string slow_header(const LoopbackTarget& t) {
  std::string h = "GET /health HTTP/1.1\r\nHost: " + t.host + "\r\nX-Slow: ";
  h.append(4096, 'a');
  return h;
}

double gauge(std::string_view text, std::string_view name) {
  size_t at = 0;
  while ((at = text.find(name, at)) != std::string_view::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    size_t after = at + name.size();
    // The series' labels (the server's model_name), if any.
    if (line_start && after < text.size() && text[after] == '{') {
      const size_t close = text.find('}', after);
      if (close == std::string_view::npos) return -1;
      after = close + 1;
    }
    if (line_start && after < text.size() && text[after] == ' ') {
      const size_t end = text.find('\n', after);
      const std::string value(text.substr(
          after + 1, end == std::string_view::npos ? std::string_view::npos : end - after - 1));
      try {
        return std::stod(value);
      } catch (const std::exception&) {
        return -1;
      }
    }
    at = after;
  }
  return -1;
}

}  // namespace

LoopbackTarget loopback_target(const std::string& url) {
  static const std::regex form(
      R"(^http://(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d{1,5})/?$)");
  std::smatch m;
  if (!std::regex_match(url, m, form))
    fail_input(
        "--url must be http://HOST:PORT on loopback (127.x.x.x, localhost or [::1]), got '{}'",
        url);
  LoopbackTarget t;
  t.host = m[1].str();
  t.port = std::stoi(m[2].str());
  if (t.port < 1 || t.port > 65535) fail_input("--url port must be in [1, 65535], got {}", t.port);
  t.url = fmt::format("http://{}:{}", t.host, t.port);
  return t;
}

MetricsSnapshot parse_metrics(std::string_view text) {
  MetricsSnapshot s;
  s.available = true;
  s.rss_bytes = gauge(text, "process_resident_memory_bytes");
  s.cache_blocks_used = gauge(text, "handoff_kv_cache_blocks_used");
  s.running = gauge(text, "handoff_num_requests_running");
  s.waiting = gauge(text, "handoff_num_requests_waiting");
  return s;
}

MetricsSnapshot scrape_metrics(const LoopbackTarget& target) {
  httplib::Client cli(target.url);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(10, 0);
  const auto res = cli.Get("/metrics");
  if (!res || res->status != 200) return {};
  return parse_metrics(res->body);
}

BackgroundProbe::~BackgroundProbe() { stop(); }

void BackgroundProbe::start(std::chrono::milliseconds interval,
                            std::chrono::milliseconds max_duration) {
  thread_ = std::thread([this, interval, max_duration] {
    const auto deadline = Clock::now() + max_duration;
    std::unique_lock lock(mutex_);
    while (!stopping_ && Clock::now() < deadline) {
      lock.unlock();
      tick();
      lock.lock();
      cv_.wait_for(lock, interval, [&] { return stopping_; });
    }
    lock.unlock();
    finish();
  });
}

void BackgroundProbe::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

HealthProber::HealthProber(LoopbackTarget target, std::chrono::milliseconds interval,
                           std::chrono::milliseconds max_duration)
    : target_(std::move(target)) {
  start(interval, max_duration);
}

void HealthProber::tick() {
  // A fresh connection each time, as a load balancer's probe would open.
  httplib::Client cli(target_.url);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  const auto t0 = Clock::now();
  const auto res = cli.Get("/health");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (res && res->status == 200) {
    latencies_.push_back(s);
    return;
  }
  if (failures_++ == 0)
    first_failure_ = res ? fmt::format("status {} after {:.3f} s", res->status, s)
                         : fmt::format("{} after {:.3f} s", httplib::to_string(res.error()), s);
}

Slowloris::Slowloris(LoopbackTarget target, int connections, std::chrono::milliseconds max_duration)
    : target_(std::move(target)),
      header_(slow_header(target_)),
      sockets_(static_cast<size_t>(connections), -1),
      sent_(static_cast<size_t>(connections), 0) {
  start(std::chrono::milliseconds(1000), max_duration);
}

void Slowloris::close_slot(size_t i) {
  if (sockets_[i] >= 0) ::close(sockets_[i]);
  sockets_[i] = -1;
  sent_[i] = 0;
}

void Slowloris::tick() {
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (sockets_[i] < 0) {
      const bool v6 = target_.host == "[::1]";
      const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      int rc;
      if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<uint16_t>(target_.port));
        a.sin6_addr = in6addr_loopback;
        rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(target_.port));
        ::inet_pton(AF_INET, target_.host == "localhost" ? "127.0.0.1" : target_.host.c_str(),
                    &a.sin_addr);
        rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      }
      if (rc != 0) {
        ::close(fd);
        continue;
      }
      sockets_[i] = fd;
      ++opened_;
    }
    // The server answering (a 408 or 503) or closing ends this connection; the slot reopens on
    // the next tick, as a real slowloris client would.
    char buf[256];
    const ssize_t got = ::recv(sockets_[i], buf, sizeof buf, MSG_DONTWAIT);
    if (got == 0 || got > 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      ++closed_by_server_;
      close_slot(i);
      continue;
    }
    if (sent_[i] >= header_.size()) {  // bounded: a full header's worth, then start over
      close_slot(i);
      continue;
    }
    if (::send(sockets_[i], header_.data() + sent_[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
      ++sent_[i];
      ++bytes_sent_;
    } else {
      ++closed_by_server_;
      close_slot(i);
    }
  }
}

void Slowloris::finish() {
  for (size_t i = 0; i < sockets_.size(); ++i) close_slot(i);
}

}  // namespace handoff::cli
