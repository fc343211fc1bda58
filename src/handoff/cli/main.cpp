// The `handoff` binary: parses the sub-command and converts errors into exit codes. The
// convention (documented in README): 0 success; 2 a usage or input error the user can fix
// (a bad flag, CLI11's own parse errors included, a bad config, checkpoint or prompt);
// 1 a runtime failure (a rank failed, out of memory, a non-finite logit, I/O).
#include <cstdio>
#include <exception>

#include "handoff/cli/commands.h"
#include "handoff/error.h"
#include "handoff/ops/cpu_features.h"
#include "handoff/version.h"

namespace {
constexpr int kUsageError = 2;
constexpr int kRuntimeFailure = 1;

// `handoff --version`: what was built, from which commit, and which kernels this CPU runs.
std::string version_text() {
  using handoff::ops::isa_name;
  std::string isa;
  try {
    isa = isa_name(handoff::ops::kernel_isa());
  } catch (const std::exception& e) {
    isa = std::string("(") + e.what() + ")";  // a bad HANDOFF_ISA: shown, not fatal here
  }
#if defined(__clang__)
  const char* compiler = "clang ";
#else
  const char* compiler = "gcc ";
#endif
  return handoff::version_line() + "\ncompiler: " + compiler + __VERSION__ +
         "\ncpu features: " + isa_name(handoff::ops::cpu_max_isa()) + " (widest this CPU has)" +
         "\nkernels: " + isa + " (HANDOFF_ISA may cap them)";
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Handoff: GLM-5 / DeepSeek-V3.2 inference with TP x SP x PP"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text);
  handoff::cli::add_generate_command(app);
  handoff::cli::add_make_model_command(app);
  handoff::cli::add_plan_command(app);
  handoff::cli::add_tokenize_command(app);
  handoff::cli::add_render_chat_command(app);
  handoff::cli::add_serve_command(app);
  handoff::cli::add_bench_command(app);
  handoff::cli::add_export_gguf_command(app);
  handoff::cli::add_quantize_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help) and has its own codes (105, 106, 109, ...): every
    // parse or validation failure is a usage error, 2; --help and --version exit 0.
    return app.exit(e) == 0 ? 0 : kUsageError;
  } catch (const handoff::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kUsageError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kRuntimeFailure;
  }
  return 0;
}
