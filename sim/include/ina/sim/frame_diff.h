// The first difference between two fabrics' result streams (the RTL core's and the reference
// engine's), as a report an engineer can act on: which result (its index in emission order), the
// cycle the RTL emitted it, both sides' ina headers decoded field by field (proto/ina.toml's
// generated codec and field table, never offsets written here), every differing byte named by
// its header field (or payload element / CRC trailer), destination rank and multicast group when
// they differ, and the seed that replays the run.
//
// Threading: pure functions. Memory: the report is allocated only when there is a difference.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ina::sim {

// One result as a fabric emitted it.
struct ResultFrame {
  std::vector<uint8_t> packet;  // the ina packet (UDP payload: header, payload, trailer)
  uint16_t dest_rank = 0;       // proto::kRankAll for the whole group
  uint16_t group = 0;           // multicast group (RTL: tuser[15:0]); see DiffOptions
  uint64_t cycle = 0;           // RTL: the cycle its last beat left the core; else 0
};

struct DiffOptions {
  uint64_t seed = 0;          // printed in the report (replays the run)
  bool compare_group = true;  // false where a side does not know the group (RtlEngine output)
  size_t max_bytes = 16;      // differing bytes listed at most (then "... N more")
  std::string context = {};   // a line prepended to the report ("iteration 3", a pcap record)
};

struct FrameMismatch {
  size_t index = 0;    // first differing result (or the first one only one side has)
  uint64_t cycle = 0;  // rtl[index].cycle, or the last RTL result's cycle when RTL has fewer
  std::string report;  // multi-line, ends without a newline
};

// Compares rtl and ref in order: packets byte for byte, dest_rank, group (compare_group); a
// result only one side has is a difference too. nullopt when they are equal.
std::optional<FrameMismatch> FirstMismatch(std::span<const ResultFrame> rtl,
                                           std::span<const ResultFrame> ref,
                                           const DiffOptions& options);

// "version=2 type=2(result) flags=0x00 exp=127 ... aux=0" for a packet of at least
// proto::kHeaderBytes, else "short packet (N bytes)".
std::string DescribeHeader(std::span<const uint8_t> packet);

// What byte `offset` of an ina packet of `size` bytes is: "gen[1]" (header field and byte within
// it), "elem 3 byte 2" (payload), "crc[0]" (trailer).
std::string NameByte(size_t offset, size_t size);

}  // namespace ina::sim
