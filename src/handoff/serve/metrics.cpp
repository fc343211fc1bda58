#include "handoff/serve/metrics.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

namespace handoff::serve {
namespace {

// `labels` is the rendered label list every series of this scrape starts with.
void histogram(std::string& out, const std::string& name, const std::string& help,
               const std::string& labels, const engine::Histogram& h) {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    cumulative += h.counts()[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, h.bounds()[i], cumulative);
  }
  cumulative += h.counts().back();
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name,
                     labels, cumulative, name, labels, h.sum(), name, labels, h.count());
}

void scalar(std::string& out, const std::string& name, const char* type, const std::string& help,
            const std::string& labels, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name,
                     labels, value);
}

// A label value as the exposition format needs it: backslash, quote and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
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
                           const comm::CommCounts& comm, const std::string& model_name) {
  const std::string m = fmt::format("model_name=\"{}\"", label_value(model_name));
  std::string out;
  out +=
      "# HELP handoff_http_requests_total HTTP requests by endpoint and status.\n"
      "# TYPE handoff_http_requests_total counter\n";
  for (const auto& [key, n] : http.requests)
    out += fmt::format("handoff_http_requests_total{{{},endpoint=\"{}\",status=\"{}\"}} {}\n", m,
                       key.first, key.second, n);
  out +=
      "# HELP handoff_requests_finished_total Engine requests by finish reason.\n"
      "# TYPE handoff_requests_finished_total counter\n";
  for (const auto& [reason, n] : s.finished)
    out += fmt::format("handoff_requests_finished_total{{{},finish_reason=\"{}\"}} {}\n", m, reason,
                       n);
  scalar(out, "handoff_prompt_tokens_total", "counter",
         "Prompt tokens computed (prefix-cache hits are not).", m,
         static_cast<double>(s.prompt_tokens));
  scalar(out, "handoff_generation_tokens_total", "counter", "Tokens generated.", m,
         static_cast<double>(s.generation_tokens));
  scalar(out, "handoff_preemptions_total", "counter", "Sequences preempted (recompute).", m,
         static_cast<double>(s.preemptions));
  scalar(out, "handoff_engine_steps_total", "counter", "Engine steps run.", m,
         static_cast<double>(s.steps));
  scalar(out, "handoff_num_requests_waiting", "gauge", "Requests in the queue.", m,
         static_cast<double>(s.waiting));
  scalar(out, "handoff_num_requests_running", "gauge", "Requests in the running batch.", m,
         static_cast<double>(s.running));
  scalar(out, "handoff_kv_cache_usage_ratio", "gauge", "Fraction of cache blocks in use.", m,
         s.cache_blocks_total > 0
             ? static_cast<double>(s.cache_blocks_used) / static_cast<double>(s.cache_blocks_total)
             : 0.0);
  scalar(out, "handoff_kv_cache_blocks_used", "gauge", "Cache blocks referenced by requests.", m,
         static_cast<double>(s.cache_blocks_used));
  // vLLM's prefix-cache counters, in tokens: hits / queries is the hit rate.
  scalar(out, "handoff_prefix_cache_queries_total", "counter",
         "Prefix cache queries: tokens of sequences looked up as they joined.", m,
         static_cast<double>(s.prefix_cache_queries));
  scalar(out, "handoff_prefix_cache_hits_total", "counter",
         "Prefix cache hits: tokens found cached, not computed again.", m,
         static_cast<double>(s.prefix_cache_hits));
  scalar(out, "process_resident_memory_bytes", "gauge", "Resident memory of the server process.", m,
         process_resident_bytes());
  histogram(out, "handoff_time_to_first_token_seconds", "Arrival to first token.", m, s.ttft);
  histogram(out, "handoff_inter_token_latency_seconds", "Time between tokens of a request.", m,
            s.inter_token);
  histogram(out, "handoff_e2e_request_latency_seconds", "Arrival to finish.", m, s.e2e);
  histogram(out, "handoff_request_queue_time_seconds",
            "Arrival to the request's first engine step.", m, s.queue_time);
  histogram(out, "handoff_request_prefill_time_seconds",
            "First engine step to first token (prefill).", m, s.prefill_time);
  histogram(out, "handoff_request_decode_time_seconds", "First token to finish (decode).", m,
            s.decode_time);
  histogram(out, "handoff_request_prompt_tokens", "Prompt tokens per finished request.", m,
            s.request_prompt_tokens);
  histogram(out, "handoff_request_generation_tokens", "Generated tokens per finished request.", m,
            s.request_generation_tokens);
  histogram(out, "handoff_iteration_tokens_total", "Tokens fed to the model per engine step.", m,
            s.iteration_tokens);
  out +=
      "# HELP handoff_comm_bytes_total Bytes through collectives by layer, op and group "
      "(summed over every rank).\n# TYPE handoff_comm_bytes_total counter\n";
  for (const auto& [key, st] : comm) {
    const auto& [layer, op, group] = key;
    out += fmt::format("handoff_comm_bytes_total{{{},scope=\"{}\",op=\"{}\",group=\"{}\"}} {}\n", m,
                       layer, comm::op_name(op), comm::group_name(group), st.bytes);
  }
  return out;
}

}  // namespace handoff::serve
