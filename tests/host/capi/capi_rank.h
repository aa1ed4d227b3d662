/* C-side checks of ina.h, called from the C++ driver. Each returns 0 on success, else the source
 * line of the first failed check (and writes a message to err). */
#ifndef INA_TESTS_CAPI_RANK_H_
#define INA_TESTS_CAPI_RANK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int capi_check_config(char* err, size_t cap);
int capi_run_rank(uint16_t port, uint16_t rank, uint16_t world, char* err, size_t cap);
int capi_check_errors(uint16_t dead_port, char* err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
