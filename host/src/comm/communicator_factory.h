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

// Settles config->k against the transports' largest message (Transport::max_message_bytes, the
// smallest over the lanes): k 0 becomes the largest proto::kKValues entry that fits
// (proto::LargestKFor; FailedPrecondition when none does); a set k whose messages do not fit is
// InvalidArgument naming both sizes, so a job never relies on IP fragmentation.
Status ResolveK(CommConfig* config, const std::vector<std::unique_ptr<Transport>>& transports);

// switch_cores auto: asks the switch at config's address (proto: hello over a lane-0 transport,
// resent every 100 ms until its hello_ack, for at most join_timeout_ms) how many cores take a
// job's lanes, and sets switch_cores to it (at most kMaxProgressThreads) and, when above 1,
// progress_threads too: lane c to core c. Says so once per process. Errors: the transport's;
// DeadlineExceeded naming the switch when none answered; Validate's for what it set.
Status AskSwitchCores(CommConfig* config);

// Caps config->window (slots asked) so that the results of each lane's share (window / lanes
// slots, one message of config->k each, which can arrive back to back) fit the kernel receive
// queue of its transport (Transport::rx_queue_messages; lanes without one do not limit). A
// process without CAP_NET_ADMIN gets at most net.core.rmem_max (Debian: 208 KiB, ~40 messages
// of K=2048), and a window past that has the kernel drop results that must then be fetched again
// (4x slower at 4 workers, docs/host.md "Socket buffers"). Returns what it did, in a sentence
// with the fix (empty: the window fits). REQUIRES: config->k resolved (ResolveK).
std::string FitWindow(CommConfig* config,
                      const std::vector<std::unique_ptr<Transport>>& transports);

class CommunicatorFactory {
 public:
  static Result<std::unique_ptr<Communicator>> Create(
      const CommConfig& config, const quant::Kernels& kernels,
      std::vector<std::unique_ptr<Transport>> transports);
};

}  // namespace ina::host::internal
