// The `handoff` binary: parses the sub-command and converts engine errors into exit codes
// (2: bad input the user can fix, 1: any other failure).
#include <cstdio>
#include <exception>

#include "handoff/cli/commands.h"
#include "handoff/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Handoff: GLM-5 / DeepSeek-V3.2 inference with TP x SP x PP"};
  app.require_subcommand(1);
  handoff::cli::add_generate_command(app);
  handoff::cli::add_make_model_command(app);
  handoff::cli::add_plan_command(app);
  handoff::cli::add_tokenize_command(app);
  handoff::cli::add_render_chat_command(app);
  handoff::cli::add_serve_command(app);
  handoff::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const handoff::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
