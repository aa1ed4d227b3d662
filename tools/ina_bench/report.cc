#include "report.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "ina/proto/wire.h"
#include "json_writer.h"
#include "verify.h"

namespace ina::bench {
namespace {

// Per iteration, the slowest rank's time; then the median over iterations.
double MedianOfMax(const Shared* sh, int workers, int iters, bool gloo) {
  std::vector<double> per_iter;
  for (int it = 0; it < iters; ++it) {
    double m = 0;
    for (int r = 0; r < workers; ++r) {
      m = std::max(m, gloo ? sh->ranks[r].gloo_ms[it] : sh->ranks[r].ina_ms[it]);
    }
    per_iter.push_back(m);
  }
  std::sort(per_iter.begin(), per_iter.end());
  size_t mid = per_iter.size() / 2;
  return per_iter.size() % 2 ? per_iter[mid] : (per_iter[mid - 1] + per_iter[mid]) / 2;
}

// Whether every rank exited cleanly and reported no error; says why not on stderr.
bool AllRanksOk(const Options& o, const Shared* sh, const Reaped& reaped) {
  bool ok = !reaped.timed_out;
  for (int r = 0; r < o.workers; ++r) {
    const auto& rs = sh->ranks[r];
    const int st = reaped.exit_status[r];
    if (st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      if (WIFSIGNALED(st)) {
        std::fprintf(stderr, "ina-bench: rank %d killed by signal %d\n", r, WTERMSIG(st));
      } else {
        std::fprintf(stderr, "ina-bench: rank %d exited with %d\n", r, WEXITSTATUS(st));
      }
      ok = false;
    }
    if (!reaped.lost[r].empty()) {
      std::fprintf(stderr, "ina-bench: rank %d: %s\n", r, reaped.lost[r].c_str());
      ok = false;
    }
    if (rs.ina_code != 0) {
      std::fprintf(stderr, "ina-bench: rank %d: ina: %s\n", r, rs.ina_error);
      ok = false;
    }
    if (rs.gloo_code != 0) {
      std::fprintf(stderr, "ina-bench: rank %d: gloo: %s\n", r, rs.gloo_error);
      ok = false;
    }
  }
  for (int r = 1; r < o.workers; ++r) {  // --k auto: each rank resolved its own
    if (sh->ranks[r].k != 0 && sh->ranks[0].k != 0 && sh->ranks[r].k != sh->ranks[0].k) {
      std::fprintf(stderr, "ina-bench: rank %d uses K=%u, rank 0 K=%u\n", r, sh->ranks[r].k,
                   sh->ranks[0].k);
      ok = false;
    }
  }
  if (reaped.timed_out) {
    std::fprintf(
        stderr, "ina-bench: stopped workers still running %s\n",
        reaped.after_failure
            ? "after another worker failed"
            : ("at the --timeout-s deadline (" + std::to_string(o.timeout_s) + " s)").c_str());
  }
  return ok;
}

// The options with K as the workers used it: --k, or with --k auto what they resolved (0 when no
// worker got as far as creating its communicator).
Options WithResolvedK(const Options& o, const Shared* sh) {
  Options r = o;
  for (int i = 0; r.k == 0 && i < o.workers; ++i) r.k = static_cast<int>(sh->ranks[i].k);
  return r;
}

struct Verdict {
  bool bit_identical = false, exact = false, within_bound = false;
  double max_rel_err = -1, gloo_rel_err = -1;
  std::string detail;  // the first difference, if any
};

// Rebuilds the inputs and checks rank 0's results (and Gloo's error, for reference).
Verdict Verify(const Options& o, const SharedView& view, bool ranks_ok) {
  const Shared* sh = view.shared;
  const size_t bytes = o.elements * 4;
  Verdict v;
  v.bit_identical = ranks_ok;
  for (int r = 1; r < o.workers; ++r) {
    v.bit_identical &= sh->ranks[r].fingerprint == sh->ranks[0].fingerprint;
  }
  if (!ranks_ok) return v;
  if (o.int32) {
    std::vector<std::vector<int32_t>> in;
    for (int r = 0; r < o.workers; ++r) in.push_back(MakeIntInput(o.seed, r, o.elements, true));
    auto want = ExpectInt(in);
    if (o.average) AverageInt(&want, o.workers);
    v.exact = v.within_bound = std::memcmp(want.data(), view.result0, bytes) == 0;
    v.max_rel_err = v.exact ? 0 : 1;
    return v;
  }
  std::vector<std::vector<float>> in;
  for (int r = 0; r < o.workers; ++r) in.push_back(MakeFloatInput(o.seed, r, o.elements));
  auto want = ExpectFloat(in, o.k);
  if (o.average) AverageExpectation(&want, o.workers);
  auto c = CheckFloat(
      std::span<const float>(reinterpret_cast<const float*>(view.result0), o.elements), want);
  v.exact = c.exact;
  v.within_bound = c.within_bound;
  v.max_rel_err = c.max_rel_err;
  v.detail = c.detail;
  if (o.gloo) {
    auto g = CheckFloat(
        std::span<const float>(reinterpret_cast<const float*>(view.gloo0), o.elements), want);
    v.gloo_rel_err = g.max_rel_err;
  }
  return v;
}

}  // namespace

int ReportKillDrill(const Options& o, const SharedView& view, const Reaped& reaped,
                    const std::string& switch_counters) {
  bool all_failed = !reaped.timed_out;
  double max_ms = 0;
  std::vector<std::string> codes;
  for (int r = 0; r < o.workers; ++r) {
    if (r == o.kill_rank) continue;
    const auto& rs = view.shared->ranks[r];
    all_failed &= rs.ina_code != 0;
    max_ms = std::max(max_ms, rs.error_ms);
    codes.emplace_back(StatusCodeName(static_cast<StatusCode>(rs.ina_code)));
    if (!reaped.lost[r].empty()) Say(o, "  rank %d: no report: %s\n", r, reaped.lost[r].c_str());
    Say(o, "  rank %d: %s after %.0f ms\n", r, rs.ina_error, rs.error_ms);
  }
  Say(o, "%s: every surviving rank returned an error within %.0f ms\n",
      all_failed ? "PASS" : "FAIL", max_ms);
  JsonObject j;
  j.Int("workers", o.workers)
      .Int("killed_rank", o.kill_rank)
      .Bool("survivors_failed", all_failed)
      .Num("max_error_ms", max_ms, "%.1f")
      .Int("progress_timeout_ms", o.progress_timeout_ms)
      .StrList("codes", codes)
      .Raw("switch_counters", switch_counters);
  std::printf("%s\n", j.str().c_str());
  return all_failed ? 0 : 1;
}

int ReportRun(const Options& given, const SharedView& view, const Reaped& reaped,
              const std::string& switch_counters) {
  const Shared* sh = view.shared;
  const Options o = WithResolvedK(given, sh);
  const bool ok = AllRanksOk(o, sh, reaped);
  const Verdict v = Verify(o, view, ok);
  uint64_t retx = 0, sent = 0, bad_crc = 0, from_device = 0, socket_drops = 0;
  uint32_t granted = 0;  // the least any rank was granted (all ranks get the same)
  for (int r = 0; r < o.workers; ++r) {
    if (r == 0 || sh->ranks[r].window < granted) granted = sh->ranks[r].window;
    socket_drops += sh->ranks[r].socket_drops;
    retx += sh->ranks[r].retransmissions;
    sent += sh->ranks[r].packets_sent;
    bad_crc += sh->ranks[r].bad_crc;
    from_device += sh->ranks[r].packets_from_device;
  }
  const size_t bytes = o.elements * 4;
  const bool gloo_ran = ok && o.gloo && !o.int32;
  const double ina_ms = ok ? MedianOfMax(sh, o.workers, o.iters, false) : -1;
  const double gloo_ms = gloo_ran ? MedianOfMax(sh, o.workers, o.iters, true) : -1;
  const double speedup = gloo_ran && ina_ms > 0 ? gloo_ms / ina_ms : -1;
  const double gbps = ina_ms > 0 ? bytes * 8 / (ina_ms * 1e6) : 0;
  const bool verified = ok && v.bit_identical && v.exact && v.within_bound;
  // Bytes each worker sends (and receives) per all-reduce as a link shaper counts them: every
  // frame's Ethernet, IPv4, UDP and ina headers and trailer, the payload, and for floats the
  // exponent round (one header-only frame per slot used; assumes the switch granted the window
  // asked for).
  const uint64_t blocks = o.k > 0 ? (o.elements + o.k - 1) / o.k : 0;
  // The trailer: the CRC32C's 4 bytes, or a keyed job's 16-byte tag (it was counted as 4 before).
  const uint64_t trailer = o.sec == "crc" ? proto::kCrcBytes : proto::kTagBytes;
  const uint64_t frame_headers = 14 + 20 + 8 + proto::kHeaderBytes + trailer;
  const uint64_t exp_frames = o.int32 ? 0 : std::min<uint64_t>(blocks, o.window);
  const uint64_t wire_bytes = bytes + (blocks + exp_frames) * frame_headers;
  if (!v.detail.empty()) Say(o, "  first difference: %s\n", v.detail.c_str());
  Say(o,
      "ina:  median %.3f ms per all-reduce (%.2f Gbit/s of tensor per worker), %llu "
      "retransmissions of %llu packets\n",
      ina_ms, gbps, static_cast<unsigned long long>(retx), static_cast<unsigned long long>(sent));
  if (gloo_ran) {
    Say(o, "gloo: median %.3f ms per ring all-reduce; ina speed-up %.2fx\n", gloo_ms, speedup);
  }
  Say(o,
      "%s: bit-identical on all %d workers: %s; exact quantized sum: %s; within bound: %s; "
      "max relative error %.3g\n",
      verified ? "VERIFIED" : "FAILED", o.workers, v.bit_identical ? "yes" : "no",
      v.exact ? "yes" : "no", v.within_bound ? "yes" : "no", v.max_rel_err);
  char fingerprint[17];
  std::snprintf(fingerprint, sizeof(fingerprint), "%016llx",
                static_cast<unsigned long long>(sh->ranks[0].fingerprint));
  JsonObject j;
  j.Int("workers", o.workers)
      .Uint("elements", o.elements)
      .Str("dtype", o.int32 ? "int32" : "float")
      .Int("k", o.k)
      .Int("window", o.window)
      .Uint("window_granted", granted)
      .Int("iters", o.iters)
      .Bool("average", o.average)
      .Num("drop_rate", o.drop_rate)
      .Num("corrupt_rate", o.corrupt_rate)
      .Num("ina_ms_median", ina_ms, "%.4f")
      .Num("gloo_ms_median", gloo_ms, "%.4f")
      .Num("speedup_vs_gloo", speedup, "%.3f")
      .Num("ina_gbps", gbps, "%.3f")
      .Bool("bit_identical", v.bit_identical)
      .Bool("exact", v.exact)
      .Bool("within_bound", v.within_bound)
      .Num("max_rel_err", v.max_rel_err, "%.4g")
      .Num("gloo_max_rel_err", v.gloo_rel_err, "%.4g")
      .Uint("retransmissions", retx)
      .Uint("packets_sent", sent)
      .Uint("worker_bad_crc", bad_crc)
      .Uint("worker_socket_drops", socket_drops)
      .Str("memory", o.memory)
      .Uint("worker_packets_from_device", from_device)
      .Bool("verified", verified)
      .Str("dataplane", o.dataplane)
      .Str("sec", o.sec)
      .Str("transport", o.transport)
      .Str("fingerprint", fingerprint)
      .Str("launch", !o.worker_netns.empty() ? "netns"
                     : !o.listen.empty()     ? "tcp"
                                             : "fork")
      .Uint("wire_bytes_per_worker", wire_bytes)
      .Uint("wire_frames_per_worker", blocks + exp_frames)
      .Uint("data_frame_bytes", frame_headers + uint64_t{proto::kElemBytes} * o.k)
      // Frames each worker sent (and got back) per second of the median all-reduce.
      .Num("ina_pps", ina_ms > 0 ? (blocks + exp_frames) / (ina_ms / 1e3) : 0, "%.0f")
      .Raw("switch_counters", switch_counters);
  std::printf("%s\n", j.str().c_str());
  return verified ? 0 : 1;
}

}  // namespace ina::bench
