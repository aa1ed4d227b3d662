// ina-pps-ceiling: what plain DPDK moves over one ethdev with the traffic shape of one ina worker,
// the ceiling that scripts/bench-pps.sh sets ina's packets/s against.
//
//   ina-pps-ceiling --role echo   --eal "EAL ARGS" [--seconds S]
//   ina-pps-ceiling --role client --eal "EAL ARGS" [--frame-bytes B] [--window W] [--seconds S]
//
// echo: receives bursts and sends every frame straight back (MAC addresses swapped), as a switch
// that does no work would. client: keeps W frames of B bytes in flight (one ina worker's window of
// slots), and for every frame that comes back writes a fresh one (the bytes copied from a template,
// as a worker writes a quantized block) and sends it; after a warm-up of a quarter of the run it
// counts returned frames for the rest, and prints one JSON line:
//   {"ceiling_pps": P, "frame_bytes": B, "window": W, "seconds": S}
// Raw rte_ethdev calls only, nothing of ina's stack, on purpose. Stops on SIGINT/SIGTERM or after
// S seconds (echo: default until signalled, or once its link went down after being up). Exit 1 when
// the EAL or the port cannot start, or when the client saw no frame come back.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint16_t kRing = 1024;
constexpr int kMaxFrame = 9014;  // a 9000-byte jumbo frame (ina at K=2048: 8260 bytes)
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Args {
  std::string role;
  std::string eal;
  int frame_bytes = 1088;  // Ethernet + IPv4 + UDP + ina header + 256 int32: one K=256 block
  int window = 256;
  double seconds = 0;  // 0: echo runs until signalled, client 3 s
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--role") {
      a->role = v;
    } else if (f == "--eal") {
      a->eal = v;
    } else if (f == "--frame-bytes") {
      a->frame_bytes = std::atoi(v.c_str());
    } else if (f == "--window") {
      a->window = std::atoi(v.c_str());
    } else if (f == "--seconds") {
      a->seconds = std::atof(v.c_str());
    } else {
      return false;
    }
  }
  if (argc % 2 != 1) return false;
  return (a->role == "echo" || a->role == "client") && a->frame_bytes >= 60 &&
         a->frame_bytes <= kMaxFrame && a->window >= 1 && a->window <= kRing && a->seconds >= 0;
}

