// Prometheus metrics of ina-switchd (see ina/dp/switchd/metrics.h).
#include "ina/dp/switchd/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "ina/dp/switchd/leaf.h"
#include "ina/net/port.h"
#include "ina/proto/wire.h"

namespace ina::dp::switchd {
namespace {

// A counter of the switch loop, the control plane or a leaf, as Prometheus sees it. `labels` is
// preformatted (`reason="foreign_src"`) or empty.
struct OwnMetric {
  std::string_view counter;
  std::string_view family;
  std::string_view labels;
  std::string_view help;
};

constexpr std::string_view kDroppedHelp =
    "Packets the switch dropped, by reason (docs/protocol_table.md and docs/switchd.md).";
constexpr std::string_view kErrorsHelp = "Error messages sent, by error code (docs/protocol.md).";
constexpr std::string_view kEndedHelp =
    "Jobs freed, by how: left (aborting LEAVE), done (every rank left gracefully), timed_out, "
    "failed (the engine ended them: ranks disagree).";
constexpr std::string_view kFaultsHelp =
    "Faults injected by --drop-rate / --dup-rate / --reorder-rate (testing only).";

constexpr OwnMetric kOwn[] = {
    // The switch loop (SwitchCounter).
    {"rx_datagrams", "ina_switch_rx_datagrams_total", "",
     "Datagrams received from the ports, before fault injection."},
    {"rx_truncated", "ina_switch_rx_truncated_datagrams_total", "",
     "Datagrams longer than the receive buffer (handed on truncated; the engine drops them)."},
    {"drop_foreign_src", "ina_switch_dropped_packets_total", "reason=\"foreign_src\"",
     kDroppedHelp},
    {"inj_rx_drops", "ina_switch_injected_faults_total", "fault=\"rx_drop\"", kFaultsHelp},
    {"inj_rx_dups", "ina_switch_injected_faults_total", "fault=\"rx_dup\"", kFaultsHelp},
    {"inj_rx_reorders", "ina_switch_injected_faults_total", "fault=\"rx_reorder\"", kFaultsHelp},
    {"inj_tx_drops", "ina_switch_injected_faults_total", "fault=\"tx_drop\"", kFaultsHelp},
    {"inj_tx_dups", "ina_switch_injected_faults_total", "fault=\"tx_dup\"", kFaultsHelp},
    {"inj_tx_reorders", "ina_switch_injected_faults_total", "fault=\"tx_reorder\"", kFaultsHelp},
    {"tx_packets", "ina_switch_tx_packets_total", "", "Packets the kernel or the PMD accepted."},
    {"tx_errors", "ina_switch_tx_failed_packets_total", "",
     "Packets that could not be sent (dropped after the bounded waits, or an error)."},
    {"tx_waits", "ina_switch_tx_waits_total", "",
     "Times a send found the queue full and the loop waited for room."},
    {"jobs_freed", "ina_switch_jobs_freed_total", "",
     "Jobs freed, every way (the sum of ina_switch_jobs_ended_total)."},
    {"roce_short", "ina_switch_dropped_packets_total", "reason=\"roce_short\"", kDroppedHelp},
    {"roce_bad_icrc", "ina_switch_dropped_packets_total", "reason=\"roce_bad_icrc\"", kDroppedHelp},
    {"roce_bad_opcode", "ina_switch_dropped_packets_total", "reason=\"roce_bad_opcode\"",
     kDroppedHelp},
    {"roce_wrong_qpn", "ina_switch_dropped_packets_total", "reason=\"roce_wrong_qpn\"",
     kDroppedHelp},
    {"roce_bad_key", "ina_switch_dropped_packets_total", "reason=\"roce_bad_key\"", kDroppedHelp},
    {"roce_bad_psn", "ina_switch_dropped_packets_total", "reason=\"roce_bad_psn\"", kDroppedHelp},
    {"roce_psn_gaps", "ina_switch_roce_psn_gaps_total", "",
     "PSNs skipped by accepted RoCE packets (packets lost between a worker and the switch)."},
    {"handoff_rx", "ina_switch_handoff_packets_total", "direction=\"rx\"",
     "Packets passed to another core (rx: received for its job; tx: to send through its port)."},
    {"handoff_tx", "ina_switch_handoff_packets_total", "direction=\"tx\"",
     "Packets passed to another core (rx: received for its job; tx: to send through its port)."},
    {"handoff_drops", "ina_switch_dropped_packets_total", "reason=\"handoff_full\"", kDroppedHelp},
    {"rx_socket_drops", "ina_switch_dropped_packets_total", "reason=\"socket_buffer_full\"",
     kDroppedHelp},
    {"err_unknown_job", "ina_switch_errors_sent_by_code_total", "code=\"unknown_job\"",
     kErrorsHelp},
    // The control plane (ControlCounter).
    {"control_rx", "ina_switch_control_messages_total", "",
     "Control messages handled (JOIN, LEAVE, ALLOC_JOB)."},
    {"joins", "ina_switch_joins_total", "", "JOIN messages received."},
    {"leaves", "ina_switch_leaves_total", "", "LEAVE messages received."},
    {"join_acks", "ina_switch_join_acks_total", "", "JOIN_ACKs sent."},
    {"errors_sent", "ina_switch_errors_sent_total", "", "Error messages sent, all codes."},
    {"err_bad_params", "ina_switch_errors_sent_by_code_total", "code=\"bad_params\"", kErrorsHelp},
    {"err_rank_taken", "ina_switch_errors_sent_by_code_total", "code=\"rank_taken\"", kErrorsHelp},
    {"err_too_many_jobs", "ina_switch_errors_sent_by_code_total", "code=\"too_many_jobs\"",
     kErrorsHelp},
    {"err_no_slots", "ina_switch_errors_sent_by_code_total", "code=\"no_slots\"", kErrorsHelp},
    {"err_job_aborted", "ina_switch_errors_sent_by_code_total", "code=\"job_aborted\"",
     kErrorsHelp},
    {"leave_ignored", "ina_switch_leaves_ignored_total", "",
     "LEAVEs for an unknown job or from a peer that is not that rank."},
    {"control_malformed", "ina_switch_dropped_packets_total", "reason=\"control_malformed\"",
     kDroppedHelp},
    {"jobs_admitted", "ina_switch_jobs_admitted_total", "", "Jobs installed in the engine."},
    {"jobs_left", "ina_switch_jobs_ended_total", "how=\"left\"", kEndedHelp},
    {"jobs_timed_out", "ina_switch_jobs_ended_total", "how=\"timed_out\"", kEndedHelp},
    {"leaves_done", "ina_switch_graceful_leaves_total", "",
     "Graceful LEAVEs from ranks that finished."},
    {"jobs_done", "ina_switch_jobs_ended_total", "how=\"done\"", kEndedHelp},
    {"err_rank_left", "ina_switch_errors_sent_by_code_total", "code=\"rank_left\"", kErrorsHelp},
    {"allocs", "ina_switch_job_id_allocs_total", "", "ALLOC_JOB requests (job ids handed out)."},
    {"alloc_acks", "ina_switch_alloc_acks_total", "", "ALLOC_ACKs sent."},
    {"allocs_expired", "ina_switch_job_id_allocs_expired_total", "",
     "Job id reservations dropped because no JOIN came within the job timeout."},
    {"control_bad_crc", "ina_switch_dropped_packets_total", "reason=\"control_bad_crc\"",
     kDroppedHelp},
    {"err_peer_refused", "ina_switch_errors_sent_by_code_total", "code=\"peer_refused\"",
     kErrorsHelp},
    {"err_rank_mismatch", "ina_switch_errors_sent_by_code_total", "code=\"rank_mismatch\"",
     kErrorsHelp},
    {"jobs_failed", "ina_switch_jobs_ended_total", "how=\"failed\"", kEndedHelp},
    {"jobs_queued", "ina_switch_jobs_queued_total", "",
     "Jobs that had to wait for slots (queued, not admitted at once)."},
    {"join_waits", "ina_switch_join_waits_total", "", "JOIN_WAITs sent (job queued for slots)."},
    {"rejoins", "ina_switch_rejoins_total", "", "Re-JOINs at a lease's end (one per lane)."},
    {"regrants", "ina_switch_regrants_total", "",
     "Grants after a job's first (leases renewed, possibly with another window)."},
    {"joins_unauthorized", "ina_switch_joins_unauthorized_total", "",
     "JOINs refused with error(unauthorized): job keys required and the job has none."},
    {"keys_installed", "ina_switch_job_keys_installed_total", "",
     "Job keys installed (SET_KEY on the admin channel)."},
    {"admin_forged", "ina_switch_dropped_packets_total", "reason=\"admin_forged\"", kDroppedHelp},
    {"admin_replayed", "ina_switch_dropped_packets_total", "reason=\"admin_replayed\"",
     kDroppedHelp},
    {"admin_refused", "ina_switch_dropped_packets_total", "reason=\"admin_refused\"", kDroppedHelp},
    {"join_challenges", "ina_switch_join_challenges_total", "",
     "JOIN_CHALLENGEs sent (a JOIN of a keyed job must prove the job secret)."},
    {"joins_proven", "ina_switch_joins_proven_total", "",
     "JOINs whose proof of the job secret verified."},
    {"joins_unproven", "ina_switch_dropped_packets_total", "reason=\"joins_unproven\"",
     kDroppedHelp},
    {"hellos", "ina_switch_hellos_total", "",
     "hello messages answered (workers asking the switch's cores before they join)."},
    {"refused_below", "ina_switch_jobs_refused_below_total", "",
     "Jobs doomed because a leaf below refused one of its workers' JOINs (its LEAVE "
     "peer_refused)."},
    {"releases_asked", "ina_switch_idle_releases_asked_total", "",
     "Idle jobs asked to release their grant while another job waited for slots."},
    {"releases", "ina_switch_idle_releases_total", "",
     "Idle jobs' grants taken back (every lane re-joined after the release was asked)."},
    {"releases_cancelled", "ina_switch_idle_releases_called_off_total", "",
     "Releases called off: a rank called again before every lane re-joined."},
    {"release_stands", "ina_switch_idle_release_stands_total", "",
     "Re-joins for a release answered that the grant stands (called off, or heard late)."},
    {"join_pendings", "ina_switch_join_pendings_total", "",
     "JOIN_PENDINGs sent: resent JOINs of a job still waiting for ranks, told which has not "
     "joined."},
    // A leaf of two-level aggregation (LeafCounter, docs/hierarchy.md).
    {"leaf_up_joins", "ina_switch_leaf_up_joins_total", "", "JOINs sent to the spine."},
    {"leaf_up_data", "ina_switch_leaf_up_data_packets_total", "",
     "Partial sums sent to the spine, first sends."},
    {"leaf_up_retx", "ina_switch_leaf_up_retransmitted_packets_total", "",
     "Partial sums sent to the spine again."},
    {"leaf_up_results", "ina_switch_leaf_up_results_total", "", "Spine results accepted."},
    {"leaf_up_dup_results", "ina_switch_leaf_up_duplicate_results_total", "",
     "Spine results for a generation already final."},
    {"leaf_up_stale", "ina_switch_leaf_up_stale_packets_total", "",
     "Other packets from the spine ignored."},
    {"leaf_up_bad_crc", "ina_switch_leaf_up_bad_crc_packets_total", "",
     "Packets from the spine whose CRC32C trailer did not match."},
    {"leaf_up_errors", "ina_switch_leaf_up_errors_total", "",
     "Errors from the spine that ended a job."},
    {"leaf_up_leaves", "ina_switch_leaf_up_leaves_total", "", "LEAVEs sent to the spine."},
    {"leaf_down_results", "ina_switch_leaf_down_results_total", "",
     "Final results sent to workers (one per worker peer)."},
    {"leaf_down_resends", "ina_switch_leaf_down_resends_total", "",
     "Final results re-sent to a worker that retransmitted."},
    {"leaf_resend_pending", "ina_switch_leaf_resend_pending_total", "",
     "Worker retransmissions for a slot whose partial sum is still upstream."},
    {"leaf_foreign_rank", "ina_switch_dropped_packets_total", "reason=\"leaf_foreign_rank\"",
     kDroppedHelp},
    {"leaf_no_slots", "ina_switch_leaf_no_slots_total", "",
     "Jobs ended because the leaf's pool could not give the spine's window."},
    {"leaf_up_allocs", "ina_switch_leaf_up_allocs_total", "", "ALLOC_JOBs passed to the spine."},
    {"leaf_data_cross_job", "ina_switch_dropped_packets_total", "reason=\"leaf_data_cross_job\"",
     kDroppedHelp},
    {"leaf_data_forged", "ina_switch_dropped_packets_total", "reason=\"leaf_data_forged\"",
     kDroppedHelp},
    {"leaf_data_replayed", "ina_switch_dropped_packets_total", "reason=\"leaf_data_replayed\"",
     kDroppedHelp},
    {"leaf_up_forged", "ina_switch_dropped_packets_total", "reason=\"leaf_up_forged\"",
     kDroppedHelp},
    {"leaf_up_proofs", "ina_switch_leaf_up_proofs_total", "",
     "Proven JOINs sent to the spine (answers to its join_challenge)."},
    {"leaf_key_mismatch", "ina_switch_leaf_key_mismatch_total", "",
     "Jobs ended because only one of the leaf and the spine held the job's key."},
    {"leaf_up_keys", "ina_switch_leaf_up_keys_total", "",
     "Job keys passed on to the spine (SET_KEYs sent up, resends included)."},
    {"leaf_up_key_acks", "ina_switch_leaf_up_key_acks_total", "",
     "Job keys the spine acknowledged (each then acknowledged to its sender)."},
    {"leaf_up_key_timeouts", "ina_switch_leaf_up_key_timeouts_total", "",
     "Job keys the spine did not acknowledge in time (their senders got no ack)."},
    {"leaf_up_refusals", "ina_switch_leaf_up_refusals_total", "",
     "Jobs this leaf doomed because it refused one of its workers' JOINs while the job was "
     "joining, told to the spine (LEAVE peer_refused)."},
    {"leaf_up_key_refusals", "ina_switch_leaf_up_key_refusals_total", "",
     "Job keys the spine refused for their sec mode, which its engine cannot run (each refusal "
     "passed on to its sender)."},
};

const OwnMetric* FindOwn(std::string_view counter) {
  for (const OwnMetric& m : kOwn) {
    if (m.counter == counter) return &m;
  }
  return nullptr;
}

// Samples grouped by family, in first-seen order, so each family's HELP and TYPE come once.
class Exposition {
 public:
  void Add(std::string_view family, std::string_view type, std::string_view help,
           std::string labels, uint64_t value) {
    Family& f = Get(family, type, help);
    f.samples += std::string(family);
    if (!labels.empty()) f.samples += "{" + labels + "}";
    f.samples += " " + std::to_string(value) + "\n";
  }
  void AddDouble(std::string_view family, std::string_view type, std::string_view help,
                 double value) {
    char v[64];
    std::snprintf(v, sizeof(v), "%.3f", value);
    Get(family, type, help).samples += std::string(family) + " " + v + "\n";
  }
  std::string Text() const {
    std::string out;
    for (const Family& f : families_) {
      out += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
      out += "# TYPE " + f.name + " " + f.type + "\n";
      out += f.samples;
    }
    return out;
  }

