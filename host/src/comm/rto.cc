#include "rto.h"

#include <algorithm>
#include <cmath>

namespace ina::host::internal {

bool RtoEstimator::OnSample(std::chrono::microseconds rtt, bool retransmitted) {
  if (retransmitted) return false;
  const double r = static_cast<double>(rtt.count());
  if (!have_rtt_) {
    srtt_ = r;
    rttvar_ = r / 2;
    have_rtt_ = true;
  } else {
    rttvar_ = 0.75 * rttvar_ + 0.25 * std::abs(srtt_ - r);
    srtt_ = 0.875 * srtt_ + 0.125 * r;
  }
  rto_us_ = std::clamp<int64_t>(static_cast<int64_t>(srtt_ + 4 * rttvar_), config_.min_us,
                                config_.max_us);
  return true;
}

int64_t RtoEstimator::Backoff(int64_t current_us) const {
  return std::min<int64_t>(current_us * 2, config_.max_us);
}

}  // namespace ina::host::internal
