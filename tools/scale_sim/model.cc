#include "model.h"

#include <xbt/log.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <simgrid/s4u.hpp>
#include <utility>

#include "ina/proto/wire.h"

namespace ina::scalesim {
namespace {

namespace sg = simgrid::s4u;

constexpr int kMaxTotalWorkers = 2048;
constexpr double kHostFlops = 1e9;  // every host's speed; costs are seconds * kHostFlops  //
                                    // SimGrid's full routing table is (hosts)^2 entries

// Wire bytes of one ina frame of `count` elements: Ethernet/IPv4/UDP + ina message + overhead.
double FrameWireBytes(const Config& c, int count) {
  return static_cast<double>(proto::kFramePrefixBytes + proto::MessageBytes(count) + c.overhead);
}

// The chunks one ina worker sends per call: the exponent round (float only), then the data.
struct InaPlan {
  std::vector<double> bytes;  // wire bytes of chunk i
  std::vector<int> packets;   // frames in chunk i
  std::vector<int64_t> dep;   // chunk i goes once chunk dep[i]'s result is back; -1: at once
  int64_t window_chunks = 1;  // data chunks in flight
  int64_t chunk_packets = 1;
  double wire_bytes = 0;
};

InaPlan MakeInaPlan(const Config& c) {
  InaPlan p;
  const int64_t blocks = (c.elements + c.k - 1) / c.k;
  const int64_t slots = std::min<int64_t>(c.window, blocks);
  int64_t g = 1;
  while ((blocks + g - 1) / g > c.max_chunks) g *= 2;
  p.chunk_packets = g;
  const int64_t exp_chunks = c.int32 ? 0 : (slots + g - 1) / g;
  // Chunks are forwarded whole (store and forward at each of the 2 or 4 stages), so a chunk's
  // result comes back a few chunk times after it went: keep stages + 2 chunks in flight so that
  // this artefact never stalls a worker. Where that exceeds W frames, only a window-limited
  // network would tell the difference, and WindowLimited() flags it.
  const int64_t stages = c.leaf_size > 0 ? 4 : 2;
  p.window_chunks = (slots + g - 1) / g;
  if (blocks > slots) p.window_chunks = std::max<int64_t>(stages + 2, p.window_chunks);
  for (int64_t s = 0; s < exp_chunks; ++s) {
    const int n = static_cast<int>(std::min(g, slots - s * g));
    p.packets.push_back(n);
    p.bytes.push_back(n * FrameWireBytes(c, 0));
    p.dep.push_back(-1);
  }
  for (int64_t b = 0, j = 0; b < blocks; b += g, ++j) {
    const int64_t last = std::min(blocks, b + g);
    double bytes = 0;
    for (int64_t x = b; x < last; ++x) {
      bytes += FrameWireBytes(c, static_cast<int>(std::min<int64_t>(c.k, c.elements - x * c.k)));
    }
    p.packets.push_back(static_cast<int>(last - b));
    p.bytes.push_back(bytes);
    // The first use of a slot in a call waits for its exponent; later ones for the slot's
    // previous result.
    if (j < p.window_chunks) {
      p.dep.push_back(exp_chunks > 0 ? std::min(j, exp_chunks - 1) : -1);
    } else {
      p.dep.push_back(exp_chunks + j - p.window_chunks);
    }
  }
  for (double b : p.bytes) p.wire_bytes += b;
  return p;
}

struct RingStep {
  double data = 0;  // wire bytes one rank sends per step
  double ack = 0;   // wire bytes of the ACKs it sends back for the data it receives
};

RingStep MakeRingStep(const Config& c) {
  const double payload = 4.0 * static_cast<double>(c.elements) / c.workers;
  const double segs = std::ceil(payload / c.mss);
  const double per_seg = c.tcp_header + c.overhead;
  return {(payload + segs * per_seg) / c.tcp_efficiency,
          c.acks ? std::ceil(segs / 2) * per_seg : 0.0};
}

// The items an actor serves in arrival order, each not before its ready time: Push from any
// actor; Next blocks until one is queued, waits until it is ready and returns its index.
class ReadyQueue {
 public:
  void Push(int64_t i, double ready) {
    queue_.emplace_back(i, ready);
    sem_->release();
  }
  int64_t Next() {
    sem_->acquire();
    const auto [i, ready] = queue_.front();
    queue_.pop_front();
    if (ready > sg::Engine::get_clock()) sg::this_actor::sleep_until(ready);
    return i;
  }

