#pragma once
// Bounds on one template render. Templates are model data and their variables come from
// clients, so neither may make a render recurse past the stack, loop forever or grow without
// end; past a bound the render ends with an InputError naming it.
#include <cstddef>
#include <cstdint>

namespace handoff::text::jinja {

// Nesting of values (lists and dicts) and of template expressions and statements.
inline constexpr int kMaxNesting = 128;
// Depth of evaluation at run time: statements, expressions and macro calls together.
inline constexpr int kMaxEvalDepth = 512;
// Iterations of all loops of one render together (range() lists count too).
inline constexpr int64_t kMaxLoopIterations = 1'000'000;
// The rendered text and every string built on the way.
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;
// Values visited by one comparison (shared sub-lists can make a small value compare long).
inline constexpr int64_t kMaxCompareSteps = 1'000'000;

}  // namespace handoff::text::jinja
