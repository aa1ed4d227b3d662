// ina-switchd: the software aggregation switch (see docs/switchd.md).
//
// Exit status: 0 after SIGINT/SIGTERM (summary and JSON counters printed), 2 for a bad command
// line, 1 for a start-up or socket failure.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "config.h"
#include "switch.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  namespace sd = ::ina::dp::switchd;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto config = sd::ParseArgs(args);
  if (!config.ok()) {
    std::fprintf(stderr, "ina-switchd: %s\n", config.status().message().c_str());
    return 2;
  }
  if (config->help) {
    std::fputs(sd::Usage().c_str(), stdout);
    return 0;
  }
  auto sw = sd::Switch::Create(*config);
  if (!sw.ok()) {
    std::fprintf(stderr, "ina-switchd: %s\n", sw.status().ToString().c_str());
    const auto code = sw.status().code();
    return code == ina::StatusCode::kInvalidArgument || code == ina::StatusCode::kUnimplemented ? 2
                                                                                                : 1;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll returns EINTR and the loop sees the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  sd::PrintConfig(*config, stdout);
  std::printf("ina-switchd listening on %s\n", (*sw)->local_address().c_str());
  std::fflush(stdout);

  ina::Status st = (*sw)->Run(&g_stop);
  (*sw)->PrintSummary(stdout);
  std::fflush(stdout);
  if (!st.ok()) {
    std::fprintf(stderr, "ina-switchd: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
