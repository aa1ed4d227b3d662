// Communicator::Create over transports the caller made, one per lane (CommConfig::
// progress_threads), already open to the fabric: the join, the progress threads and the rest as
// Create. For tests that wrap a real transport (e.g. to give it a NIC's gather list where no RDMA
// device is, tests/host/comm/gpudirect_test.cc). Errors: Create's, and InvalidArgument for a
// transport count other than progress_threads. `config` must be valid (Create validates it).
#pragma once

#include <memory>
#include <vector>

#include "ina/host/communicator.h"
#include "ina/host/quant.h"
#include "ina/host/transport.h"

namespace ina::host::internal {

class CommunicatorFactory {
 public:
  static Result<std::unique_ptr<Communicator>> Create(
      const CommConfig& config, const quant::Kernels& kernels,
      std::vector<std::unique_ptr<Transport>> transports);
};

}  // namespace ina::host::internal
