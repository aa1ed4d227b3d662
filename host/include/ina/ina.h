/* libina's C API: all-reduce through an ina fabric, for C callers and foreign-function bindings.
 *
 * Wraps ina::host::Communicator (ina/host/communicator.h; semantics in docs/host.md). Every
 * function returns an ina_status (INA_OK = 0 on success); on failure, ina_last_error() gives the
 * message of the last failed call on this thread (valid until the thread's next ina_* call).
 *
 * Threading: an ina_comm may be used from several threads (calls are serialised in its op queue);
 * an ina_request by one thread at a time. Tensors passed to ina_iallreduce_* must stay alive and
 * untouched until the request completes.
 *
 * ABI rule (libina.so, SONAME libina.so.<major> from 1.0 on, libina.so.0.<minor> before): the
 * structs the caller allocates (ina_config, ina_stats) start with `struct_size`, the size of the
 * struct as the caller's ina.h declared it. New fields are only ever appended, never removed,
 * reordered or resized, and there are no nested structs that could grow. The library keeps the
 * size of every earlier layout: it reads and writes only the fields a caller's layout has, and
 * gives fields the caller does not know their defaults; a size it does not know (a program built
 * against a newer ina.h than the library, or garbage) is INA_ERR_INVALID_ARGUMENT naming both
 * sizes. The inline wrappers ina_config_init and ina_comm_stats pass sizeof for you (as zlib's
 * deflateInit passes sizeof(z_stream)); foreign-function bindings call the *_sized functions with
 * the size of the layout they declare. Functions and ina_status values are only ever added.
 * Needs C99 or later (static inline) or any C++. */
#ifndef INA_INA_H_
#define INA_INA_H_

#include <stddef.h>
#include <stdint.h>

#include "ina/version.h"

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

/* Every field of ina::host::CommConfig (and its DpdkConfig, flattened with a dpdk_ prefix); fill
 * with ina_config_init, then change what you need. Strings are NUL-terminated; a value that does
 * not fit its array is an error, never truncated. */
typedef struct ina_config {
  size_t struct_size; /* sizeof(ina_config) as the caller saw it; set by ina_config_init */
  char switch_host[256];
  uint16_t switch_port;
  uint16_t job_id;
  uint16_t rank;
  uint16_t world_size;
  uint16_t k; /* elements per packet, 64 .. 2048; 0 (default): the largest the path MTU carries */
  uint16_t window;
  int join_timeout_ms;
  int progress_timeout_ms;
  int rto_min_us;
  int rto_max_us;
  int rto_initial_us;
  char transport[32];
  int socket_buffer_bytes; /* SO_RCVBUF / SO_SNDBUF request */
  /* transport "dpdk" only (ina/host/transport.h, DpdkConfig) */
  char dpdk_eal_args[1024]; /* EAL command line, whitespace-separated, without argv[0] */
  char dpdk_port[64];       /* ethdev name; empty: the first port */
  char dpdk_local_ip[64];   /* this worker's IPv4 address on the fabric */
  uint16_t dpdk_local_port; /* this worker's UDP port */
  char dpdk_local_mac[32];  /* "aa:bb:cc:dd:ee:ff"; empty: the port's own */
  char dpdk_fabric_mac[32]; /* the switch's MAC; empty: learnt from its packets */
  int dpdk_backoff_max_us;  /* idle RX back-off ceiling */
  int dpdk_zero_copy;       /* 0 or 1: attach TX buffers as external mbufs when the port allows */
  int progress_threads;     /* lanes: progress threads (one socket each) per rank, 1 .. 16 */
  /* 0.2 */
  char quant[16]; /* quantization kernels: "auto", "scalar", "avx2" or "avx512" */
  int udp_gso;    /* 0 or 1: transport "udp" sends UDP GSO trains and receives with GRO */
  /* 0.3: transport "verbs" only (ina/host/transport.h, VerbsConfig; docs/rdma.md) */
  char verbs_device[64];     /* RDMA device ("rxe0", "mlx5_0"); empty: the first one */
  int verbs_port;            /* device port, 1..255 */
  int verbs_gid_index;       /* source GID index; -1: the port's first RoCE v2 IPv4 GID */
  int verbs_mtu;             /* path MTU 256..4096; 0: the port's active MTU */
  uint32_t verbs_remote_qpn; /* the fabric's QP number (24 bits) */
  uint32_t verbs_qkey;       /* Q_Key of both sides */
  int verbs_send_depth;      /* send queue and TX bounce slots, 1..16384 */
  int verbs_recv_depth;      /* posted receive buffers, 1..16384 */
  int slot_wait_timeout_ms;  /* how long a JOIN waits for slots in a shared pool (join_wait) */
  uint64_t staging_bytes;    /* staging of device-memory calls pre-sized for tensors this large */
  int dpdk_mtu;              /* transport "dpdk": the frames' IP MTU, 576..9000 (9000: K=2048) */
  int switch_cores;          /* lanes on switch cores: lane l to core l at switch_port + l; 1: off;
                                0: ask the switch (hello, udp) and use all its cores */
  /* Authenticated jobs (docs/security.md): "crc" (no security, the default), "mac" or
   * "mac_encrypt"; a keyed mode needs the job secret, set with ina_config_set_job_key (or from
   * INA_JOB_KEY by ina_config_init). The library never prints it; ina_config_wipe_job_key clears
   * it here, and a communicator wipes its own copy when destroyed. */
  char job_sec[16];
  uint8_t job_key[64];
  uint32_t job_key_len; /* bytes of job_key in use: 0 or 16..64 */
  /* New fields go here, at the end (see the ABI rule above). */
} ina_config;

