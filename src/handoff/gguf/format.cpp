#include "handoff/gguf/format.h"

#include "handoff/error.h"

namespace handoff::gguf {

size_t tensor_type_size(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 4;
    case TensorType::kF16:
    case TensorType::kBF16:
      return 2;
  }
  fail("gguf: unknown tensor type {}", static_cast<uint32_t>(type));
}

std::string_view tensor_type_name(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return "F32";
    case TensorType::kF16:
      return "F16";
    case TensorType::kBF16:
      return "BF16";
  }
  return "?";
}

}  // namespace handoff::gguf
