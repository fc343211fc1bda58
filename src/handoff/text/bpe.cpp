#include "handoff/text/bpe.h"

#include <queue>

#include "handoff/error.h"
#include "handoff/text/byte_level.h"

namespace handoff::text {
namespace {

// Bounds the per-piece cache: this many pieces of at most this many bytes, a few tens of MB.
constexpr size_t kMaxCacheEntries = 200000;
constexpr size_t kMaxCachedPieceBytes = 256;

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model) {
  if (model.value("type", "BPE") != "BPE")
    fail_input("tokenizer model type '{}' is not supported (only BPE)", model.value("type", ""));
  const auto& vocab = model.at("vocab");
  vocab_.reserve(vocab.size());
  for (const auto& [spelling, id_json] : vocab.items()) {
    // Special tokens may sit in the vocab spelled literally rather than byte-level encoded; they
    // are only ever produced as added tokens, so their literal text is their bytes.
    const std::string bytes = byte_level_to_bytes(spelling).value_or(spelling);
    const auto id = id_json.get<int32_t>();
    if (id < 0) fail_input("vocab token '{}' has negative id {}", spelling, id);
    if (static_cast<size_t>(id) >= id_bytes_.size()) id_bytes_.resize(id + 1);
    id_bytes_[id] = bytes;
    vocab_.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  const auto& merges = model.at("merges");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string left, right;
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const auto space = s.find(' ');
      if (space == std::string::npos) fail_input("merge '{}' is not 'a b'", s);
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      fail_input("merge {} is neither 'a b' nor [a, b]", m.dump());
    }
    const auto lb = byte_level_to_bytes(left), rb = byte_level_to_bytes(right);
    if (!lb || !rb) fail_input("merge '{} {}' is not in the byte-level alphabet", left, right);
    const int32_t l = find(*lb), r = find(*rb), merged = find(*lb + *rb);
    if (l < 0 || r < 0 || merged < 0)
      fail_input("merge '{} {}' uses tokens not in vocab", left, right);
    merges_.try_emplace(pair_key(l, r), rank++, merged);
  }
}

int32_t BpeModel::find(std::string_view bytes) const {
  const auto it = vocab_.find(std::string(bytes));
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  // Long pieces rarely repeat, and caching them would let a few huge prompts pin gigabytes.
  if (piece.size() > kMaxCachedPieceBytes) {
    merge(piece, ids);
    return;
  }
  std::string key(piece);
  {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> result;
  merge(piece, result);
  ids.insert(ids.end(), result.begin(), result.end());
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(result));
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t>& out) const {
  // Symbols form a doubly linked list over the piece; a merge joins a symbol with its right
  // neighbour. Queue entries carry the pair they were made for and are dropped when stale.
  struct Symbol {
    int32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(piece[i])];
    if (id < 0)
      fail_input("vocab has no token for byte 0x{:02x}", static_cast<unsigned char>(piece[i]));
    symbols.push_back(
        {id, static_cast<int>(i) - 1, i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1, true});
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push = [&](int pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    const int32_t l = symbols[pos].id, r = symbols[symbols[pos].next].id;
    const auto it = merges_.find(pair_key(l, r));
    if (it != merges_.end()) queue.push({it->second.first, pos, l, r, it->second.second});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (!left.alive || left.id != c.left || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right) continue;
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next)
    out.push_back(symbols[i].id);
}

}  // namespace handoff::text
