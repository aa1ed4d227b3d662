// Deterministic fault injection for ina-switchd: drop, duplicate, delay (reorder) packets.
//
// One decision per packet, from a splitmix64 stream seeded by --seed, so a run with the same
// packet sequence makes the same decisions. Order of checks: drop (p = drop_rate); else duplicate
// (p = dup_rate); independently of duplication, reorder (p = reorder_rate).
#pragma once

#include <cstdint>

namespace ina::dp::switchd {

class FaultInjector {
 public:
  struct Decision {
    bool drop = false;
    bool dup = false;
    bool reorder = false;
  };

  FaultInjector(double drop_rate, double dup_rate, double reorder_rate, uint64_t seed)
      : drop_(Threshold(drop_rate)),
        dup_(Threshold(dup_rate)),
        reorder_(Threshold(reorder_rate)),
        state_(seed),
        enabled_(drop_rate > 0 || dup_rate > 0 || reorder_rate > 0) {}

  bool enabled() const { return enabled_; }

  Decision Next() {
    Decision d;
    if (!enabled_) return d;
    d.drop = Hit(drop_);
    if (d.drop) return d;
    d.dup = Hit(dup_);
    d.reorder = Hit(reorder_);
    return d;
  }

 private:
  // p as a 53-bit fixed-point threshold; p = 1 always hits, p = 0 never.
  static uint64_t Threshold(double p) {
    if (p <= 0) return 0;
    if (p >= 1) return uint64_t{1} << 53;
    return static_cast<uint64_t>(p * static_cast<double>(uint64_t{1} << 53));
  }
  bool Hit(uint64_t threshold) { return threshold != 0 && (NextU64() >> 11) < threshold; }
  uint64_t NextU64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t drop_, dup_, reorder_;
  uint64_t state_;
  bool enabled_;
};

}  // namespace ina::dp::switchd