/* ina::host::CommStats: a snapshot of a communicator's counters. */
typedef struct ina_stats {
  size_t struct_size;        /* sizeof(ina_stats) as the caller saw it */
  uint64_t packets_sent;     /* data packets, first sends and retransmissions */
  uint64_t packets_received; /* every packet the transport returned */
  uint64_t retransmissions;
  uint64_t results;               /* results accepted */
  uint64_t stale_results_ignored; /* results for an old generation, another job, malformed */
  uint64_t ops_completed;
  uint64_t ops_failed;
  uint64_t bad_crc; /* packets dropped: CRC32C trailer not matching (the second layout) */
  /* of packets_sent, those whose payload the NIC read from device memory (GPUDirect RDMA,
   * docs/gpu.md; the third layout) */
  uint64_t packets_from_device;
  /* keyed jobs: results dropped, their tag did not verify (forged, rewritten, replayed; the
   * fourth layout) */
  uint64_t results_forged;
  /* drops by the kernel before the library read them (a packet, or a GSO train that arrived
   * whole): a socket receive buffer full (udp; docs/host.md "Socket buffers"; the fifth layout) */
  uint64_t socket_drops;
  /* New fields go here, at the end. */
} ina_stats;

/* The library's version, INA_VERSION's encoding (major * 10000 + minor * 100 + patch), and as a
 * string ("0.1.0"). Compare with INA_VERSION (ina/version.h) to see the headers' version. */
uint32_t ina_version(void);
const char* ina_version_string(void);

/* Defaults, then the INA_* environment overrides, into the first struct_size bytes of *cfg (whose
 * struct_size it sets). INA_ERR_INVALID_ARGUMENT for an unknown struct_size (cfg is then
 * untouched), a malformed variable (cfg then holds the defaults) or a value longer than its array.
 */
int ina_config_init_sized(ina_config* cfg, size_t struct_size);
static inline int ina_config_init(ina_config* cfg) {
  return ina_config_init_sized(cfg, sizeof(ina_config));
}

/* Joins the job (blocks up to join_timeout_ms). On success *out is a new communicator.
 * INA_ERR_INVALID_ARGUMENT for an unknown cfg->struct_size, a string field without its NUL, or a
 * config that CommConfig::Validate rejects (the message names the field). */
/* The job secret (16..64 bytes, from the job's rendezvous; never from a command line) into
 * cfg->job_key; sets job_sec to "mac" when it is "crc". INA_ERR_INVALID_ARGUMENT for another
 * length (cfg then untouched). */
int ina_config_set_job_key(ina_config* cfg, const void* key, size_t len);
/* Wipes cfg->job_key (and job_key_len) once the communicator is created. */
void ina_config_wipe_job_key(ina_config* cfg);
int ina_comm_create(const ina_config* cfg, ina_comm** out);
/* Fails pending requests (ABORTED), leaves the job, frees comm. NULL is a no-op. */
void ina_comm_destroy(ina_comm* comm);
/* The window (slots) the fabric granted. */
uint16_t ina_comm_window(const ina_comm* comm);
/* A snapshot of the counters into the first struct_size bytes of *out (whose struct_size it
 * sets). Thread-safe. INA_ERR_INVALID_ARGUMENT for a null argument or an unknown struct_size. */
int ina_comm_stats_sized(const ina_comm* comm, ina_stats* out, size_t struct_size);
static inline int ina_comm_stats(const ina_comm* comm, ina_stats* out) {
  return ina_comm_stats_sized(comm, out, sizeof(ina_stats));
}

/* The counters of ina_stats as Prometheus text (exposition format 0.0.4: ina_worker_*_total,
 * labels job and rank; docs/host.md "Metrics"), NUL-terminated into buf[0 .. cap). *len (when not
 * NULL) gets the text's length without the NUL, also on INA_ERR_RESOURCE_EXHAUSTED: cap too small
 * (buf untouched; call again with cap = *len + 1). Thread-safe. */
int ina_comm_metrics(const ina_comm* comm, char* buf, size_t cap, size_t* len);

/* In-place sum over all ranks; blocking. */
int ina_allreduce_f32(ina_comm* comm, float* data, size_t count);
int ina_allreduce_i32(ina_comm* comm, int32_t* data, size_t count); /* exact, wrapping */

/* Queues an in-place sum; on success *req is a new request to test/wait and then free. */
int ina_iallreduce_f32(ina_comm* comm, float* data, size_t count, ina_request** req);
int ina_iallreduce_i32(ina_comm* comm, int32_t* data, size_t count, ina_request** req);

/* The same four, averaged: the sum divided by the world size (float32: one IEEE division per
 * element of the float sum; int32: the wrapped sum divided truncating toward zero). Every rank
 * must average the same calls. AllReduceOptions::average in ina/host/communicator.h. */
int ina_allreduce_avg_f32(ina_comm* comm, float* data, size_t count);
int ina_allreduce_avg_i32(ina_comm* comm, int32_t* data, size_t count);
int ina_iallreduce_avg_f32(ina_comm* comm, float* data, size_t count, ina_request** req);
int ina_iallreduce_avg_i32(ina_comm* comm, int32_t* data, size_t count, ina_request** req);

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
