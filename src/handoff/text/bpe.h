#pragma once
// Byte-level BPE model: vocab and merges from tokenizer.json, applied to raw-byte pieces with a
// rank-ordered priority queue, and results cached per piece since text repeats words a lot.
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace handoff::text {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" section (type BPE, byte-level vocab spelling).
  explicit BpeModel(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece (raw bytes).
  void encode(std::string_view piece, std::vector<int32_t>& ids) const;

  // Raw bytes of every vocab id (empty string for ids the vocab does not define).
  const std::vector<std::string>& id_bytes() const { return id_bytes_; }
  // Id of a raw byte string, or -1.
  int32_t find(std::string_view bytes) const;

 private:
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_bytes_;
  int32_t byte_ids_[256];
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace handoff::text
