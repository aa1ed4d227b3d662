/* Sets every field of an ina_config from C (capi_fill.c). runnable = 0: every value differs from
 * CommConfig's defaults (switch "fabric.example", rank 2 of 3, transport "dpdk"). runnable = 1:
 * the same except what a world-1 communicator on UDP needs (switch 127.0.0.1, rank 0 of 1,
 * transport "udp"), so ina_comm_create works against a fabric on 127.0.0.1:port.
 * capi_config_util.h's EveryFieldConfig gives the same values as a CommConfig. */
#ifndef INA_TESTS_CAPI_FILL_H_
#define INA_TESTS_CAPI_FILL_H_

#include <stdint.h>

#include "ina/ina.h"

#ifdef __cplusplus
extern "C" {
#endif

void capi_fill_every_field(ina_config* c, uint16_t port, int runnable);

#ifdef __cplusplus
}
#endif

#endif