 private:
  sg::SemaphorePtr sem_ = sg::Semaphore::create(0);
  std::deque<std::pair<int64_t, double>> queue_;
};

// One direction of one hop, FIFO: chunks go one at a time, each once its ready time has come; on
// arrival (after the hop's latency) `deliver` runs with the chunk and its ready time there.
class Port {
 public:
  using Deliver = std::function<void(int64_t, double)>;
  Port(sg::Host* from, sg::Host* to, double latency, const std::vector<double>* bytes,
       int64_t count, Deliver deliver)
      : from_(from),
        to_(to),
        latency_(latency),
        bytes_(bytes),
        count_(count),
        deliver_(std::move(deliver)) {}
  void Push(int64_t i, double ready) { queue_.Push(i, ready); }
  void Run() {
    for (int64_t n = 0; n < count_; ++n) {
      const int64_t i = queue_.Next();
      sg::Comm::sendto(from_, to_, static_cast<uint64_t>(std::llround((*bytes_)[i])));
      deliver_(i, sg::Engine::get_clock() + latency_);
    }
  }
  sg::Host* from() const { return from_; }

 private:
  sg::Host* from_;
  sg::Host* to_;
  double latency_;
  const std::vector<double>* bytes_;
  int64_t count_;
  Deliver deliver_;
  ReadyQueue queue_;
};

// A software switch's packet processing: what arrives on one port waits for `cost` seconds of the
// switch host's one CPU per packet (SimGrid shares the CPU between all ports and jobs of that
// switch) before `handler` sees it.
class Ingress {
 public:
  Ingress(sg::Host* host, double cost, const std::vector<int>* packets, int64_t count,
          Port::Deliver handler)
      : host_(host), cost_(cost), packets_(packets), count_(count), handler_(std::move(handler)) {}
  void Push(int64_t i, double ready) { queue_.Push(i, ready); }
  void Run() {
    for (int64_t n = 0; n < count_; ++n) {
      const int64_t i = queue_.Next();
      sg::this_actor::execute((*packets_)[i] * cost_ * kHostFlops);
      handler_(i, sg::Engine::get_clock());
    }
  }
  sg::Host* host() const { return host_; }

