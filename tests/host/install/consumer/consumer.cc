// A C++ program built against an installed libina (ina/host/communicator.h): the C consumer's
// job through the C++ API. Prints "consumer-cxx rank R/W: ok"; exit 0 on success.
#include <ina/host/communicator.h>
#include <ina/ina.h>

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace {

int Fail(const char* what, const ina::Status& s) {
  std::fprintf(stderr, "consumer-cxx: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main() {
  if (ina_version() != INA_VERSION) return Fail("version", ina::Internal("headers != library"));
  auto cfg = ina::host::CommConfig::FromEnv(ina::host::CommConfig{});
  if (!cfg.ok()) return Fail("FromEnv", cfg.status());
  cfg->k = 64;
  cfg->window = 8;
  auto comm = ina::host::Communicator::Create(*cfg);
  if (!comm.ok()) return Fail("Create", comm.status());
  const uint32_t w = cfg->world_size, r = cfg->rank;
  constexpr int kN = 1000;
  std::vector<int32_t> iv(kN);
  std::vector<float> fv(kN);
  for (int i = 0; i < kN; ++i) iv[i] = static_cast<int32_t>((r + 1) * i);
  for (int i = 0; i < kN; ++i) fv[i] = 0.5f * static_cast<float>(i % 100) * (r + 1);
  if (auto s = (*comm)->AllReduce(std::span<int32_t>(iv)); !s.ok()) return Fail("i32", s);
  auto req = (*comm)->AllReduceAsync(std::span<float>(fv));
  if (!req.ok()) return Fail("async", req.status());
  if (auto s = req->Wait(); !s.ok()) return Fail("wait", s);
  for (int i = 0; i < kN; ++i) {
    if (iv[i] != static_cast<int32_t>(i * w * (w + 1) / 2) ||
        fv[i] != 0.5f * static_cast<float>(i % 100) * static_cast<float>(w * (w + 1) / 2)) {
      return Fail("result", ina::Internal("element " + std::to_string(i) + " is wrong"));
    }
  }
  const ina::host::CommStats st = (*comm)->stats();
  if (st.ops_completed != 2 || st.ops_failed != 0) return Fail("stats", ina::Internal("counts"));
  comm->reset();
  std::printf("consumer-cxx rank %u/%u: ok (libina %s)\n", r, w, ina_version_string());
  return 0;
}
