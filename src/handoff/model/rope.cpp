#include "handoff/model/rope.h"

#include <cmath>

namespace handoff::model {

void Rope::cos_sin(int64_t pos, float* cos, float* sin) const {
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float angle = p * inv_freq_[i];
    cos[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    sin[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
}

}  // namespace handoff::model
