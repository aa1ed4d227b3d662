/* Drives libina through ina.h from C. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "capi_rank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ina/ina.h"

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      snprintf(err, cap, "%s:%d: %s (last error: %s)", __FILE__, __LINE__, #cond, \
               ina_last_error());                                                 \
      return __LINE__;                                                            \
    }                                                                             \
  } while (0)

int capi_check_config(char* err, size_t cap) {
  ina_config c;
  CHECK(ina_config_init(&c) == INA_OK);
  CHECK(c.struct_size == sizeof(ina_config));
  CHECK(strcmp(c.switch_host, "127.0.0.1") == 0);
  CHECK(c.switch_port == 47000);
  CHECK(c.world_size == 1 && c.rank == 0 && c.k == 0 && c.window == 256); /* k 0: from the MTU */
  CHECK(strcmp(c.transport, "udp") == 0);
  CHECK(c.progress_timeout_ms == 5000 && c.join_timeout_ms == 10000);
  setenv("INA_WORLD", "4", 1);
  setenv("INA_SWITCH", "10.1.2.3:999", 1);
  CHECK(ina_config_init(&c) == INA_OK);
  CHECK(c.world_size == 4);
  CHECK(strcmp(c.switch_host, "10.1.2.3") == 0 && c.switch_port == 999);
  setenv("INA_WORLD", "many", 1);
  CHECK(ina_config_init(&c) == INA_ERR_INVALID_ARGUMENT);
  CHECK(strstr(ina_last_error(), "INA_WORLD") != NULL);
  unsetenv("INA_WORLD");
  unsetenv("INA_SWITCH");
  CHECK(ina_config_init(NULL) == INA_ERR_INVALID_ARGUMENT);
  CHECK(ina_config_init_sized(&c, sizeof(c) + 1) == INA_ERR_INVALID_ARGUMENT);
  CHECK(strstr(ina_last_error(), "struct_size") != NULL);
  return 0;
}

