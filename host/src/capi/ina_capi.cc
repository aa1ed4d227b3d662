// The C API: a thin boundary over ina::host::Communicator. Status codes map 1:1 to ina_status;
// messages go to a thread-local buffer read through ina_last_error().
#include "ina/ina.h"

#include <cstring>
#include <memory>
#include <string>

#include "ina/host/communicator.h"

struct ina_comm {
  std::unique_ptr<ina::host::Communicator> comm;
};

struct ina_request {
  ina::host::Request req;
};

namespace {

#define INA_SAME_CODE(c, k) \
  static_assert(static_cast<int>(ina::StatusCode::k) == c, "ina_status out of sync: " #c)
INA_SAME_CODE(INA_OK, kOk);
INA_SAME_CODE(INA_ERR_INVALID_ARGUMENT, kInvalidArgument);
INA_SAME_CODE(INA_ERR_NOT_FOUND, kNotFound);
INA_SAME_CODE(INA_ERR_ALREADY_EXISTS, kAlreadyExists);
INA_SAME_CODE(INA_ERR_RESOURCE_EXHAUSTED, kResourceExhausted);
INA_SAME_CODE(INA_ERR_FAILED_PRECONDITION, kFailedPrecondition);
INA_SAME_CODE(INA_ERR_UNAVAILABLE, kUnavailable);
INA_SAME_CODE(INA_ERR_DEADLINE_EXCEEDED, kDeadlineExceeded);
INA_SAME_CODE(INA_ERR_ABORTED, kAborted);
INA_SAME_CODE(INA_ERR_DATA_LOSS, kDataLoss);
INA_SAME_CODE(INA_ERR_INTERNAL, kInternal);
INA_SAME_CODE(INA_ERR_UNIMPLEMENTED, kUnimplemented);
#undef INA_SAME_CODE

thread_local std::string g_last_error;

int Report(const ina::Status& s) {
  if (s.ok()) return INA_OK;
  g_last_error = s.ToString();
  return static_cast<int>(s.code());
}

int BadArg(const char* what) { return Report(ina::InvalidArgument(what)); }

void CopyString(char* dst, size_t cap, const std::string& src) {
  std::strncpy(dst, src.c_str(), cap - 1);
  dst[cap - 1] = '\0';
}

void FromCpp(const ina::host::CommConfig& c, ina_config* out) {
  std::memset(out, 0, sizeof(*out));
  CopyString(out->switch_host, sizeof(out->switch_host), c.switch_host);
  out->switch_port = c.switch_port;
  out->job_id = c.job_id;
  out->rank = c.rank;
  out->world_size = c.world_size;
  out->k = c.k;
  out->window = c.window;
  out->join_timeout_ms = c.join_timeout_ms;
  out->progress_timeout_ms = c.progress_timeout_ms;
  out->rto_min_us = c.rto_min_us;
  out->rto_max_us = c.rto_max_us;
  out->rto_initial_us = c.rto_initial_us;
  CopyString(out->transport, sizeof(out->transport), c.transport);
}

ina::host::CommConfig ToCpp(const ina_config& in) {
  ina::host::CommConfig c;
  c.switch_host.assign(in.switch_host, strnlen(in.switch_host, sizeof(in.switch_host)));
  c.switch_port = in.switch_port;
  c.job_id = in.job_id;
  c.rank = in.rank;
  c.world_size = in.world_size;
  c.k = in.k;
  c.window = in.window;
  c.join_timeout_ms = in.join_timeout_ms;
  c.progress_timeout_ms = in.progress_timeout_ms;
  c.rto_min_us = in.rto_min_us;
  c.rto_max_us = in.rto_max_us;
  c.rto_initial_us = in.rto_initial_us;
  c.transport.assign(in.transport, strnlen(in.transport, sizeof(in.transport)));
  return c;
}

template <typename T>
int Async(ina_comm* comm, T* data, size_t count, ina_request** req) {
  if (comm == nullptr || req == nullptr) return BadArg("ina_iallreduce: null comm or req");
  if (data == nullptr && count != 0) return BadArg("ina_iallreduce: null data");
  auto r = comm->comm->AllReduceAsync(std::span<T>(data, count));
  if (!r.ok()) return Report(r.status());
  *req = new ina_request{std::move(r).value()};
  return INA_OK;
}

template <typename T>
int Blocking(ina_comm* comm, T* data, size_t count) {
  if (comm == nullptr) return BadArg("ina_allreduce: null comm");
  if (data == nullptr && count != 0) return BadArg("ina_allreduce: null data");
  return Report(comm->comm->AllReduce(std::span<T>(data, count)));
}

}  // namespace

extern "C" {

int ina_config_init(ina_config* cfg) {
  if (cfg == nullptr) return BadArg("ina_config_init: null cfg");
  FromCpp(ina::host::CommConfig{}, cfg);
  auto r = ina::host::CommConfig::FromEnv(ina::host::CommConfig{});
  if (!r.ok()) return Report(r.status());
  FromCpp(*r, cfg);
  return INA_OK;
}

int ina_comm_create(const ina_config* cfg, ina_comm** out) {
  if (cfg == nullptr || out == nullptr) return BadArg("ina_comm_create: null cfg or out");
  *out = nullptr;
  auto r = ina::host::Communicator::Create(ToCpp(*cfg));
  if (!r.ok()) return Report(r.status());
  *out = new ina_comm{std::move(r).value()};
  return INA_OK;
}

void ina_comm_destroy(ina_comm* comm) { delete comm; }

uint16_t ina_comm_window(const ina_comm* comm) {
  return comm == nullptr ? 0 : comm->comm->window();
}

int ina_allreduce_f32(ina_comm* comm, float* data, size_t count) {
  return Blocking(comm, data, count);
}
int ina_allreduce_i32(ina_comm* comm, int32_t* data, size_t count) {
  return Blocking(comm, data, count);
}
int ina_iallreduce_f32(ina_comm* comm, float* data, size_t count, ina_request** req) {
  return Async(comm, data, count, req);
}
int ina_iallreduce_i32(ina_comm* comm, int32_t* data, size_t count, ina_request** req) {
  return Async(comm, data, count, req);
}

int ina_test(ina_request* req, int* done) {
  if (req == nullptr || done == nullptr) return BadArg("ina_test: null req or done");
  *done = req->req.Test() ? 1 : 0;
  return INA_OK;
}

int ina_wait(ina_request* req) {
  if (req == nullptr) return BadArg("ina_wait: null req");
  return Report(req->req.Wait());
}

void ina_request_free(ina_request* req) { delete req; }

const char* ina_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
