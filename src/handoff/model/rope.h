#pragma once
// cos/sin of the RoPE angles pos · inv_freq, computed as the reference does: the angle is a
// float32 product, then cos/sin of it.
#include <cstdint>
#include <vector>

namespace handoff::model {

class Rope {
 public:
  explicit Rope(std::vector<float> inv_freq) : inv_freq_(std::move(inv_freq)) {}
  int64_t pairs() const { return static_cast<int64_t>(inv_freq_.size()); }
  // Writes pairs() values to each of cos and sin.
  void cos_sin(int64_t pos, float* cos, float* sin) const;

 private:
  std::vector<float> inv_freq_;
};

}  // namespace handoff::model
