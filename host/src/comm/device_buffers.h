// DeviceBuffers: a communicator's buffers for tensors in a memory domain's memory (docs/host.md,
// "Device memory"; docs/gpu.md): the host staging of each domain used, and the GPUDirect RDMA NIC
// buffer that quantizing calls send from where the transport can post device memory.
//
// Lifetimes: a buffer handed out stays valid until the DeviceBuffers is destroyed. Nothing is
// freed earlier: a buffer outgrown is kept (for CUDA, cudaFreeHost / cudaFree may wait for the
// device, where a framework's kernel may be waiting for this very op), and a NIC buffer outgrown
// is unregistered from the transports but freed only at destruction.
//
// The transports are the communicator's lanes' (borrowed): NicWire registers the NIC buffer with
// each of them. The destructor touches none of them, so the transports may be destroyed first
// (they deregister what they still hold).
//
// Threading: Staging and ReserveNic from any thread (ReserveStaging's caller) and lane 0's; NicWire
// from lane 0's thread only, between ops (a transport is used by its lane's thread only);
// send_path() from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ina/base/status.h"
#include "ina/host/config.h"
#include "ina/host/memory_domain.h"
#include "ina/host/transport.h"

namespace ina::host::internal {

class DeviceBuffers {
 public:
  // `transports`: every lane's, lane 0 first; they must outlive every NicWire call.
  DeviceBuffers(const CommConfig& config, std::vector<Transport*> transports);

  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  // Staging of at least `bytes` bytes from `domain`, and at least what config.staging_bytes asks
  // for: the domain's cached buffer while large enough, else a new one. Errors: the domain's
  // allocation failure, with context.
  Result<uint8_t*> Staging(MemoryDomain& domain, size_t bytes);

  // The NIC buffer a quantizing op of `bytes` int32 bytes in `domain` sends from (GPUDirect RDMA),
  // or nullptr for host staging: always where the transport sends from host memory only (udp,
  // dpdk), and, after one line on stderr saying why, for the rest of the communicator's life
  // where the domain has no NIC buffer or the transport cannot register it. As Staging: at least
  // config.staging_bytes' worth, kept across calls while large enough, taken from ReserveNic's
  // reservation when that is large enough. Lane 0's thread, between ops.
  uint8_t* NicWire(MemoryDomain& domain, size_t bytes);

  // Allocates the NIC buffer now for quantizing calls of up to `bytes` int32 bytes in `domain`,
  // where the GPUDirect path may be taken; NicWire registers it at the next call. Errors: none (a
  // failed allocation is the next call's fallback, with its line).
  void ReserveNic(MemoryDomain& domain, size_t bytes);

  // "gpudirect", "host staging: <why>", or empty before the first quantizing call.
  std::string send_path() const;

 private:
  size_t NicFloor() const { return cfg_.staging_bytes; }  // the int32 of that many bytes of floats
  // Unregisters the NIC buffer from the lanes that registered it (each waits for its posted
  // sends) and keeps it, outgrown, until destruction.
  Status UnregisterNicWire();
  void NoteSendPath(std::string path);

  struct DomainStaging {
    const MemoryDomain* domain;
    std::unique_ptr<StagingBuffer> buffer;
  };

  const CommConfig cfg_;
  const std::vector<Transport*> transports_;

  std::mutex staging_mu_;
  std::vector<DomainStaging> staging_;                            // guarded by staging_mu_
  std::vector<std::unique_ptr<StagingBuffer>> outgrown_staging_;  // guarded by staging_mu_

  // GPUDirect RDMA (NicWire): lane 0's thread only.
  std::unique_ptr<NicBuffer> nic_;
  const MemoryDomain* nic_domain_ = nullptr;
  size_t nic_registered_ = 0;  // lanes 0.. whose transport registered nic_
  std::mutex nic_mu_;          // guards the three below (ReserveNic's caller vs lane 0)
  bool nic_off_ = false;       // host staging for good (the reason was printed)
  std::unique_ptr<NicBuffer> reserved_nic_;  // ReserveNic's, not registered yet
  const MemoryDomain* reserved_nic_domain_ = nullptr;
  // Outgrown or failed NIC buffers, freed only at destruction (a failed unregistration may leave
  // one registered: the transport is destroyed first).
  std::vector<std::unique_ptr<NicBuffer>> outgrown_nic_;

  mutable std::mutex path_mu_;
  std::string send_path_;  // guarded by path_mu_
};

}  // namespace ina::host::internal