 private:
  struct Family {
    std::string name, type, help, samples;
  };
  Family& Get(std::string_view name, std::string_view type, std::string_view help) {
    auto [it, fresh] = index_.try_emplace(std::string(name), families_.size());
    if (fresh) families_.push_back({std::string(name), std::string(type), std::string(help), {}});
    return families_[it->second];
  }
  static std::string EscapeHelp(std::string_view s) {
    std::string o;
    for (char c : s) {
      if (c == '\\') {
        o += "\\\\";
      } else if (c == '\n') {
        o += "\\n";
      } else {
        o += c;
      }
    }
    return o;
  }
  std::vector<Family> families_;
  std::map<std::string, size_t> index_;
};

std::string Label(std::string_view key, std::string_view value) {
  std::string v;
  for (char c : value) {
    if (c == '\\' || c == '"') v += '\\';
    v += c == '\n' ? 'n' : c;
  }
  return std::string(key) + "=\"" + v + "\"";
}

std::string Join(std::string a, const std::string& b) {
  if (b.empty()) return a;
  return a.empty() ? b : a + "," + b;
}

// The counters of one core, each under its family.
void AddCounters(Exposition& e, const NamedCounters& v, const std::string& core) {
  for (const auto& [name, value] : v) {
    bool engine = false;
    for (size_t i = 0; i < proto::kNumCounters; ++i) {
      if (proto::kCounterNames[i] != name) continue;
      const proto::CounterMetric& m = proto::kCounterMetrics[i];
      const std::string reason = m.reason.empty() ? "" : Label("reason", m.reason);
      e.Add(m.family, "counter", m.help, Join(core, reason), value);
      engine = true;
      break;
    }
    if (engine) continue;
    if (const OwnMetric* m = FindOwn(name)) {
      e.Add(m->family, "counter", m->help, Join(core, std::string(m->labels)), value);
    } else {
      e.Add("ina_switch_" + std::string(name) + "_total", "counter",
            "ina-switchd counter " + std::string(name) + " (docs/switchd.md).", core, value);
    }
  }
}

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

Result<net::Endpoint> ParseListenEndpoint(std::string_view endpoint) {
  const bool ephemeral = endpoint.ends_with(":0");
  std::string s(endpoint);
  if (ephemeral) s.back() = '1';
  INA_ASSIGN_OR_RETURN(net::Endpoint e, net::ParseEndpoint(s));
  if (ephemeral) {
    if (e.addr.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&e.addr)->sin_port = 0;
    } else {
      reinterpret_cast<sockaddr_in6*>(&e.addr)->sin6_port = 0;
    }
  }
  return e;
}

bool HasMetricFor(std::string_view counter) { return FindOwn(counter) != nullptr; }

std::string FormatMetrics(const SwitchStats& s) {
  Exposition e;
  e.Add("ina_switch_info", "gauge", "The switch's engine (value 1).",
        Label("engine", s.engine) + "," + Label("io", s.dpdk ? "dpdk" : "socket"), 1);
  e.AddDouble("ina_switch_uptime_seconds", "gauge", "Seconds since the switch started.",
              s.uptime_s);
  for (size_t c = 0; c < s.per_core.size(); ++c) {
    AddCounters(e, s.per_core[c], Label("core", std::to_string(c)));
  }
  // Jobs by state, per core.
  for (size_t c = 0; c < s.pool_slots.size(); ++c) {
    const std::string core = Label("core", std::to_string(c));
    e.Add("ina_switch_pool_slots", "gauge", "Aggregation slots of the core's engine.", core,
          s.pool_slots[c]);
    e.Add("ina_switch_slots_in_use", "gauge", "Slots granted to active jobs.", core,
          c < s.slots_in_use.size() ? s.slots_in_use[c] : 0);
    uint64_t active = 0, queued = 0, pending = 0;
    for (const JobSnapshot& j : s.jobs) {
      if (j.core != c) continue;
      (j.info.active ? active : j.info.queued ? queued : pending) += 1;
    }
    const char* help =
        "Jobs by state: active (aggregating), queued (waiting for slots), "
        "pending (waiting for ranks to join).";
    e.Add("ina_switch_jobs", "gauge", help, Join(core, Label("state", "active")), active);
    e.Add("ina_switch_jobs", "gauge", help, Join(core, Label("state", "queued")), queued);
    e.Add("ina_switch_jobs", "gauge", help, Join(core, Label("state", "pending")), pending);
  }
  for (const JobSnapshot& j : s.jobs) {
    const std::string l =
        Label("core", std::to_string(j.core)) + "," + Label("job", std::to_string(j.info.job_id));
    e.Add("ina_switch_job_world_size", "gauge", "Ranks of the job.", l, j.info.world_size);
    e.Add("ina_switch_job_k", "gauge", "Elements per packet (K) of the job.", l, j.info.k);
    e.Add("ina_switch_job_lanes", "gauge", "Peers per rank (lanes) of the job.", l, j.info.lanes);
    e.Add("ina_switch_job_slots", "gauge", "Slots granted to the job (0 until active).", l,
          j.info.active ? j.info.window : 0);
    e.Add("ina_switch_job_ranks_joined", "gauge", "Ranks of the job with every lane joined.", l,
          j.info.joined);
    e.Add("ina_switch_job_data_packets_total", "counter",
          "Data packets from the job's members (source checked), before the engine's checks.", l,
          j.info.data_packets);
  }
  for (const PortSnapshot& p : s.ports) {
    const std::string l = Label("core", std::to_string(p.core)) + "," + Label("port", p.name);
    e.Add("ina_switch_port_rx_packets_total", "counter", "Datagrams a port handed to the switch.",
          l, p.stats.rx_packets);
    e.Add("ina_switch_port_tx_packets_total", "counter", "Datagrams a port sent.", l,
          p.stats.tx_packets);
    e.Add("ina_switch_port_tx_dropped_packets_total", "counter",
          "Datagrams dropped inside a port (no buffer, ring full past the wait).", l,
          p.stats.tx_dropped);
    e.Add("ina_switch_port_rx_bad_checksum_packets_total", "counter",
          "Frames with a wrong IPv4 or UDP checksum (L2 ports), dropped.", l, p.stats.rx_bad_csum);
  }
  return e.Text();
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(std::string_view endpoint,
                                                            std::function<std::string()> render) {
  auto ep = ParseListenEndpoint(endpoint);
  if (!ep.ok()) return ep.status().WithContext("--metrics");
  const int fd = socket(ep->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(Errno("--metrics: socket"));
  const int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&ep->addr), ep->len) != 0 || listen(fd, 16) != 0) {
    Status st = Unavailable(Errno("--metrics: cannot listen on " + std::string(endpoint)));
    close(fd);
    return st;
  }
  net::Endpoint bound;
  bound.len = sizeof(bound.addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound.addr), &bound.len);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    Status st = Unavailable(Errno("--metrics: eventfd"));
    close(fd);
    return st;
  }
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(fd, wake, net::EndpointToString(bound), std::move(render)));
}

