#pragma once
// Each `handoff` sub-command lives in its own file and registers itself on the app.
#include <CLI/CLI.hpp>

namespace handoff::cli {

void add_generate_command(CLI::App& app);
void add_make_model_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_render_chat_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_export_gguf_command(CLI::App& app);
void add_quantize_command(CLI::App& app);

}  // namespace handoff::cli
