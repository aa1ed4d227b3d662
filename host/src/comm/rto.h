// The progress engine's retransmission timeout: ina::RtoEstimator (ina/base/rto.h), shared with
// a leaf switch's upstream side.
#pragma once

#include "ina/base/rto.h"

namespace ina::host::internal {

using ::ina::RtoConfig;
using ::ina::RtoEstimator;

}  // namespace ina::host::internal
