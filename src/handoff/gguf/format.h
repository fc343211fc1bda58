#pragma once
// The GGUF container's constants (version 3, little-endian), as llama.cpp's ggml reads them:
// a header (magic, version, tensor count, key/value count), the key/value pairs, the tensor
// descriptors, padding to the alignment, then the tensor data, each tensor aligned.
#include <cstdint>
#include <string_view>

namespace handoff::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kAlignment = 32;  // general.alignment's default; we never override it

// Types of a key's value (gguf_type).
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// The element types of tensors this exporter writes (ggml_type numbering).
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 30,
};

// general.file_type (llama_ftype) for an all-F32 file and a mostly-BF16 one.
inline constexpr uint32_t kFileTypeAllF32 = 0;
inline constexpr uint32_t kFileTypeMostlyBF16 = 32;

// Token types of tokenizer.ggml.token_type (llama_token_type).
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

size_t tensor_type_size(TensorType type);
std::string_view tensor_type_name(TensorType type);

inline uint64_t align_up(uint64_t n, uint64_t alignment = kAlignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace handoff::gguf
