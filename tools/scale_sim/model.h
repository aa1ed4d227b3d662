// ina-scale-sim's model: ina's all-reduce (one switch, or leaves under a spine) and the ring
// all-reduce, as flows on a SimGrid platform (flow level: each transfer is a flow whose rate
// SimGrid's max-min sharing sets from the links it crosses; no packets, no queues, no loss).
//
// What is modelled (docs/scale.md says why and what is left out):
// - Topology: every worker has one link each way to its switch at `rate_bps`. Flat: one switch.
//   Two-level: leaves of `leaf_size` workers, each leaf with one uplink and one downlink to a
//   non-blocking spine at leaf_size * rate_bps / oversub (a fat tree's uplinks, aggregated).
// - ina: each worker streams the tensor as data frames of K elements (frame bytes from
//   proto/ina.toml's generated wire.h, plus `overhead` bytes per frame on the wire), at most W
//   slots in flight: block b goes only after block b - W's result came back; a float call first
//   sends one header-only exponent packet per slot. A switch sums a block once all its children
//   sent it, then multicasts the result (a root) or sends one partial up (a leaf, which
//   multicasts the spine's result down). Frames are grouped into chunks of `chunk_packets` frames
//   (the smallest power of two that keeps the chunk count <= max_chunks) so that 1024 workers
//   simulate in seconds to minutes; the window is kept in chunks (W / chunk_packets, at least
//   stages + 2). A switch forwards a chunk once all of it arrived (store and forward at chunk
//   level), which adds about (stages - 1) / chunks of the time: 1 + 3 stages through two levels, so
//   at most about 1.2% at 256 chunks. Where a chunk exceeds the window, the window's own limit (W
//   frames per round trip) is not modelled: `window_limited` in the output says whether it would
//   bind.
// - Ring (Gloo's allreduce RING): 2(n-1) steps; in each, every rank sends S/n bytes to the next
//   rank over TCP (segments of `mss` payload bytes, `tcp_header` + `overhead` bytes each, a
//   delayed ACK of the same header size every 2 segments going back, its bytes added to the
//   step's data flow: each link carries one rank's data and another's ACKs), and starts the next
//   step once the previous rank's data arrived. Its TCP reaches `tcp_efficiency` of the line rate
//   (fitted once on the testbed, docs/scale.md).
// - Latency: `hop_latency_s` per link crossed (propagation and forwarding), `host_cost_s` per
//   packet at a worker (ina: added to every result-to-next-send turn and a cap of one packet per
//   host_cost_s), `ring_step_s` per ring step (Gloo's per-step synchronization),
//   `switch_cost_s` per packet arriving at a switch, all of a switch's ports and jobs sharing
//   one CPU (a software switch such as ina-switchd on one core; 0 for an ASIC).
// Threading: RunModel builds a SimGrid engine, which exists once per process: call it once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ina::scalesim {

enum class Algo { kIna, kRing };

struct Config {
  Algo algo = Algo::kIna;
  int workers = 8;             // per job
  int jobs = 1;                // jobs running at once, each of `workers` workers
  int leaf_size = 0;           // workers per leaf switch; 0: one flat switch
  bool spread = false;         // placement: false packs a job's workers on consecutive leaves,
                               // true deals every job's workers round-robin over all leaves
  double rate_bps = 100e6;     // every worker link, each direction (bit/s)
  double oversub = 1.0;        // leaf: (leaf_size * rate) / uplink rate
  int64_t elements = 1 << 20;  // per all-reduce, 4-byte elements (float or int32)
  bool int32 = false;          // int32: no exponent round
  int k = 256;                 // elements per data frame (proto kKValues)
  int window = 256;            // slots in flight (ina)
  int overhead = 24;           // wire bytes per frame besides the frame (preamble, FCS, gap)
  double hop_latency_s = 1e-6;
  double host_cost_s = 0;       // per packet at a worker (ina)
  double switch_cost_s = 0;     // per packet arriving at a switch, on its one CPU (ina)
  double ring_step_s = 0;       // per ring step (ring)
  int mss = 1448;               // TCP payload bytes per segment (ring)
  int tcp_header = 66;          // Ethernet + IPv4 + TCP with timestamps (ring)
  bool acks = true;             // ring: count TCP's delayed ACKs (their bytes ride with the data)
  double tcp_efficiency = 1.0;  // ring: goodput / line rate its TCP flows reach (calibrated)
  int max_chunks = 256;         // ina: most chunks per worker per call
};

// Checks ranges and combinations; returns an empty string when valid, else the error.
std::string Validate(const Config& c);

struct Result {
  std::vector<double> job_s;  // each job's all-reduce time (the slowest rank's), seconds
  double bound_s = 0;         // ina: wire bytes per worker / rate; ring: closed form below
  double wire_bytes = 0;      // per worker and direction (ina: frames + overhead; ring: data)
  int64_t chunk_packets = 0;  // ina: frames per simulated chunk
  int64_t window_chunks = 0;  // ina: chunks in flight
  int64_t items = 0;          // ina: chunks per worker per call; ring: steps
  int levels = 1;             // switch levels crossed by the all-reduce (1 or 2)
};

// True where W frames do not cover a round trip (2 * levels hops + host cost): ina's throughput
// is then window-bound, W * frame / RTT, below the line rate.
bool WindowLimited(const Config& c, int levels);

// Ring closed form on an uncontended path of `hops` links: 2(n-1) steps of
// (S/n wire bytes, ACKs included) / rate + hops * hop_latency + ring_step.
double RingClosedForm(const Config& c, int hops);

// Runs the model once (see the threading note above). REQUIRES: Validate(c) is empty.
Result RunModel(const Config& c);

}  // namespace ina::scalesim