int capi_run_rank(uint16_t port, uint16_t rank, uint16_t world, char* err, size_t cap) {
  enum { kN = 1000 };
  ina_config c;
  ina_comm* comm = NULL;
  ina_request* req = NULL;
  int done = 0;
  size_t i;
  int32_t* iv = malloc(kN * sizeof(int32_t));
  float* fv = malloc(kN * sizeof(float));
  CHECK(iv != NULL && fv != NULL);
  CHECK(ina_config_init(&c) == INA_OK);
  c.switch_port = port;
  c.rank = rank;
  c.world_size = world;
  c.k = 64;
  c.window = 8;
  c.join_timeout_ms = 5000;
  CHECK(ina_comm_create(&c, &comm) == INA_OK);
  CHECK(ina_comm_window(comm) == 8);

  for (i = 0; i < kN; ++i) iv[i] = (int32_t)((rank + 1) * i);
  CHECK(ina_allreduce_i32(comm, iv, kN) == INA_OK);
  for (i = 0; i < kN; ++i) CHECK(iv[i] == (int32_t)(i * world * (world + 1) / 2));

  /* Small multiples of 1/2 quantize exactly, so the float sum is exact too. */
  for (i = 0; i < kN; ++i) fv[i] = 0.5f * (float)(i % 100) * (float)(rank + 1);
  CHECK(ina_iallreduce_f32(comm, fv, kN, &req) == INA_OK);
  CHECK(ina_test(req, &done) == INA_OK);
  CHECK(ina_wait(req) == INA_OK);
  CHECK(ina_test(req, &done) == INA_OK && done == 1);
  ina_request_free(req);
  for (i = 0; i < kN; ++i) {
    CHECK(fv[i] == 0.5f * (float)(i % 100) * (float)(world * (world + 1) / 2));
  }

  /* Averaged: the wrapped sum divided by the world, truncating toward zero (C's `/`), and the
   * float sum divided by (float)world with one IEEE division. */
  for (i = 0; i < kN; ++i) iv[i] = (int32_t)((rank + 1) * i) - 7 * (int32_t)rank;
  CHECK(ina_allreduce_avg_i32(comm, iv, kN) == INA_OK);
  for (i = 0; i < kN; ++i) {
    const int32_t sum =
        (int32_t)(i * world * (world + 1) / 2) - 7 * (int32_t)(world * (world - 1) / 2);
    CHECK(iv[i] == sum / (int32_t)world);
  }
  for (i = 0; i < kN; ++i) fv[i] = 0.5f * (float)(i % 100) * (float)(rank + 1);
  CHECK(ina_iallreduce_avg_f32(comm, fv, kN, &req) == INA_OK);
  CHECK(ina_wait(req) == INA_OK);
  ina_request_free(req);
  for (i = 0; i < kN; ++i) {
    CHECK(fv[i] == 0.5f * (float)(i % 100) * (float)(world * (world + 1) / 2) / (float)world);
  }

  CHECK(ina_iallreduce_i32(comm, iv, 0, &req) == INA_OK); /* empty: done at once */
  CHECK(ina_test(req, &done) == INA_OK && done == 1);
  CHECK(ina_wait(req) == INA_OK);
  ina_request_free(req);

  {
    ina_stats st;
    CHECK(ina_comm_stats(comm, &st) == INA_OK);
    CHECK(st.struct_size == sizeof(st));
    CHECK(st.ops_completed >= 4 && st.ops_failed == 0);
    CHECK(st.packets_sent >= 2 * ((kN + 63) / 64) && st.results >= 2 * ((kN + 63) / 64));
  }
  {
    /* The same counters as Prometheus text: too small a buffer says the size it needs. */
    char small[16], big[8192], want[128];
    size_t len = 0, len2 = 0;
    ina_stats st;
    CHECK(ina_comm_metrics(comm, small, sizeof(small), &len) == INA_ERR_RESOURCE_EXHAUSTED);
    CHECK(len > sizeof(small) && len < sizeof(big));
    CHECK(ina_comm_stats(comm, &st) == INA_OK); /* no call runs: the counters stand still */
    CHECK(ina_comm_metrics(comm, big, sizeof(big), &len2) == INA_OK);
    CHECK(len2 == strlen(big) && len2 >= len);
    CHECK(strstr(big, "# TYPE ina_worker_ops_completed_total counter\n") != NULL);
    snprintf(want, sizeof(want), "ina_worker_ops_completed_total{job=\"%u\",rank=\"%u\"} %llu\n",
             (unsigned)c.job_id, (unsigned)rank, (unsigned long long)st.ops_completed);
    CHECK(strstr(big, want) != NULL);
    CHECK(ina_comm_metrics(NULL, big, sizeof(big), NULL) == INA_ERR_INVALID_ARGUMENT);
  }
  CHECK(ina_version() == INA_VERSION);

  ina_comm_destroy(comm);
  free(iv);
  free(fv);
  return 0;
}

int capi_check_errors(uint16_t dead_port, char* err, size_t cap) {
  ina_config c;
  ina_comm* comm = (ina_comm*)1;
  float x = 1.0f;
  CHECK(ina_allreduce_f32(NULL, &x, 1) == INA_ERR_INVALID_ARGUMENT);
  CHECK(strlen(ina_last_error()) > 0);
  CHECK(ina_config_init(&c) == INA_OK);
  c.k = 100;
  CHECK(ina_comm_create(&c, &comm) == INA_ERR_INVALID_ARGUMENT);
  CHECK(comm == NULL);
  CHECK(strstr(ina_last_error(), "k 100") != NULL);
  c.k = 256;
  c.switch_port = dead_port;
  c.join_timeout_ms = 300;
  CHECK(ina_comm_create(&c, &comm) == INA_ERR_DEADLINE_EXCEEDED);
  CHECK(strstr(ina_last_error(), "DEADLINE_EXCEEDED") != NULL);
  ina_comm_destroy(NULL);
  ina_request_free(NULL);
  return 0;
}
