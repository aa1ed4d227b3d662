// ina-soak-worker: one rank of a soak job (scripts/soak.sh, docs/soak.md).
//
//   ina-soak-worker --switch HOST:PORT --job J --rank R --world N --seconds T --log FILE
//
// Until T seconds have passed (or SIGTERM): joins job J as rank R of N (Communicator::Create;
// a refused or timed-out join is retried after 100 ms), then runs all-reduce calls, alternating
// int32 and float32 and cycling through sizes 1 .. 65536 elements. Every rank's input is a pure
// function of (rank, call number, element), small integers also for float32 (so the float sum is
// exact: the quantizer scales by a power of two >= 1), and each rank computes the expected sum of
// all N inputs itself: a successful call must match it exactly, element for element, which also
// makes every rank's result bit-identical. A failed call ends the communicator; the next one joins
// again (call numbers restart at 0, as on every rank of the job).
//
// The log (appended, one line per event, flushed at once so a SIGKILL loses nothing):
//   ok      t_ms call kind n ms
//   wrong   t_ms call kind n index got want          (a successful call with a wrong result)
//   fail    t_ms call kind n code since_progress_ms op_ms message
//   join    t_ms ms window      join_fail t_ms ms code message
// t_ms: since the epoch (steady across processes: CLOCK_REALTIME). since_progress_ms: from the
// last result the communicator accepted (polled every 1 ms; the op's start if none) to the error,
// the quantity docs/host.md bounds.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ina/base/parse.h"
#include "ina/host/communicator.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

constexpr size_t kSizes[] = {1, 255, 256, 1000, 4096, 20000, 65536, 3};

int32_t Input(uint32_t rank, uint64_t call, size_t i) {
  uint64_t x = (rank + 1) * 0x9E3779B97F4A7C15ull ^ (call * 0xBF58476D1CE4E5B9ull) ^ (i * 31);
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return static_cast<int32_t>(x % 2001) - 1000;  // small: exact as float32 sums too
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "ina-soak-worker: %s\nusage: ina-soak-worker --switch HOST:PORT --job J --rank R "
               "--world N --seconds T --log FILE\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string sw = "127.0.0.1:47000", log_path;
  uint64_t job = 1, rank = 0, world = 1, seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    auto num = [&](uint64_t lo, uint64_t hi) {
      auto r = ina::ParseUint(k, v, lo, hi);
      if (!r.ok()) Usage(r.status().ToString().c_str());
      return *r;
    };
    if (k == "--switch") {
      sw = v;
    } else if (k == "--job") {
      job = num(1, 65535);
    } else if (k == "--rank") {
      rank = num(0, 63);
    } else if (k == "--world") {
      world = num(1, 64);
    } else if (k == "--seconds") {
      seconds = num(1, 86400);
    } else if (k == "--log") {
      log_path = v;
    } else {
      Usage(("unknown flag " + k).c_str());
    }
  }
  if (log_path.empty() || rank >= world) Usage("--log needed, --rank < --world");
  std::FILE* log = std::fopen(log_path.c_str(), "a");
  if (log == nullptr) Usage(("cannot open " + log_path).c_str());
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  ina::host::CommConfig cfg;
  const size_t colon = sw.rfind(':');
  cfg.switch_host = sw.substr(0, colon);
  cfg.switch_port = static_cast<uint16_t>(std::stoi(sw.substr(colon + 1)));
  cfg.job_id = static_cast<uint16_t>(job);
  cfg.rank = static_cast<uint16_t>(rank);
  cfg.world_size = static_cast<uint16_t>(world);
  cfg.window = 64;

  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<int32_t> iv;
  std::vector<float> fv;
  while (!g_stop && Clock::now() < end) {
    const auto j0 = Clock::now();
    auto created = ina::host::Communicator::Create(cfg);
    if (!created.ok()) {
      std::fprintf(log, "join_fail %lld %.1f %s %s\n", static_cast<long long>(WallMs()),
                   Ms(Clock::now() - j0), ina::StatusCodeName(created.status().code()).data(),
                   created.status().message().c_str());
      std::fflush(log);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    std::unique_ptr<ina::host::Communicator> comm = std::move(*created);
    std::fprintf(log, "join %lld %.1f %u\n", static_cast<long long>(WallMs()),
                 Ms(Clock::now() - j0), comm->window());
    std::fflush(log);
    for (uint64_t call = 0; !g_stop && Clock::now() < end; ++call) {
      const size_t n = kSizes[call % std::size(kSizes)] + (call / std::size(kSizes)) % 7;
      const bool is_int = call % 2 == 0;
      ina::Result<ina::host::Request> req = ina::Internal("unset");
      if (is_int) {
        iv.resize(n);
        for (size_t i = 0; i < n; ++i) iv[i] = Input(static_cast<uint32_t>(rank), call, i);
        req = comm->AllReduceAsync(std::span(iv));
      } else {
        fv.resize(n);
        for (size_t i = 0; i < n; ++i) {
          fv[i] = static_cast<float>(Input(static_cast<uint32_t>(rank), call, i));
        }
        req = comm->AllReduceAsync(std::span(fv));
      }
      const auto t0 = Clock::now();
      auto last_progress = t0;
      uint64_t results = comm->stats().results;
      ina::Status s = req.ok() ? ina::Status::Ok() : req.status();
      if (req.ok()) {
        while (!req->Test()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          const uint64_t r = comm->stats().results;
          if (r != results) {
            results = r;
            last_progress = Clock::now();
          }
        }
        s = req->Wait();
      }
      const auto t1 = Clock::now();
      const char* kind = is_int ? "i32" : "f32";
      if (!s.ok()) {
        std::fprintf(log, "fail %lld %llu %s %zu %s %.1f %.1f %s\n",
                     static_cast<long long>(WallMs()), static_cast<unsigned long long>(call), kind,
                     n, ina::StatusCodeName(s.code()).data(), Ms(t1 - last_progress), Ms(t1 - t0),
                     s.message().c_str());
        std::fflush(log);
        break;  // a failed communicator: join again
      }
      // The expected sum, computed here from every rank's inputs.
      size_t bad = n;
      int64_t got = 0, want = 0;
      for (size_t i = 0; i < n && bad == n; ++i) {
        int64_t sum = 0;
        for (uint32_t r = 0; r < world; ++r) sum += Input(r, call, i);
        const int64_t g = is_int ? iv[i] : static_cast<int64_t>(fv[i]);
        if (g != sum || (!is_int && fv[i] != static_cast<float>(sum))) {
          bad = i;
          got = g;
          want = sum;
        }
      }
      if (bad != n) {
        std::fprintf(log, "wrong %lld %llu %s %zu %zu %lld %lld\n",
                     static_cast<long long>(WallMs()), static_cast<unsigned long long>(call), kind,
                     n, bad, static_cast<long long>(got), static_cast<long long>(want));
      } else {
        std::fprintf(log, "ok %lld %llu %s %zu %.2f\n", static_cast<long long>(WallMs()),
                     static_cast<unsigned long long>(call), kind, n, Ms(t1 - t0));
      }
      std::fflush(log);
    }
  }
  std::fclose(log);
  return 0;
}
