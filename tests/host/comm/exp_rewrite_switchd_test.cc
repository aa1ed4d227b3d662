// A rewriter on the path, as an attacker would place one (issue #23): the in-repo UDP proxy
// (rewrite_proxy.h) between the workers and the real ina-switchd changes one result's exponent on
// its way to one rank and recomputes the CRC32C trailer, so the worker's integrity check passes.
//
// - next_exp rewritten (the exponent the ranks agree for the slot's next block): that rank
//   quantizes its next block with an exponent the others did not use. Before the fabric compared
//   exponents, the switch summed the blocks anyway and every rank returned OK with the same wrong
//   block. Now the fabric sees two exponents for one slot generation (docs/protocol.md, "Ranks that
//   disagree") and ends the job: every rank fails with ABORTED (rank_mismatch).
// - exp rewritten (the exponent the rank dequantizes the block with): that rank alone returned OK
//   with a wrong block. The fabric guarantees a float result's exp is the one every rank sent, so
//   the worker ignores a result whose exp is not its own, and its retransmission fetches the
//   result again: the call completes exact.
// Either way no rank returns OK with a wrong result, and a job beside it stays exact. Run on both
// engines of ina-switchd (fast, ref).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ina/host/communicator.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "rewrite_proxy.h"
#include "support/switchd_process.h"

namespace ina::host {
namespace {

namespace p = ::ina::proto;
using Clock = std::chrono::steady_clock;

using RewriteProxy = ::ina::testing::RewriteProxy;

// Rank r's input: integers below 2^10 in magnitude, so every quantized value and every sum is
// exact (P = 28 for 4 ranks) and a correct result equals the exact sum bit for bit.
std::vector<float> Input(size_t n, int r) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(int((i * 37 + r * 101) % 2001) - 1000);
  return v;
}
std::vector<float> ExactSum(size_t n, int world) {
  std::vector<float> s(n, 0.0f);
  for (int r = 0; r < world; ++r) {
    const std::vector<float> v = Input(n, r);
    for (size_t i = 0; i < n; ++i) s[i] += v[i];
  }
  return s;
}
size_t WrongElements(const std::vector<float>& got, const std::vector<float>& want) {
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

struct Case {
  const char* engine;  // ina-switchd --engine
  bool next_exp;       // rewrite next_exp (else exp)
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.engine << (c.next_exp ? " next_exp" : " exp");
}

class ExpRewrite : public ::testing::TestWithParam<Case> {};

TEST_P(ExpRewrite, NoRankReturnsOkWithAWrongResultAndTheNeighbourStaysExact) {
  constexpr uint16_t kJobA = 901, kJobB = 902, kVictim = 1;
  constexpr int kWorldA = 4, kWorldB = 2;
  constexpr size_t kElems = 256 * 8 * 5 + 77;  // 41 blocks of K = 256 on a window of 8
  test::SwitchProcess sw({"--port", "0", "--engine", GetParam().engine});
  ASSERT_NE(sw.port(), 0);
  // The 10th result of job A to rank 1 whose field names an exponent (next_exp: a later block
  // follows on the slot; exp: a float block), once: +1, so the exponent stays above every rank's
  // local one and the worker's own range check passes. Counted by (slot, offset), and only at a
  // result's first copy: a copy the switch resends for a retransmission (a loaded machine's RTO)
  // comes after the rank already has the result, and rewriting it would change nothing.
  const bool next = GetParam().next_exp;
  int seen = 0;
  std::set<std::pair<uint16_t, uint32_t>> results;
  RewriteProxy proxy(sw.port(), [&](uint8_t* pkt, size_t, uint16_t job, uint16_t rank) {
    if (job != kJobA || rank != kVictim || p::GetType(pkt) != p::MsgType::kResult) {
      return false;
    }
    if (!results.emplace(p::GetSlot(pkt), p::GetOffset(pkt)).second) return false;
    const uint8_t e = next ? p::GetNextExp(pkt) : p::GetExp(pkt);
    if (e == p::kExpNone || ++seen != 10) return false;
    next ? p::SetNextExp(pkt, e + 1) : p::SetExp(pkt, e + 1);
    return true;
  });

  struct Rank {
    uint16_t job;
    int rank, world;
    std::vector<float> data;
    Status status;
    Clock::duration took{};
    CommStats stats;
  };
  std::vector<Rank> ranks;
  for (const auto& [job, world] : {std::pair{kJobA, kWorldA}, std::pair{kJobB, kWorldB}}) {
    for (int r = 0; r < world; ++r) {
      Rank x;
      x.job = job;
      x.rank = r;
      x.world = world;
      x.data = Input(kElems, r);
      ranks.push_back(std::move(x));
    }
  }
  std::vector<std::thread> ts;
  for (Rank& x : ranks) {
    ts.emplace_back([&, &x = x] {
      CommConfig c;
      c.switch_host = "127.0.0.1";
      c.switch_port = proxy.port();
      c.job_id = x.job;
      c.world_size = static_cast<uint16_t>(x.world);
      c.rank = static_cast<uint16_t>(x.rank);
      c.k = 256;
      c.window = 8;
      c.join_timeout_ms = 10000;
      c.progress_timeout_ms = 20000;  // a rank_mismatch must come long before this
      auto comm = Communicator::Create(c);
      if (!comm.ok()) {
        x.status = comm.status();
        return;
      }
      const auto t0 = Clock::now();
      x.status = (*comm)->AllReduce(std::span(x.data));
      x.took = Clock::now() - t0;
      x.stats = (*comm)->stats();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(proxy.rewritten(), 1u) << "the attack never happened";

  const std::vector<float> want_a = ExactSum(kElems, kWorldA), want_b = ExactSum(kElems, kWorldB);
  for (const Rank& x : ranks) {
    SCOPED_TRACE("job " + std::to_string(x.job) + " rank " + std::to_string(x.rank));
    const std::vector<float>& want = x.job == kJobA ? want_a : want_b;
    std::printf("job %u rank %d: %s, %zu wrong elements, %lld ms\n", x.job, x.rank,
                x.status.ToString().c_str(), x.status.ok() ? WrongElements(x.data, want) : 0,
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(x.took).count()));
    if (x.status.ok()) {
      EXPECT_EQ(WrongElements(x.data, want), 0u) << "OK with a wrong result";
    }
    if (x.job == kJobB || !next) {
      EXPECT_TRUE(x.status.ok()) << x.status.ToString();
      continue;
    }
    EXPECT_EQ(x.status.code(), StatusCode::kAborted) << x.status.ToString();
    EXPECT_NE(x.status.message().find("the ranks disagree"), std::string::npos)
        << x.status.message();
    EXPECT_LT(x.took, std::chrono::seconds(3));
  }
  if (!next) {
    EXPECT_GE(ranks[kVictim].stats.stale_results_ignored, 1u) << "the rewritten result was used";
  }
  const auto counters = sw.Stop();
  EXPECT_EQ(counters.at("drop_mismatch"), next ? 1u : 0u);
  EXPECT_EQ(counters.at("jobs_failed"), next ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(Engines, ExpRewrite,
                         ::testing::Values(Case{"fast", true}, Case{"ref", true},
                                           Case{"fast", false}, Case{"ref", false}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.engine) +
                                  (info.param.next_exp ? "_next_exp" : "_exp");
                         });

}  // namespace
}  // namespace ina::host
