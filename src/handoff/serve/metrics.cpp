#include "handoff/serve/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

namespace handoff::serve {
namespace {

void histogram(std::string& out, const std::string& name, const std::string& help,
               const engine::Histogram& h) {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds()[i], cumulative);
  }
  cumulative += h.counts().back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative,
                     name, h.sum(), name, h.count());
}

void scalar(std::string& out, const std::string& name, const char* type, const std::string& help,
            double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

double process_resident_bytes() {
  // statm: total and resident pages; one read, no parsing of the larger status file.
  std::ifstream statm("/proc/self/statm");
  int64_t total = 0, resident = 0;
  if (!(statm >> total >> resident)) return 0.0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

std::string render_metrics(const engine::EngineStats& s, const HttpCounts& http,
                           const comm::CommCounts& comm) {
  std::string out;
  out +=
      "# HELP handoff_http_requests_total HTTP requests by endpoint and status.\n"
      "# TYPE handoff_http_requests_total counter\n";
  for (const auto& [key, n] : http.requests)
    out += fmt::format("handoff_http_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n",
                       key.first, key.second, n);
  out +=
      "# HELP handoff_requests_finished_total Engine requests by finish reason.\n"
      "# TYPE handoff_requests_finished_total counter\n";
  for (const auto& [reason, n] : s.finished)
    out += fmt::format("handoff_requests_finished_total{{finish_reason=\"{}\"}} {}\n", reason, n);
  scalar(out, "handoff_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
         static_cast<double>(s.prompt_tokens));
  scalar(out, "handoff_generation_tokens_total", "counter", "Tokens generated.",
         static_cast<double>(s.generation_tokens));
  scalar(out, "handoff_preemptions_total", "counter", "Sequences preempted (recompute).",
         static_cast<double>(s.preemptions));
  scalar(out, "handoff_engine_steps_total", "counter", "Engine steps run.",
         static_cast<double>(s.steps));
  scalar(out, "handoff_num_requests_waiting", "gauge", "Requests in the queue.",
         static_cast<double>(s.waiting));
  scalar(out, "handoff_num_requests_running", "gauge", "Requests in the running batch.",
         static_cast<double>(s.running));
  scalar(out, "handoff_kv_cache_usage_ratio", "gauge", "Fraction of cache blocks in use.",
         s.cache_blocks_total > 0
             ? static_cast<double>(s.cache_blocks_used) / static_cast<double>(s.cache_blocks_total)
             : 0.0);
  scalar(out, "handoff_kv_cache_blocks_used", "gauge", "Cache blocks referenced by requests.",
         static_cast<double>(s.cache_blocks_used));
  scalar(out, "process_resident_memory_bytes", "gauge", "Resident memory of the server process.",
         process_resident_bytes());
  histogram(out, "handoff_time_to_first_token_seconds", "Arrival to first token.", s.ttft);
  histogram(out, "handoff_inter_token_latency_seconds", "Time between tokens of a request.",
            s.inter_token);
  histogram(out, "handoff_e2e_request_latency_seconds", "Arrival to finish.", s.e2e);
  out +=
      "# HELP handoff_comm_bytes_total Bytes through collectives by layer, op and group "
      "(this process's ranks).\n# TYPE handoff_comm_bytes_total counter\n";
  for (const auto& [key, st] : comm) {
    const auto& [layer, op, group] = key;
    out += fmt::format("handoff_comm_bytes_total{{scope=\"{}\",op=\"{}\",group=\"{}\"}} {}\n",
                       layer, comm::op_name(op), comm::group_name(group), st.bytes);
  }
  return out;
}

}  // namespace handoff::serve