 private:
  sg::Host* host_;
  double cost_;
  const std::vector<int>* packets_;
  int64_t count_;
  Port::Deliver handler_;
  ReadyQueue queue_;
};

// A switch's share of one job: sums each chunk over its children, then sends the sum up (a leaf
// under a spine) or multicasts it down (the root). A leaf multicasts what comes down.
struct Node {
  int children = 0;
  std::vector<int> count;
  std::vector<double> ready;
  Port* up = nullptr;
  std::vector<Port*> down;
  void FromChild(int64_t i, double t) {
    ready[i] = std::max(ready[i], t);
    if (++count[i] < children) return;
    if (up != nullptr) {
      up->Push(i, ready[i]);
    } else {
      FromParent(i, ready[i]);
    }
  }
  void FromParent(int64_t i, double t) {
    for (Port* d : down) d->Push(i, t);
  }
};

// An ina worker: sends chunk i once chunk i - W's result is back (and host_cost later).
struct InaWorker {
  sg::Host* host = nullptr;
  sg::Host* sw = nullptr;
  Port::Deliver to_switch;
  const InaPlan* plan = nullptr;
  const Config* cfg = nullptr;
  std::vector<double> result;
  sg::SemaphorePtr results = sg::Semaphore::create(0);
  int64_t consumed = 0;  // results taken off `results`
  double done = 0;
  void OnResult(int64_t i, double t) {
    result[i] = t;
    done = std::max(done, t);
    results->release();
  }
  void Run() {
    const int64_t items = static_cast<int64_t>(plan->bytes.size());
    for (int64_t i = 0; i < items; ++i) {
      if (const int64_t d = plan->dep[i]; d >= 0) {
        // Results come back in chunk order (FIFO ports, sums completed in order).
        for (; consumed <= d; ++consumed) results->acquire();
        const double t = result[d] + cfg->host_cost_s;
        if (t > sg::Engine::get_clock()) sg::this_actor::sleep_until(t);
      }
      const double start = sg::Engine::get_clock();
      sg::Comm::sendto(host, sw, static_cast<uint64_t>(std::llround(plan->bytes[i])));
      const double arrive = sg::Engine::get_clock() + cfg->hop_latency_s;
      to_switch(i, arrive);
      const double cpu = plan->packets[i] * cfg->host_cost_s;  // one packet per host_cost at most
      if (sg::Engine::get_clock() - start < cpu) sg::this_actor::sleep_until(start + cpu);
    }
  }
};

// A ring rank: step k sends to the next rank, then waits for the previous rank's step-k data.
struct RingWorker {
  sg::Host* host = nullptr;
  sg::Host* next = nullptr;
  RingWorker* next_worker = nullptr;
  double next_latency = 0;  // hops to the next rank * hop latency
  const RingStep* step = nullptr;
  const Config* cfg = nullptr;
  int steps = 0;
  std::vector<double> arrived;
  sg::SemaphorePtr got = sg::Semaphore::create(0);
  double done = 0;
  void Run() {
    for (int k = 0; k < steps; ++k) {
      // The ACKs' bytes ride with the data: in a ring every link carries one rank's data and
      // the next rank's ACKs, so the bytes per link are the same, while separate ACK flows would
      // chain all of a ring's flows into one max-min component (quadratic in n per step).
      sg::Comm::sendto(host, next, std::llround(step->data + step->ack));
      next_worker->arrived[k] = sg::Engine::get_clock() + next_latency;
      next_worker->got->release();
      got->acquire();
      const double t = arrived[k] + cfg->ring_step_s;
      if (t > sg::Engine::get_clock()) sg::this_actor::sleep_until(t);
    }
    done = sg::Engine::get_clock();
  }
};

class Platform {
 public:
  explicit Platform(const Config& c) : cfg_(c), zone_(sg::create_full_zone("world")) {}
  sg::Host* Host(const std::string& name) {
    auto& h = hosts_[name];
    if (h == nullptr) h = zone_->create_host(name, kHostFlops)->seal();
    return h;
  }
  sg::Link* Link(const std::string& name, double bps) {
    auto& l = links_[name];
    if (l == nullptr) l = zone_->create_link(name, bps / 8)->set_latency(0)->seal();
    return l;
  }
  void Route(sg::Host* a, sg::Host* b, const std::vector<sg::Link*>& links) {
    if (!routed_.insert({a, b}).second) return;
    std::vector<sg::LinkInRoute> route;
    for (sg::Link* l : links) route.emplace_back(l);
    zone_->add_route(a->get_netpoint(), b->get_netpoint(), nullptr, nullptr, route, false);
  }
  void Seal() { zone_->seal(); }

