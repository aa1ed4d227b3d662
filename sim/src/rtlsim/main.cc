// ina-rtlsim: ina-switchd's loop and control plane (the library ina::switchd_loop) with the
// verilated RTL core doing all the aggregation (docs/rtl/README.md, "ina-rtlsim"). Same command
// line as ina-switchd (--engine accepted and ignored; --slots only the core's fixed pool, which is
// its default), plus --rtl-idle / --rtl-stall (env INA_RTLSIM_IDLE / INA_RTLSIM_STALL).
//
// --trace FILE [--trace-from CYCLE --trace-cycles N]: an FST waveform of the core.
// --replay IN.pcap [--out OUT.pcap]: instead of serving, replays a capture through the core and
// the reference engine side by side (replay.h) and exits.
//
// Exit status: 0 after SIGINT/SIGTERM (summary and the JSON counters line printed), 2 for a bad
// command line, 1 for a start-up or socket failure, or if the simulation harness failed.
// --replay: 0 when both sides agreed on every record, 3 when some differed (the first difference
// is printed), 2 for a capture that cannot be read (the error names the file and record).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ina/dp/switchd/config.h"
#include "ina/dp/switchd/switch.h"
#include "replay.h"
#include "rtl_engines.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  namespace sd = ::ina::dp::switchd;
  std::vector<std::string> args(argv + 1, argv + argc);
  namespace rs = ::ina::sim::rtlsim;
  const sd::EngineMenu engines = rs::Menu();
  auto config = sd::ParseArgs(args, engines);
  if (!config.ok()) {
    std::fprintf(stderr, "ina-rtlsim: %s\n", config.status().message().c_str());
    return 2;
  }
  if (config->help) {
    std::fputs("ina-rtlsim: ina-switchd's loop over the verilated RTL core; flags as below.\n",
               stdout);
    std::fputs(sd::Usage(engines).c_str(), stdout);
    return 0;
  }
  const ina::sim::TraceOptions trace{config->rtl_trace, config->rtl_trace_from,
                                     config->rtl_trace_cycles};
  if (!config->replay.empty()) {
    rs::ReplayOptions ro;
    ro.in = config->replay;
    ro.out = config->replay_out;
    ro.sim.idle = config->rtl_idle;
    ro.sim.stall = config->rtl_stall;
    ro.sim.seed = config->seed;
    ro.sim.trace = trace;
    ro.max_jobs = std::min<uint16_t>(config->max_jobs, ina::sim::kRtlJobs);
    ro.job_timeout_ms = config->job_timeout_ms;
    auto sum = rs::Replay(ro, stdout);
    std::fflush(stdout);
    if (!sum.ok()) {
      std::fprintf(stderr, "ina-rtlsim: %s\n", sum.status().ToString().c_str());
      return 2;
    }
    return sum->differing == 0 ? 0 : 3;
  }
  auto engine = rs::MakeEngine(config->rtl_idle, config->rtl_stall, trace);
  if (!engine.ok()) {
    std::fprintf(stderr, "ina-rtlsim: %s\n", engine.status().ToString().c_str());
    return engine.status().code() == ina::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const ina::sim::RtlEngine& rtl = **engine;  // owned by the Switch from here on
  auto sw = sd::Switch::Create(*config, std::move(*engine));
  if (!sw.ok()) {
    std::fprintf(stderr, "ina-rtlsim: %s\n", sw.status().ToString().c_str());
    return sw.status().code() == ina::StatusCode::kInvalidArgument ? 2 : 1;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll returns EINTR and the loop sees the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  sd::PrintConfig(*config, rs::EngineDescription(), stdout, engines);
  std::printf("ina-rtlsim listening on %s\n", (*sw)->local_address().c_str());
  std::fflush(stdout);

  ina::Status st = (*sw)->Run(&g_stop);
  std::printf("ina-rtlsim: %llu cycles simulated, %llu harness errors\n",
              static_cast<unsigned long long>(rtl.cycles()),
              static_cast<unsigned long long>(rtl.sim_errors()));
  (*sw)->PrintSummary(stdout);
  std::fflush(stdout);
  if (!st.ok()) {
    std::fprintf(stderr, "ina-rtlsim: %s\n", st.ToString().c_str());
    return 1;
  }
  return rtl.sim_errors() > 0 ? 1 : 0;
}
