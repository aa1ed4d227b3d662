// The CommConfig that capi_fill_every_field (capi_fill.c, capi_fill.h) describes, and
// field-by-field checks. The checks bind every field by name (structured bindings): a field added
// to CommConfig or DpdkConfig makes them fail to compile until the C API and these tests carry it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "ina/host/config.h"

namespace ina::host::testing {

inline CommConfig EveryFieldConfig(uint16_t port, bool runnable) {
  CommConfig c;
  c.switch_host = runnable ? "127.0.0.1" : "fabric.example";
  c.switch_port = port;
  c.job_id = 77;
  c.rank = runnable ? 0 : 2;
  c.world_size = runnable ? 1 : 3;
  c.k = 64;
  c.window = 16;
  c.join_timeout_ms = 3000;
  c.progress_timeout_ms = 4000;
  c.rto_min_us = 700;
  c.rto_max_us = 150000;
  c.rto_initial_us = 6000;
  c.transport = runnable ? "udp" : "dpdk";
  c.socket_buffer_bytes = 1 << 20;
  c.dpdk.eal_args = "-l 0 --no-pci --vdev=net_memif0,role=client";
  c.dpdk.port = "net_memif0";
  c.dpdk.local_ip = "10.0.0.2";
  c.dpdk.local_port = 4711;
  c.dpdk.local_mac = "02:00:00:00:00:02";
  c.dpdk.fabric_mac = "02:00:00:00:00:01";
  c.dpdk.backoff_max_us = 250;
  c.dpdk.zero_copy = false;
  c.dpdk.mtu = 9000;
  c.progress_threads = 2;
  c.quant = "scalar";
  c.udp_gso = false;
  c.verbs.device = "rxe1";
  c.verbs.port = 2;
  c.verbs.gid_index = 3;
  c.verbs.mtu = 2048;
  c.verbs.remote_qpn = 0x123;
  c.verbs.qkey = 0x11223344;
  c.verbs.send_depth = 64;
  c.verbs.recv_depth = 128;
  c.slot_wait_timeout_ms = 9000;
  c.staging_bytes = 3 << 20;
  c.switch_cores = runnable ? 1 : 2;
  if (!runnable) {
    uint8_t key[20];
    for (int i = 0; i < 20; ++i) key[i] = static_cast<uint8_t>(0xA0 + i);
    c.sec = "mac_encrypt";
    c.job_secret = JobSecret(key);
  }
  return c;
}

// EXPECTs every field of got == want (same == true) or != want (same == false).
inline void ExpectFields(const CommConfig& got, const CommConfig& want, bool same) {
  const auto& [g0, g1, g2, g3, g4, g5, g6, g7, gs, g8, g9, g10, g11, gp, g12, g13, gd, gv, gq, gg,
               gb, gc, gsec, gkey] = got;
  const auto& [w0, w1, w2, w3, w4, w5, w6, w7, ws, w8, w9, w10, w11, wp, w12, w13, wd, wv, wq, wg,
               wb, wc, wsec, wkey] = want;
  const auto& [gd0, gd1, gd2, gd3, gd4, gd5, gd6, gd7, gd8] = gd;
  const auto& [wd0, wd1, wd2, wd3, wd4, wd5, wd6, wd7, wd8] = wd;
  const auto& [gv0, gv1, gv2, gv3, gv4, gv5, gv6, gv7] = gv;
  const auto& [wv0, wv1, wv2, wv3, wv4, wv5, wv6, wv7] = wv;
  auto check = [&](std::string_view name, const auto& g, const auto& w) {
    if (same) {
      EXPECT_EQ(g, w) << name;
    } else {
      EXPECT_NE(g, w) << name;
    }
  };
  check("switch_host", g0, w0);
  check("switch_port", g1, w1);
  check("job_id", g2, w2);
  check("rank", g3, w3);
  check("world_size", g4, w4);
  check("k", g5, w5);
  check("window", g6, w6);
  check("join_timeout_ms", g7, w7);
  check("slot_wait_timeout_ms", gs, ws);
  check("progress_timeout_ms", g8, w8);
  check("rto_min_us", g9, w9);
  check("rto_max_us", g10, w10);
  check("rto_initial_us", g11, w11);
  check("progress_threads", gp, wp);
  check("transport", g12, w12);
  check("socket_buffer_bytes", g13, w13);
  check("dpdk.eal_args", gd0, wd0);
  check("dpdk.port", gd1, wd1);
  check("dpdk.local_ip", gd2, wd2);
  check("dpdk.local_port", gd3, wd3);
  check("dpdk.local_mac", gd4, wd4);
  check("dpdk.fabric_mac", gd5, wd5);
  check("dpdk.backoff_max_us", gd6, wd6);
  check("dpdk.zero_copy", gd7, wd7);
  check("dpdk.mtu", gd8, wd8);
  check("quant", gq, wq);
  check("udp_gso", gg, wg);
  check("verbs.device", gv0, wv0);
  check("verbs.port", gv1, wv1);
  check("verbs.gid_index", gv2, wv2);
  check("verbs.mtu", gv3, wv3);
  check("verbs.remote_qpn", gv4, wv4);
  check("verbs.qkey", gv5, wv5);
  check("verbs.send_depth", gv6, wv6);
  check("verbs.recv_depth", gv7, wv7);
  check("staging_bytes", gb, wb);
  check("switch_cores", gc, wc);
  check("sec", gsec, wsec);
  check("job_secret", std::vector<uint8_t>(gkey.bytes().begin(), gkey.bytes().end()),
        std::vector<uint8_t>(wkey.bytes().begin(), wkey.bytes().end()));
}

}  // namespace ina::host::testing
