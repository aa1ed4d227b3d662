// The NCCL plugin ABI as NCCL 2.28.9 sees it: ncclNet_v10/v11_t and ncclCollNet_v10/v11_t.
//
// Upstream builds these tables from nccl.h plus src/include/plugin/nccl_net.h; neither is needed
// here. The vendored headers (third_party/nccl, tag v2.28.9-1, BSD-3-Clause) give the tables and
// the basic types; this file adds the few definitions they take from nccl.h, with nccl.h's
// values: ncclRedOp_t (an int-sized enum) and the data types after bfloat16.
#pragma once

#include <stddef.h>
#include <stdint.h>

// The vendored headers depend on this order (common.h uses err.h's ncclResult_t).
// clang-format off
#include "ext-net/err.h"
#include "ext-net/types.h"
#include "ext-net/common.h"
#include "ext-net/net_device.h"
// clang-format on

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_MAX_NET_SIZE_BYTES (1 * 1024 * 1024 * 1024 * 1024L)  // 1 TB
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC 4

// nccl.h 2.28: ncclSum=0, ncclProd=1, ncclMax=2, ncclMin=3, ncclAvg=4; user-defined ops above.
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;
// nccl.h 2.28 data types that ext-net/types.h (which stops at bfloat16) lacks.
constexpr int kNcclFloat8e4m3 = 10;
constexpr int kNcclFloat8e5m2 = 11;
constexpr int kNcclNumTypes = 12;

#include "plugin/net/net_v10.h"
#include "plugin/net/net_v11.h"
