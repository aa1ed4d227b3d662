#include "replay.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <memory>
#include <vector>

#include "ina/dp/control.h"
#include "ina/dp/ref_engine.h"
#include "ina/net/frame.h"
#include "ina/net/pcap.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "ina/sim/frame_diff.h"
#include "ina/sim/rtl_engine.h"

namespace ina::sim::rtlsim {

namespace p = ::ina::proto;

namespace {

// One fabric (an engine behind its own control plane) and what it emitted for the current record.
struct Side final : dp::Emitter, dp::ReplySink {
  std::unique_ptr<dp::Engine> engine;
  std::unique_ptr<dp::ControlPlane> control;
  std::vector<ResultFrame> results;

  void OnResult(uint16_t, uint16_t dest_rank, std::span<const uint8_t> packet) override {
    results.push_back({{packet.begin(), packet.end()}, dest_rank, 0, 0});
  }
  // Control replies come from the same control-plane code on both sides: not compared.
  void Send(const dp::Peer&, std::span<const uint8_t>) override {}

  // The switch loop's classification for one datagram (switch.cc, HandleItems).
  void Feed(std::span<const uint8_t> pkt, const dp::Peer& from, dp::ControlPlane::TimePoint now) {
    if (pkt.size() >= p::kHeaderBytes && p::GetVersion(pkt.data()) == p::kVersion) {
      const p::MsgType type = p::GetType(pkt.data());
      if (dp::ControlPlane::IsControlType(type)) {
        control->HandleControl(pkt, from, now, *this);
        return;
      }
      if (type == p::MsgType::kData) {
        const dp::SourceCheck sc = control->CheckDataSource(
            p::GetJob(pkt.data()), p::GetRank(pkt.data()), p::GetSlot(pkt.data()), from, now);
        if (sc == dp::SourceCheck::kForeign && p::MessageCrcOk(pkt)) return;
      }
    }
    engine->Process(pkt, *this);
    (void)control->HandleEngineFailures(*this);
  }
};

bool FromFabric(p::MsgType type) {
  using T = p::MsgType;
  return type == T::kResult || type == T::kJoinAck || type == T::kError || type == T::kAllocAck;
}

std::string Addr(uint32_t ip, uint16_t port) {
  char b[INET_ADDRSTRLEN] = "?";
  in_addr a{};
  a.s_addr = ip;
  inet_ntop(AF_INET, &a, b, sizeof(b));
  return std::string(b) + ":" + std::to_string(ntohs(port));
}

}  // namespace

Result<ReplaySummary> Replay(const ReplayOptions& options, std::FILE* report) {
  INA_ASSIGN_OR_RETURN(std::unique_ptr<net::PcapReader> in, net::PcapReader::Open(options.in));
  std::unique_ptr<net::PcapWriter> out;
  if (!options.out.empty()) {
    INA_ASSIGN_OR_RETURN(out, net::PcapWriter::Create(options.out));
  }

  dp::ControlConfig cc;
  cc.max_jobs = options.max_jobs;
  cc.job_timeout = std::chrono::milliseconds(options.job_timeout_ms);
  Side ref, rtl;
  ref.engine = dp::MakeReferenceEngine(dp::EngineLimits{kRtlPoolSlots, kRtlJobs});
  auto rtl_engine = std::make_unique<RtlEngine>(options.sim);
  const RtlEngine& core = *rtl_engine;
  rtl.engine = std::move(rtl_engine);
  INA_ASSIGN_OR_RETURN(ref.control, dp::ControlPlane::Create(*ref.engine, cc));
  INA_ASSIGN_OR_RETURN(rtl.control, dp::ControlPlane::Create(*rtl.engine, cc));

  ReplaySummary sum;
  net::PcapRecord rec;
  std::vector<uint8_t> frame(net::kFrameHeaderBytes + p::kMaxPacketBytes);
  uint64_t first_ts = 0;
  while (true) {
    INA_ASSIGN_OR_RETURN(bool more, in->Next(&rec));
    if (!more) break;
    ++sum.records;
    net::ParsedFrame pf;
    if (net::ParseUdpFrame(rec.frame, &pf, /*verify_udp=*/false) != net::FrameError::kOk) {
      ++sum.skipped;
      continue;
    }
    const std::span<const uint8_t> pkt(rec.frame.data() + pf.payload_offset, pf.payload_len);
    if (pkt.size() >= p::kHeaderBytes && FromFabric(p::GetType(pkt.data()))) {
      ++sum.skipped;
      continue;
    }
    if (sum.fed == 0) first_ts = rec.ts_ns;
    const auto now = dp::ControlPlane::TimePoint{} + std::chrono::hours(1) +
                     std::chrono::nanoseconds(rec.ts_ns - std::min(rec.ts_ns, first_ts));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = pf.addrs.src_ip;
    sin.sin_port = pf.addrs.src_port;
    const dp::Peer from = dp::Peer::From(reinterpret_cast<const sockaddr*>(&sin), sizeof(sin));
    ref.results.clear();
    rtl.results.clear();
    ref.Feed(pkt, from, now);
    rtl.Feed(pkt, from, now);
    (void)ref.control->Tick(now, ref);
    (void)rtl.control->Tick(now, rtl);
    ++sum.fed;
    sum.results_ref += ref.results.size();
    sum.results_rtl += rtl.results.size();
    for (ResultFrame& r : rtl.results) r.cycle = core.cycles();
    DiffOptions d;
    d.seed = options.sim.seed;
    d.compare_group = false;
    d.context = "replay " + options.in + ": record " + std::to_string(sum.records) + " (from " +
                Addr(pf.addrs.src_ip, pf.addrs.src_port) + ", " + std::to_string(pkt.size()) +
                " bytes: " + DescribeHeader(pkt) + ")";
    if (auto m = FirstMismatch(rtl.results, ref.results, d); m.has_value()) {
      if (sum.differing++ == 0) std::fprintf(report, "%s\n", m->report.c_str());
    }
    if (out == nullptr) continue;
    for (const ResultFrame& r : rtl.results) {
      if (r.packet.size() < p::kHeaderBytes || r.packet.size() > p::kMaxPacketBytes) continue;
      const auto peers = rtl.control->Destinations(p::GetJob(r.packet.data()), r.dest_rank,
                                                   p::GetSlot(r.packet.data()));
      for (const dp::Peer& peer : peers) {
        net::FrameAddrs a;
        a.src_ip = pf.addrs.dst_ip;
        a.src_port = pf.addrs.dst_port;
        if (peer.addr.ss_family == AF_INET) {
          const auto& to = reinterpret_cast<const sockaddr_in&>(peer.addr);
          a.dst_ip = to.sin_addr.s_addr;
          a.dst_port = to.sin_port;
        }
        net::BuildUdpHeaders(a, r.packet, frame.data());
        std::copy(r.packet.begin(), r.packet.end(), frame.begin() + net::kFrameHeaderBytes);
        INA_RETURN_IF_ERROR(
            out->Write({frame.data(), net::kFrameHeaderBytes + r.packet.size()}, rec.ts_ns));
        ++sum.out_frames;
      }
    }
  }
  if (out != nullptr) INA_RETURN_IF_ERROR(out->Flush());
  sum.cycles = core.cycles();
  std::fprintf(
      report,
      "replay %s: %llu records, %llu fed, %llu skipped; results rtl %llu ref %llu; "
      "%llu records differ; %llu frames written; %llu cycles simulated\n",
      options.in.c_str(), static_cast<unsigned long long>(sum.records),
      static_cast<unsigned long long>(sum.fed), static_cast<unsigned long long>(sum.skipped),
      static_cast<unsigned long long>(sum.results_rtl),
      static_cast<unsigned long long>(sum.results_ref),
      static_cast<unsigned long long>(sum.differing),
      static_cast<unsigned long long>(sum.out_frames), static_cast<unsigned long long>(sum.cycles));
  return sum;
}

}  // namespace ina::sim::rtlsim
