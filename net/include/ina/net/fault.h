// Fault injection as a wrapper around any Port: drop, duplicate, reorder and corrupt packets in
// both directions, deterministically, so every I/O path (kernel UDP, DPDK) can be tested under
// loss with the same code.
//
// Decisions: one per packet from a splitmix64 stream (FaultInjector), receive and send on
// separate streams (seed, seed ^ 0x5DEECE66D), so the same packet sequence gets the same faults
// on every run. Order of checks: drop (p = drop); if not dropped, duplicate (p = dup), then
// independently reorder (p = reorder), then corrupt (p = corrupt: one byte at a random offset is
// XORed with a non-zero value; a duplicate carries the same corruption). A stream with
// corrupt = 0 draws exactly what it drew before corrupt existed.
//
// Receive side: a dropped packet vanishes; a duplicate is handed out twice in a row (same data);
// a reordered one is copied aside (up to kHeld) and handed out after the packets of the next
// RxBurst that brings any, or, when the inner port has nothing, on the next RxBurst (so WaitRx
// waits at most 1 ms while something is held). Send side: the same, with "the next TxBurst" in
// place of "the next RxBurst"; TxBurst({}) sends everything held. Backpressure of the inner port
// is absorbed here (bounded waits, kTxWaits x kTxWait), then counted in tx_dropped: TxBurst
// returns every packet as taken, or an error.
// Corruption acts on the datagram above the frame codec, after the receive-side checksum check
// and before the send-side checksum is computed: it models damage no checksum caught, so the user
// sees it (a parser must reject it; a corrupted ina data packet that still parses is summed).
// Counters: PortStats inj_* (decisions); every other counter is the inner port's.
// Threading: as Port. Memory: kHeld 2 KiB buffers per direction plus kBurst for corrupted copies.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ina/net/port.h"

namespace ina::net {

struct FaultConfig {
  double drop = 0;  // probabilities in [0, 1]
  double dup = 0;
  double reorder = 0;
  double corrupt = 0;
  uint64_t seed = 1;
  bool enabled() const { return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0; }
};

class FaultInjector {
 public:
  struct Decision {
    bool drop = false;
    bool dup = false;
    bool reorder = false;
    bool corrupt = false;
    uint32_t where = 0;  // corrupt: byte offset (mod length)
    uint8_t mask = 0;    // corrupt: non-zero XOR mask
  };

  FaultInjector(double drop, double dup, double reorder, double corrupt, uint64_t seed)
      : drop_(Threshold(drop)),
        dup_(Threshold(dup)),
        reorder_(Threshold(reorder)),
        corrupt_(Threshold(corrupt)),
        state_(seed),
        enabled_(drop > 0 || dup > 0 || reorder > 0 || corrupt > 0) {}

  bool enabled() const { return enabled_; }

  Decision Next() {
    Decision d;
    if (!enabled_) return d;
    d.drop = Hit(drop_);
    if (d.drop) return d;
    d.dup = Hit(dup_);
    d.reorder = Hit(reorder_);
    if (corrupt_ != 0 && Hit(corrupt_)) {
      const uint64_t r = NextU64();
      d.corrupt = true;
      d.where = static_cast<uint32_t>(r);
      d.mask = static_cast<uint8_t>(1 + (r >> 32) % 255);
    }
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

  uint64_t drop_, dup_, reorder_, corrupt_;
  uint64_t state_;
  bool enabled_;
};

// The send-side stream's seed for a FaultConfig seed (the receive side uses the seed itself).
inline constexpr uint64_t TxFaultSeed(uint64_t seed) { return seed ^ 0x5DEECE66Dull; }

// Wraps inner; returns inner itself when config injects nothing. InvalidArgument for a rate
// outside [0, 1] or a null inner.
Result<std::unique_ptr<Port>> WrapWithFaults(std::unique_ptr<Port> inner,
                                             const FaultConfig& config);

}  // namespace ina::net
