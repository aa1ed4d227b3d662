// RtoEstimator: a retransmission timeout, shared by the worker's progress engine (docs/host.md,
// "Loss") and a leaf switch's upstream side (docs/hierarchy.md).
//
// Jacobson/Karels: the first sample r sets srtt = r, rttvar = r/2; later ones
// rttvar = (1 - b) rttvar + b |srtt - r|, then srtt = (1 - a) srtt + a r, with a = 1/8 and b = 1/4
// divided by samples_per_rtt (RFC 7323, appendix G): a window of W slots gives W samples per
// round trip, and undivided gains would remember only the last few packets, microseconds of a
// fast flow, so one scheduling stall of the fabric or of this thread (more pollers than CPUs)
// made every slot time out at once. Divided, the estimator keeps about 8 round trips. RTO =
// srtt + 4 rttvar,
// clamped to [min, max]; before any sample it is `initial` (not clamped: CommConfig::Validate
// keeps it within [min, max]). Karn: a sample from a retransmitted packet is ambiguous (which copy
// did the result answer?) and is ignored. Backoff: each retry of one packet doubles that packet's
// timeout, capped at max; the estimator's RTO itself is not changed by retries.
//
// Units: microseconds. Threading: one thread (the engine's). No allocation, no clock reads.
#pragma once

#include <chrono>
#include <cstdint>

namespace ina {

struct RtoConfig {
  int64_t min_us = 500;
  int64_t initial_us = 5000;
  int64_t max_us = 200000;
  int64_t samples_per_rtt = 1;  // results per round trip (the slots in flight), >= 1
};

class RtoEstimator {
 public:
  explicit RtoEstimator(const RtoConfig& config);

  // A round-trip sample: the time from a packet's send to its result, whole microseconds.
  // `retransmitted`: the packet was sent more than once (Karn: ignored). Returns whether the
  // sample was used.
  bool OnSample(std::chrono::microseconds rtt, bool retransmitted);

  // The timeout for a packet sent now for the first time.
  int64_t rto_us() const { return rto_us_; }
  // The timeout of the next try of a packet whose last try waited `current_us`.
  int64_t Backoff(int64_t current_us) const;

  bool has_sample() const { return have_rtt_; }
  double srtt_us() const { return srtt_; }
  double rttvar_us() const { return rttvar_; }
  const RtoConfig& config() const { return config_; }

 private:
  RtoConfig config_;
  double alpha_, beta_;  // the gains 1/8 and 1/4 over samples_per_rtt
  bool have_rtt_ = false;
  double srtt_ = 0;
  double rttvar_ = 0;
  int64_t rto_us_;
};

}  // namespace ina
