#include "ina/base/rto.h"

#include <algorithm>
#include <cmath>

namespace ina {

RtoEstimator::RtoEstimator(const RtoConfig& config)
    : config_(config),
      alpha_(0.125 / static_cast<double>(std::max<int64_t>(1, config.samples_per_rtt))),
      beta_(0.25 / static_cast<double>(std::max<int64_t>(1, config.samples_per_rtt))),
      rto_us_(config.initial_us) {}

bool RtoEstimator::OnSample(std::chrono::microseconds rtt, bool retransmitted) {
  if (retransmitted) return false;
  const double r = static_cast<double>(rtt.count());
  if (!have_rtt_) {
    srtt_ = r;
    rttvar_ = r / 2;
    have_rtt_ = true;
  } else {
    rttvar_ = (1 - beta_) * rttvar_ + beta_ * std::abs(srtt_ - r);
    srtt_ = (1 - alpha_) * srtt_ + alpha_ * r;
  }
  rto_us_ = std::clamp<int64_t>(static_cast<int64_t>(srtt_ + 4 * rttvar_), config_.min_us,
                                config_.max_us);
  return true;
}

int64_t RtoEstimator::Backoff(int64_t current_us) const {
  return std::min<int64_t>(current_us * 2, config_.max_us);
}

}  // namespace ina
