#include "job_id.h"

#include <random>

namespace ina::nccl {

Result<uint16_t> NewJobId(const host::CommConfig& config) {
  (void)config;
  std::random_device rd;
  return static_cast<uint16_t>(32768 + rd() % 32768);
}

}  // namespace ina::nccl