int Fail(const char* what, int rc) {
  std::fprintf(stderr, "ina-pps-ceiling: %s: %s\n", what, rte_strerror(rc < 0 ? -rc : rc));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: ina-pps-ceiling --role echo|client --eal \"ARGS\" [--frame-bytes 60..9014]"
                 " [--window 1..1024] [--seconds S]\n");
    return 2;
  }
  std::vector<std::string> words = {"ina-pps-ceiling"};
  std::istringstream in(a.eal);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> eargv;
  for (auto& w : words) eargv.push_back(w.data());
  eargv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(words.size()), eargv.data()) < 0) {
    return Fail("rte_eal_init", rte_errno);
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  if (rte_eth_dev_count_avail() == 0) return Fail("no ethdev (--vdev)", ENODEV);
  const uint16_t port = 0;
  // One mbuf per frame, jumbo ones too (both sides use the same size); the default size for
  // frames that fit it.
  const auto room = static_cast<uint16_t>(
      std::max<int>(RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + a.frame_bytes));
  rte_mempool* pool = rte_pktmbuf_pool_create("ceiling", 4095, 128, 0, room, rte_socket_id());
  if (pool == nullptr) return Fail("mbuf pool", rte_errno);
  rte_eth_conf conf{};
  if (int rc = rte_eth_dev_configure(port, 1, 1, &conf); rc != 0) return Fail("configure", rc);
  if (int rc = rte_eth_rx_queue_setup(port, 0, kRing, rte_socket_id(), nullptr, pool); rc != 0) {
    return Fail("rx_queue_setup", rc);
  }
  if (int rc = rte_eth_tx_queue_setup(port, 0, kRing, rte_socket_id(), nullptr); rc != 0) {
    return Fail("tx_queue_setup", rc);
  }
  if (int rc = rte_eth_dev_start(port); rc != 0) return Fail("dev_start", rc);

  using Clock = std::chrono::steady_clock;
  if (a.role == "client") {  // memif connects asynchronously: time the run from link up
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    rte_eth_link link{};
    while ((void)rte_eth_link_get_nowait(port, &link), link.link_status != RTE_ETH_LINK_UP) {
      if (g_stop || Clock::now() > give_up) {
        std::fprintf(stderr, "ina-pps-ceiling: the link did not come up within 10 s\n");
        return 1;
      }
      rte_delay_us_sleep(1000);
    }
  }
  const double run_s = a.seconds > 0 ? a.seconds : (a.role == "client" ? 3.0 : 1e9);
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(run_s));
  rte_mbuf* rx[kBurst];
  if (a.role == "echo") {
    bool was_up = false;
    while (!g_stop && Clock::now() < end) {
      // Stop once the client went away (memif: link down), before its rings are torn down.
      rte_eth_link link{};
      (void)rte_eth_link_get_nowait(port, &link);
      if (link.link_status == RTE_ETH_LINK_UP) {
        was_up = true;
      } else if (was_up) {
        break;
      }
      for (int spin = 0; spin < 1024; ++spin) {
        const uint16_t n = rte_eth_rx_burst(port, 0, rx, kBurst);
        if (n == 0) {
          rte_pause();
          continue;
        }
        for (uint16_t i = 0; i < n; ++i) {
          auto* eth = rte_pktmbuf_mtod(rx[i], rte_ether_hdr*);
          std::swap(eth->src_addr, eth->dst_addr);
        }
        const uint16_t sent = rte_eth_tx_burst(port, 0, rx, n);
        if (sent < n) rte_pktmbuf_free_bulk(rx + sent, n - sent);
      }
    }
  } else {
    std::vector<uint8_t> tmpl(a.frame_bytes);
    for (size_t i = 0; i < tmpl.size(); ++i) tmpl[i] = static_cast<uint8_t>(i * 7 + 1);
    std::memset(tmpl.data(), 0xff, 6);          // broadcast destination; the echo swaps it back
    auto fresh = [&](uint16_t n) -> uint16_t {  // allocates, fills and sends n frames
      rte_mbuf* tx[kBurst];
      if (rte_pktmbuf_alloc_bulk(pool, tx, n) != 0) return 0;
      for (uint16_t i = 0; i < n; ++i) {
        auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(tx[i], a.frame_bytes));
        std::memcpy(p, tmpl.data(), tmpl.size());
      }
      const uint16_t sent = rte_eth_tx_burst(port, 0, tx, n);
      if (sent < n) rte_pktmbuf_free_bulk(tx + sent, n - sent);
      return sent;
    };
    long in_flight = 0;
    const auto warm = start + (end - start) / 4;
    uint64_t counted = 0;
    bool counting = false;
    Clock::time_point t0{};
    while (!g_stop) {
      if (in_flight < a.window) {
        const long want = std::min<long>(kBurst, a.window - in_flight);
        in_flight += fresh(static_cast<uint16_t>(want));
      }
      const uint16_t n = rte_eth_rx_burst(port, 0, rx, kBurst);
      if (n > 0) {
        rte_pktmbuf_free_bulk(rx, n);
        in_flight -= n;
        if (counting) counted += n;
      }
      const auto now = Clock::now();
      if (!counting && now >= warm) {
        counting = true;
        t0 = now;
        counted = 0;
      }
      if (now >= end) break;
      // Frames lost before the echo was up: refill the window after a quiet 100 ms.
      static Clock::time_point last_rx = now;
      if (n > 0) last_rx = now;
      if (now - last_rx > std::chrono::milliseconds(100)) {
        in_flight = 0;
        last_rx = now;
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("{\"ceiling_pps\": %.0f, \"frame_bytes\": %d, \"window\": %d, \"seconds\": %.3f}\n",
                s > 0 ? counted / s : 0.0, a.frame_bytes, a.window, s);
    std::fflush(stdout);
    if (counted == 0) {
      std::fprintf(stderr, "ina-pps-ceiling: no frame came back\n");
      return 1;
    }
  }
  (void)rte_eth_dev_stop(port);
  (void)rte_eth_dev_close(port);
  (void)rte_eal_cleanup();
  return 0;
}
