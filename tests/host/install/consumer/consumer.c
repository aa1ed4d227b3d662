/* A C program built against an installed libina (ina.h only): one rank of a job whose switch,
 * job, rank and world come from INA_SWITCH, INA_JOB, INA_RANK, INA_WORLD. Sums an int32 and a
 * float tensor, checks the results and the counters, prints "consumer-c rank R/W: ok". Exit 0
 * on success, 1 with a message otherwise. */
#include <ina/ina.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1000

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "consumer-c: %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
              ina_last_error());                                                 \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(void) {
  static int32_t iv[N];
  static float fv[N];
  ina_config c;
  ina_comm* comm = NULL;
  ina_stats st;
  uint32_t w, r;
  int i;
  CHECK(ina_version() == INA_VERSION); /* the library is the one these headers describe */
  CHECK(ina_config_init(&c) == INA_OK);
  c.k = 64;
  c.window = 8;
  CHECK(ina_comm_create(&c, &comm) == INA_OK);
  w = c.world_size;
  r = c.rank;
  for (i = 0; i < N; ++i) iv[i] = (int32_t)((r + 1) * (uint32_t)i);
  CHECK(ina_allreduce_i32(comm, iv, N) == INA_OK);
  for (i = 0; i < N; ++i) CHECK(iv[i] == (int32_t)((uint32_t)i * w * (w + 1) / 2));
  /* Multiples of 1/2 below 2^8 quantize exactly: the float sum is exact too. */
  for (i = 0; i < N; ++i) fv[i] = 0.5f * (float)(i % 100) * (float)(r + 1);
  CHECK(ina_allreduce_f32(comm, fv, N) == INA_OK);
  for (i = 0; i < N; ++i) CHECK(fv[i] == 0.5f * (float)(i % 100) * (float)(w * (w + 1) / 2));
  CHECK(ina_comm_stats(comm, &st) == INA_OK);
  CHECK(st.ops_completed == 2 && st.ops_failed == 0 && st.results >= 2 * (N / 64));
  ina_comm_destroy(comm);
  printf("consumer-c rank %u/%u: ok (libina %s)\n", (unsigned)r, (unsigned)w, ina_version_string());
  return 0;
}
