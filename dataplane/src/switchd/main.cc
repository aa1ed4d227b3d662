// ina-switchd: the software aggregation switch (see docs/switchd.md).
//
// Exit status: 0 after SIGINT/SIGTERM (summary and JSON counters printed), 2 for a bad command
// line, 1 for a start-up or socket failure.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines.h"
#include "ina/dp/switchd/config.h"
#include "ina/dp/switchd/metrics.h"
#include "ina/dp/switchd/reporter.h"
#include "ina/dp/switchd/switch.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

// Exit status of a start-up failure: 2 for what the command line asked wrongly, else 1.
int StartupExitCode(const ina::Status& st) {
  const auto code = st.code();
  return code == ina::StatusCode::kInvalidArgument || code == ina::StatusCode::kUnimplemented ? 2
                                                                                              : 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace sd = ::ina::dp::switchd;
  std::vector<std::string> args(argv + 1, argv + argc);
  const sd::EngineMenu engines{sd::EngineNames(), sd::DefaultEngineName()};
  auto config = sd::ParseArgs(args, engines);
  if (!config.ok()) {
    std::fprintf(stderr, "ina-switchd: %s\n", config.status().message().c_str());
    return 2;
  }
  if (config->help) {
    std::fputs(sd::Usage(engines).c_str(), stdout);
    return 0;
  }
  // One engine per core (--cores), each for its share of the slot pool.
  const std::string kind = config->engine;
  auto sw = sd::Switch::Create(*config, [&kind](const ina::dp::EngineLimits& limits) {
    return sd::MakeEngine(kind, limits);
  });
  if (!sw.ok()) {
    std::fprintf(stderr, "ina-switchd: %s\n", sw.status().ToString().c_str());
    return StartupExitCode(sw.status());
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll returns EINTR and the loop sees the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  sd::PrintConfig(*config, sd::EngineDescription(config->engine), stdout, engines);
  std::unique_ptr<sd::MetricsServer> metrics;
  if (!config->metrics.empty()) {
    sd::Switch* s = sw->get();
    auto m =
        sd::MetricsServer::Start(config->metrics, [s] { return sd::FormatMetrics(s->Snapshot()); });
    if (!m.ok()) {
      std::fprintf(stderr, "ina-switchd: %s\n", m.status().ToString().c_str());
      return StartupExitCode(m.status());
    }
    metrics = std::move(*m);
    std::printf("ina-switchd metrics at http://%s/metrics\n", metrics->address().c_str());
  }
  std::printf("ina-switchd listening on %s\n", (*sw)->local_address().c_str());
  std::fflush(stdout);

  ina::Status st = (*sw)->Run(&g_stop, [](const sd::SwitchStats& s) {
    sd::PrintStatsLine(s, stdout);
    std::fflush(stdout);
  });
  sd::PrintSummary((*sw)->Snapshot(), stdout);
  std::fflush(stdout);
  if (!st.ok()) {
    std::fprintf(stderr, "ina-switchd: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
