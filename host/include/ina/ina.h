/* libina's C API: all-reduce through an ina fabric, for C callers and foreign-function bindings.
 *
 * Wraps ina::host::Communicator (ina/host/communicator.h; semantics in docs/host.md). Every
 * function returns an ina_status (INA_OK = 0 on success); on failure, ina_last_error() gives the
 * message of the last failed call on this thread (valid until the thread's next ina_* call).
 *
 * Threading: an ina_comm may be used from several threads (calls are serialised in its op queue);
 * an ina_request by one thread at a time. Tensors passed to ina_iallreduce_* must stay alive and
 * untouched until the request completes. */
#ifndef INA_INA_H_
#define INA_INA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors ina::StatusCode. */
typedef enum ina_status {
  INA_OK = 0,
  INA_ERR_INVALID_ARGUMENT = 1,
  INA_ERR_NOT_FOUND = 2,
  INA_ERR_ALREADY_EXISTS = 3,
  INA_ERR_RESOURCE_EXHAUSTED = 4,
  INA_ERR_FAILED_PRECONDITION = 5,
  INA_ERR_UNAVAILABLE = 6,
  INA_ERR_DEADLINE_EXCEEDED = 7,
  INA_ERR_ABORTED = 8,
  INA_ERR_DATA_LOSS = 9,
  INA_ERR_INTERNAL = 10,
  INA_ERR_UNIMPLEMENTED = 11,
} ina_status;

typedef struct ina_comm ina_comm;       /* opaque: one rank of one job */
typedef struct ina_request ina_request; /* opaque: an async all-reduce */

/* The fields of ina::host::CommConfig; fill with ina_config_init, then change what you need. */
typedef struct ina_config {
  char switch_host[256]; /* NUL-terminated */
  uint16_t switch_port;
  uint16_t job_id;
  uint16_t rank;
  uint16_t world_size;
  uint16_t k;
  uint16_t window;
  int join_timeout_ms;
  int progress_timeout_ms;
  int rto_min_us;
  int rto_max_us;
  int rto_initial_us;
  char transport[32]; /* NUL-terminated */
} ina_config;

/* Defaults, then the INA_* environment overrides. INA_ERR_INVALID_ARGUMENT for a malformed
 * variable (cfg then holds the defaults with the valid overrides before it). */
int ina_config_init(ina_config* cfg);

/* Joins the job (blocks up to join_timeout_ms). On success *out is a new communicator. */
int ina_comm_create(const ina_config* cfg, ina_comm** out);
/* Fails pending requests (ABORTED), leaves the job, frees comm. NULL is a no-op. */
void ina_comm_destroy(ina_comm* comm);
/* The window (slots) the fabric granted. */
uint16_t ina_comm_window(const ina_comm* comm);

/* In-place sum over all ranks; blocking. */
int ina_allreduce_f32(ina_comm* comm, float* data, size_t count);
int ina_allreduce_i32(ina_comm* comm, int32_t* data, size_t count); /* exact, wrapping */

/* Queues an in-place sum; on success *req is a new request to test/wait and then free. */
int ina_iallreduce_f32(ina_comm* comm, float* data, size_t count, ina_request** req);
int ina_iallreduce_i32(ina_comm* comm, int32_t* data, size_t count, ina_request** req);

/* *done = 1 once the request finished (its status is then available through ina_wait). */
int ina_test(ina_request* req, int* done);
/* Blocks until the request finished; returns its status. */
int ina_wait(ina_request* req);
/* Frees a request (finished or not; an unfinished op still completes). NULL is a no-op. */
void ina_request_free(ina_request* req);

/* The message of the last failed call on this thread ("" if none). */
const char* ina_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* INA_INA_H_ */