 private:
  const Config& cfg_;
  sg::NetZone* zone_;
  std::map<std::string, sg::Host*> hosts_;
  std::map<std::string, sg::Link*> links_;
  std::set<std::pair<sg::Host*, sg::Host*>> routed_;
};

}  // namespace

std::string Validate(const Config& c) {
  if (c.workers < 2) return "--workers wants at least 2";
  if (c.jobs < 1) return "--jobs wants at least 1";
  if (static_cast<int64_t>(c.workers) * c.jobs > kMaxTotalWorkers) {
    return "--workers x --jobs is at most " + std::to_string(kMaxTotalWorkers);
  }
  if (c.leaf_size < 0) return "--leaf-size wants 0 (flat) or workers per leaf";
  if (c.leaf_size == 0 && c.spread) return "--placement spread needs --leaf-size";
  if (!(c.rate_bps > 0)) return "--rate wants a positive rate";
  if (!(c.oversub >= 1)) return "--oversub wants >= 1";
  if (c.elements < 1) return "--elements wants at least 1";
  if (!proto::IsValidK(static_cast<uint32_t>(c.k)))
    return "--k wants one of the protocol's K values";
  if (c.window < 1) return "--window wants at least 1";
  if (c.overhead < 0) return "--overhead wants bytes >= 0";
  if (c.hop_latency_s < 0 || c.host_cost_s < 0 || c.ring_step_s < 0 || c.switch_cost_s < 0) {
    return "latencies and costs want >= 0";
  }
  if (c.mss < 1 || c.tcp_header < 0) return "--mss wants >= 1 and --tcp-header >= 0";
  if (c.max_chunks < 1) return "--max-chunks wants at least 1";
  if (!(c.tcp_efficiency > 0 && c.tcp_efficiency <= 1)) return "--tcp-efficiency wants (0, 1]";
  return "";
}

bool WindowLimited(const Config& c, int levels) {
  const double rtt = 2.0 * levels * c.hop_latency_s + c.host_cost_s;
  const double window_s = c.window * FrameWireBytes(c, c.k) * 8 / c.rate_bps;
  return window_s < rtt;
}

double RingClosedForm(const Config& c, int hops) {
  const RingStep s = MakeRingStep(c);
  const double step = (s.data + s.ack) * 8 / c.rate_bps + hops * c.hop_latency_s + c.ring_step_s;
  return 2.0 * (c.workers - 1) * step;
}

Result RunModel(const Config& c) {
  xbt_log_control_set("root.thresh:critical");
  int argc = 1;
  char arg0[] = "ina-scale-sim";
  char* argv[] = {arg0, nullptr};
  sg::Engine engine(&argc, argv);
  // CM02: plain max-min sharing, no LV08 bandwidth/latency factors (every byte is counted here);
  // no cross-traffic (the ring's ACKs are modelled as flows of their own).
  sg::Engine::set_config("network/model:CM02");
  sg::Engine::set_config("network/crosstraffic:0");
  if (const char* extra = std::getenv("INA_SCALE_SIM_SIMGRID_CFG"); extra != nullptr) {
    sg::Engine::set_config(extra);
  }

  Platform pf(c);
  const int total = c.workers * c.jobs;
  const bool two_level = c.leaf_size > 0;
  const int leaves = two_level ? (total + c.leaf_size - 1) / c.leaf_size : 1;
  auto leaf_of = [&](int g) { return !two_level ? 0 : c.spread ? g % leaves : g / c.leaf_size; };
  auto worker_host = [&](int g) { return pf.Host("w" + std::to_string(g)); };
  auto leaf_host = [&](int l) { return pf.Host(two_level ? "leaf" + std::to_string(l) : "sw"); };
  sg::Host* spine = two_level ? pf.Host("spine") : nullptr;
  auto up = [&](int g) { return pf.Link("up" + std::to_string(g), c.rate_bps); };
  auto down = [&](int g) { return pf.Link("down" + std::to_string(g), c.rate_bps); };
  const double uplink_bps = c.leaf_size * c.rate_bps / c.oversub;
  auto lup = [&](int l) { return pf.Link("lup" + std::to_string(l), uplink_bps); };
  auto ldown = [&](int l) { return pf.Link("ldown" + std::to_string(l), uplink_bps); };
  auto hops = [&](int g, int h) { return leaf_of(g) == leaf_of(h) ? 2 : 4; };

  Result res;
  std::vector<std::unique_ptr<Port>> ports;
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::unique_ptr<Ingress>> ingress;
  std::vector<std::unique_ptr<InaWorker>> ina;
  std::vector<std::unique_ptr<RingWorker>> ring;
  const InaPlan plan = MakeInaPlan(c);
  const RingStep step = MakeRingStep(c);
  const int64_t items = static_cast<int64_t>(plan.bytes.size());
  int ring_hops = 4;
  // What arrives at switch `host` goes to `handler`, through the switch's CPU if it has a cost.
  auto through = [&](sg::Host* host, Port::Deliver handler) -> Port::Deliver {
    if (c.switch_cost_s <= 0) return handler;
    ingress.push_back(
        std::make_unique<Ingress>(host, c.switch_cost_s, &plan.packets, items, std::move(handler)));
    Ingress* in = ingress.back().get();
    return [in](int64_t i, double t) { in->Push(i, t); };
  };

  for (int j = 0; j < c.jobs; ++j) {
    const int g0 = j * c.workers;
    if (c.algo == Algo::kIna) {
      std::map<int, Node*> leaf_nodes;  // leaf -> this job's node there
      for (int r = 0; r < c.workers; ++r) {
        const int l = leaf_of(g0 + r);
        if (leaf_nodes.count(l) == 0) {
          nodes.push_back(std::make_unique<Node>());
          leaf_nodes[l] = nodes.back().get();
        }
      }
      Node* spine_node = nullptr;
      if (leaf_nodes.size() > 1) {
        nodes.push_back(std::make_unique<Node>());
        spine_node = nodes.back().get();
        res.levels = 2;
      }
      for (auto& n : nodes) {
        n->count.assign(items, 0);
        n->ready.assign(items, 0.0);
      }
      for (int r = 0; r < c.workers; ++r) {
        const int g = g0 + r;
        const int l = leaf_of(g);
        Node* node = leaf_nodes[l];
        auto w = std::make_unique<InaWorker>();
        w->host = worker_host(g);
        w->sw = leaf_host(l);
        w->to_switch = through(w->sw, [node](int64_t i, double t) { node->FromChild(i, t); });
        w->plan = &plan;
        w->cfg = &c;
        w->result.assign(items, 0.0);
        pf.Route(w->host, w->sw, {up(g)});
        pf.Route(w->sw, w->host, {down(g)});
        InaWorker* wp = w.get();
        ports.push_back(std::make_unique<Port>(w->sw, w->host, c.hop_latency_s, &plan.bytes, items,
                                               [wp](int64_t i, double t) { wp->OnResult(i, t); }));
        node->down.push_back(ports.back().get());
        node->children++;
        ina.push_back(std::move(w));
      }
      if (spine_node != nullptr) {
        for (auto [l, node] : leaf_nodes) {
          pf.Route(leaf_host(l), spine, {lup(l)});
          pf.Route(spine, leaf_host(l), {ldown(l)});
          ports.push_back(std::make_unique<Port>(
              leaf_host(l), spine, c.hop_latency_s, &plan.bytes, items,
              through(spine, [spine_node](int64_t i, double t) { spine_node->FromChild(i, t); })));
          node->up = ports.back().get();
          Node* leaf = node;
          ports.push_back(std::make_unique<Port>(
              spine, leaf_host(l), c.hop_latency_s, &plan.bytes, items,
              through(leaf_host(l), [leaf](int64_t i, double t) { leaf->FromParent(i, t); })));
          spine_node->down.push_back(ports.back().get());
          spine_node->children++;
        }
      }
    } else {
      const size_t first = ring.size();
      for (int r = 0; r < c.workers; ++r) {
        auto w = std::make_unique<RingWorker>();
        w->host = worker_host(g0 + r);
        w->step = &step;
        w->cfg = &c;
        w->steps = 2 * (c.workers - 1);
        w->arrived.assign(w->steps, 0.0);
        ring.push_back(std::move(w));
      }
      for (int r = 0; r < c.workers; ++r) {
        const int g = g0 + r;
        const int gn = g0 + (r + 1) % c.workers;
        RingWorker* w = ring[first + r].get();
        w->next_worker = ring[first + (r + 1) % c.workers].get();
        w->next = w->next_worker->host;
        w->next_latency = hops(g, gn) * c.hop_latency_s;
        if (j == 0) ring_hops = std::min(ring_hops, hops(g, gn));
        if (leaf_of(g) == leaf_of(gn)) {
          pf.Route(worker_host(g), worker_host(gn), {up(g), down(gn)});
        } else {
          pf.Route(worker_host(g), worker_host(gn),
                   {up(g), lup(leaf_of(g)), ldown(leaf_of(gn)), down(gn)});
        }
      }
    }
  }
  pf.Seal();

  for (auto& p : ports) {
    Port* pp = p.get();
    sg::Actor::create("port", pp->from(), [pp] { pp->Run(); });
  }
  for (auto& in : ingress) {
    Ingress* ip = in.get();
    sg::Actor::create("ingress", ip->host(), [ip] { ip->Run(); });
  }
  for (auto& w : ina) {
    InaWorker* wp = w.get();
    sg::Actor::create("ina", wp->host, [wp] { wp->Run(); });
  }
  for (auto& w : ring) {
    RingWorker* wp = w.get();
    sg::Actor::create("ring", wp->host, [wp] { wp->Run(); });
  }
  engine.run();

  res.job_s.assign(c.jobs, 0.0);
  for (int j = 0; j < c.jobs; ++j) {
    for (int r = 0; r < c.workers; ++r) {
      const size_t x = static_cast<size_t>(j) * c.workers + r;
      const double t = c.algo == Algo::kIna ? ina[x]->done : ring[x]->done;
      res.job_s[j] = std::max(res.job_s[j], t);
    }
  }
  if (c.algo == Algo::kIna) {
    res.wire_bytes = plan.wire_bytes;
    res.bound_s = plan.wire_bytes * 8 / c.rate_bps;
    res.chunk_packets = plan.chunk_packets;
    res.window_chunks = plan.window_chunks;
    res.items = items;
  } else {
    res.wire_bytes = 2.0 * (c.workers - 1) * (step.data + step.ack);
    res.bound_s = RingClosedForm(c, ring_hops);
    res.items = 2 * (c.workers - 1);
  }
  return res;
}

}  // namespace ina::scalesim