MetricsServer::MetricsServer(int fd, int wake_fd, std::string address,
                             std::function<std::string()> render)
    : fd_(fd), wake_fd_(wake_fd), address_(std::move(address)), render_(std::move(render)) {
  thread_ = std::thread([this] { Loop(); });
}

MetricsServer::~MetricsServer() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(fd_);
  close(wake_fd_);
}

void MetricsServer::Loop() {
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;  // the peer gave up, or out of fds: the next scrape retries
    Serve(conn);
    close(conn);
  }
}

void MetricsServer::Serve(int conn) {
  constexpr size_t kMaxRequest = 8192;
  constexpr auto kRequestTime = std::chrono::seconds(2);
  const timeval send_timeout{2, 0};
  (void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  // Read up to the end of the headers, bounded in bytes and time (a slow client cannot hold the
  // endpoint for longer than kRequestTime).
  std::string req;
  const auto deadline = std::chrono::steady_clock::now() + kRequestTime;
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || req.size() >= kMaxRequest) return;
    pollfd p{conn, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    char buf[1024];
    const ssize_t n = recv(conn, buf, sizeof(buf), 0);
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  const std::string_view line = std::string_view(req).substr(0, req.find_first_of("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 == std::string_view::npos ? 0 : sp1 + 1);
  std::string_view method = line.substr(0, sp1);
  std::string_view path = sp1 == std::string_view::npos ? "" : line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  int code = 200;
  std::string body;
  std::string type = "text/plain; version=0.0.4; charset=utf-8";
  if (method != "GET" && method != "HEAD") {
    code = 405;
    body = "only GET\n";
  } else if (path == "/metrics") {
    body = render_();
    scrapes_.fetch_add(1, std::memory_order_relaxed);
  } else if (path == "/") {
    type = "text/html; charset=utf-8";
    body = "<html><body><a href=\"/metrics\">ina-switchd metrics</a></body></html>\n";
  } else {
    code = 404;
    body = "not found: the metrics are at /metrics\n";
  }
  const char* reason = code == 200 ? "OK" : code == 404 ? "Not Found" : "Method Not Allowed";
  std::string out =
      "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" +
      (code == 405 ? "Allow: GET, HEAD\r\n" : "") + "\r\n";
  if (method != "HEAD") out += body;
  size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = send(conn, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away or stalled past SO_SNDTIMEO
    sent += static_cast<size_t>(n);
  }
}

}  // namespace ina::dp::switchd
