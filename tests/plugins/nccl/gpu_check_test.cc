// Real NCCL through the plugin (label hw): runs scripts/gpu-check.sh on the built binaries, which
// drives ina-nccl-allreduce as 2 ranks that NCCL sees as two nodes, with CollNet through
// ina-switchd, once with host buffers and once with GPU buffers (NCCL_PTR_CUDA), and the PyTorch
// backend on CUDA tensors where torch has CUDA. Without a GPU NCCL cannot start
// (ncclCommInitRank fails before it loads plugins): the script fails loudly with "skipped": true
// in its JSON line, and this test skips with that reason.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <string>

#include "json_line.h"
#include "process.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;

TEST(NcclGpu, AllReduceThroughInaCollNet) {
  auto p = Process::Start(
      {"/bin/bash", INA_GPU_CHECK_SCRIPT, "--no-build", "--build-dir", INA_BUILD_DIR});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string json;
  for (const auto& line : p->Drain(540s)) {
    if (!line.empty() && line[0] == '{') json = line;
  }
  auto st = p->Stop(SIGTERM, 5s);
  ASSERT_FALSE(json.empty()) << "no JSON line from gpu-check.sh";
  if (JsonTrue(json, "skipped")) {
    GTEST_SKIP() << "no GPU (nvidia-smi lists none): NCCL cannot run here; " << json;
  }
  EXPECT_TRUE(st.ok() && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << json;
  EXPECT_TRUE(JsonTrue(json, "nccl_result_ok")) << json;
  EXPECT_TRUE(JsonTrue(json, "collnet_used")) << json;
  EXPECT_TRUE(JsonTrue(json, "nccl_plugin_ok")) << json;
  // null where NCCL keeps host buffers on this machine (its reason is in "not_run").
  EXPECT_EQ(json.find("\"nccl_gpubuf_ok\": false"), std::string::npos) << json;
  EXPECT_TRUE(JsonTrue(json, "nccl_gpubuf_offered")) << json;
  EXPECT_TRUE(JsonTrue(json, "passed")) << json;
}

}  // namespace
}  // namespace ina::bench
