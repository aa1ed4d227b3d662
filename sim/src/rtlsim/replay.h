// ina-rtlsim --replay IN.pcap --out OUT.pcap: recorded frames (ina-switchd / ina-rtlsim --record,
// or tcpdump -w on a testbed) through the verilated RTL core and the reference engine side by
// side, each behind a control plane of its own that sees the same JOIN/LEAVE/ALLOC_JOB messages
// (the switch loop's classification: control messages to the control plane, data through the
// source check, everything else to the engine, which counts it).
//
// Per record: Ethernet/IPv4/UDP frames to any port are taken (UDP checksum not checked: captures
// on a host carry offloaded checksums); other frames, and frames the fabric sends (result,
// join_ack, error, alloc_ack, as a tcpdump on both directions holds them), are skipped and
// counted. The results each side emits for the record are compared (frame_diff.h, without the
// multicast group, which only the RTL has); the first difference is reported in full with the
// record number, later ones are counted. Every RTL result is written to OUT (when given) once per
// destination peer the RTL side's control plane knows, from the address the record was sent to.
// Time: the control planes run on the capture's timestamps (job timeouts as recorded).
//
// Threading: single-threaded; it runs to the end of the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "ina/base/status.h"
#include "ina/sim/core_sim.h"

namespace ina::sim::rtlsim {

struct ReplayOptions {
  std::string in;             // the capture (classic pcap, Ethernet)
  std::string out;            // the RTL's results (pcap); empty: not written
  CoreSim::Options sim = {};  // harness idle / stall, seed, trace window
  uint16_t max_jobs = kRtlJobs;
  uint32_t job_timeout_ms = 30000;
};

struct ReplaySummary {
  uint64_t records = 0;      // records read
  uint64_t fed = 0;          // ina datagrams fed to both sides
  uint64_t skipped = 0;      // not IPv4/UDP, or sent by a fabric
  uint64_t results_rtl = 0;  // results emitted (before expansion to peers)
  uint64_t results_ref = 0;
  uint64_t differing = 0;   // records whose results differ
  uint64_t out_frames = 0;  // frames written to the output
  uint64_t cycles = 0;      // simulated cycles
};

// Replays options.in; writes the first difference's report and the summary lines to `report`.
// Errors: the capture's (NotFound, InvalidArgument: not pcap, cut short...; named by file and
// record), the output file's (Unavailable), the engines' start-up.
Result<ReplaySummary> Replay(const ReplayOptions& options, std::FILE* report);

}  // namespace ina::sim::rtlsim
