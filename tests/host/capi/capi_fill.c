/* Every field of ina_config, set from C (see capi_fill.h). */
#include "capi_fill.h"

#include <string.h>

void capi_fill_every_field(ina_config* c, uint16_t port, int runnable) {
  strcpy(c->switch_host, runnable ? "127.0.0.1" : "fabric.example");
  c->switch_port = port;
  c->job_id = 77;
  c->rank = runnable ? 0 : 2;
  c->world_size = runnable ? 1 : 3;
  c->k = 64;
  c->window = 16;
  c->join_timeout_ms = 3000;
  c->progress_timeout_ms = 4000;
  c->rto_min_us = 700;
  c->rto_max_us = 150000;
  c->rto_initial_us = 6000;
  strcpy(c->transport, runnable ? "udp" : "dpdk");
  c->socket_buffer_bytes = 1 << 20;
  strcpy(c->dpdk_eal_args, "-l 0 --no-pci --vdev=net_memif0,role=client");
  strcpy(c->dpdk_port, "net_memif0");
  strcpy(c->dpdk_local_ip, "10.0.0.2");
  c->dpdk_local_port = 4711;
  strcpy(c->dpdk_local_mac, "02:00:00:00:00:02");
  strcpy(c->dpdk_fabric_mac, "02:00:00:00:00:01");
  c->dpdk_backoff_max_us = 250;
  c->dpdk_zero_copy = 0;
  c->progress_threads = 2;
  strcpy(c->quant, "scalar");
  c->udp_gso = 0;
  strcpy(c->verbs_device, "rxe1");
  c->verbs_port = 2;
  c->verbs_gid_index = 3;
  c->verbs_mtu = 2048;
  c->verbs_remote_qpn = 0x123;
  c->verbs_qkey = 0x11223344;
  c->verbs_send_depth = 64;
  c->verbs_recv_depth = 128;
  c->slot_wait_timeout_ms = 9000;
  c->staging_bytes = 3 << 20;
  c->dpdk_mtu = 9000;
  c->switch_cores = runnable ? 1 : 2; /* the runnable one talks to a one-core test fabric */
  if (!runnable) { /* the runnable one's test fabric holds no job key */
    unsigned char key[20];
    for (int i = 0; i < 20; ++i) key[i] = (unsigned char)(0xA0 + i);
    ina_config_set_job_key(c, key, sizeof key);
    strcpy(c->job_sec, "mac_encrypt");
  }
}
