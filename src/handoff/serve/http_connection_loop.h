#pragma once
// The HTTP/1.1 connection loop: one I/O thread reads every connection's request (head and body)
// under absolute deadlines and hands only complete requests to a fixed pool of worker threads,
// so a slow client never holds a worker. Cheap requests (health, metrics) are answered on the
// I/O thread itself and stay fast while every worker is busy. Connections past the cap get an
// immediate 503.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "handoff/serve/http_request_parser.h"
#include "handoff/serve/http_response.h"
#include "handoff/serve/tcp_socket.h"

namespace handoff::serve {

struct HttpLoopOptions {
  int threads = 64;           // workers: requests answered (or streamed) at once
  int max_connections = 512;  // open connections; more get 503
  std::chrono::milliseconds header_timeout{10'000};  // first byte to the end of the head
  std::chrono::milliseconds body_timeout{60'000};    // end of the head to the end of the body
  std::chrono::milliseconds idle_timeout{15'000};    // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{60'000};   // one response (or one stream event)
  int max_requests_per_connection = 1000;
  HttpLimits limits;
};

// Raises the open-file limit to hold every connection (and as many refused ones); InputError
// naming --max-connections when the hard limit is too low. The loop calls it; serve calls it
// first, before anything loads.
void reserve_files_for_connections(int max_connections);

// The part of a connection a worker answers on.
struct HttpConnection;

// One request handed to a worker, and how it answers: a whole response, or a chunked stream.
// Writes fail (false) when the client left or did not read within the write timeout.
class HttpExchange {
 public:
  HttpExchange(HttpConnection& connection, std::chrono::milliseconds write_timeout, bool keep_alive,
               const std::atomic<bool>& stopping);

  const HttpRequest& request() const;
  bool send(const HttpResponse& response);
  bool start_stream(int status, std::string_view content_type, const HttpHeaders& headers);
  bool send_chunk(std::string_view data);
  bool end_stream();
  // The client closed or reset its side (or the loop is stopping); checked without reading.
  bool client_gone() const;

  bool responded() const { return responded_; }
  // The connection may carry the next request.
  bool reusable() const { return keep_alive_ && finished_ && !failed_; }

 private:
  bool write(std::string_view bytes);

  HttpConnection& connection_;
  std::chrono::milliseconds write_timeout_;
  bool keep_alive_;
  const std::atomic<bool>& stopping_;
  bool responded_ = false;
  bool finished_ = false;
  bool failed_ = false;
};

class HttpConnectionLoop {
 public:
  // Answers a request on the I/O thread, or nullopt to hand it to a worker. Must not block.
  using InlineHandler = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  using WorkerHandler = std::function<void(HttpExchange&)>;
  // The response to a request refused before routing (malformed, too large, timed out, ...).
  using ErrorResponder = std::function<HttpResponse(const HttpError&)>;

  HttpConnectionLoop(const HttpLoopOptions& options, InlineHandler answer_inline,
                     WorkerHandler answer_on_worker, ErrorResponder error_response);
  ~HttpConnectionLoop();
  HttpConnectionLoop(const HttpConnectionLoop&) = delete;
  HttpConnectionLoop& operator=(const HttpConnectionLoop&) = delete;

  // Serves on a bound, listening socket until stop(); returns once every worker has finished.
  void run(FileDescriptor listener);
  // Thread-safe: ends run() (workers finish the request they hold first).
  void stop();
  // Thread-safe: from now on responses close their connection and idle connections are closed.
  void set_draining() { draining_ = true; }
  int64_t open_connections() const { return open_; }

 private:
  using Connection = HttpConnection;

  void accept_all();
  void on_event(int fd, uint32_t events);
  void process(Connection& c);
  void reply(Connection& c, const HttpResponse& response, bool keep_alive);
  bool flush(Connection& c);  // false: the connection was closed
  void start_closing(Connection& c);
  void hand_to_worker(Connection& c, bool keep_alive);
  void take_returned();
  void sweep();
  void watch(Connection& c, bool add);
  void close(int fd);
  void work();

  HttpLoopOptions options_;
  InlineHandler answer_inline_;
  WorkerHandler answer_on_worker_;
  ErrorResponder error_response_;

  FileDescriptor listener_, epoll_, wake_;
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;  // the I/O thread's alone
  int64_t refusing_ = 0;  // connections past the cap, closing after their 503
  Clock::time_point accept_paused_until_{};
  Clock::time_point last_sweep_{};
  std::atomic<int64_t> open_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false};

  std::mutex mutex_;  // guards the fields below
  std::condition_variable work_ready_;
  std::deque<std::unique_ptr<Connection>> queued_;     // complete requests waiting for a worker
  std::vector<std::unique_ptr<Connection>> returned_;  // kept-alive connections back from workers
  bool workers_stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace handoff::serve
