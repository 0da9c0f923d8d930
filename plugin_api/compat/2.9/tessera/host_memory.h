/* The backend feature "tsr_host_memory": host memory that a backend copies to and from
 * without staging (page-locked on a GPU: cudaHostAlloc, hipHostMalloc), the memory of KV
 * offloading (the host tier below the KV pool).
 *
 * A backend plugin that has it answers get_proc(reg, TSR_HOST_MEMORY_PROC) with a pointer to
 * a static tsr_host_memory_iface; the feature is optional and absent from ABI 2.3 plugins
 * that do not name it (get_proc returns NULL), for which the host uses ordinary memory.
 *
 * Copies: a buffer_write whose `src`, or a buffer_read whose `dst`, lies inside memory from
 * host_alloc runs asynchronously on its stream, as every copy may; for such a write the
 * caller keeps the source bytes unchanged until the stream has passed the copy
 * (stream_synchronize, or an event recorded after it), instead of only during the call.
 * Other host memory keeps backend.h's rule (a write's source is read during the call).
 *
 * Thread-safety: as the backend handle's (one thread at a time per tsr_backend).
 */
#ifndef TESSERA_HOST_MEMORY_H
#define TESSERA_HOST_MEMORY_H

#include "tessera/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_HOST_MEMORY_PROC "tsr_host_memory"

typedef struct tsr_host_alloc_args {
  size_t struct_size;
  tsr_backend* backend;
  uint64_t size;                    /* bytes; 0 allocates nothing and sets ptr to NULL */
  void* ptr;                        /* out: host address, aligned to 4096 bytes, freed with host_free */
} tsr_host_alloc_args;
TSR_ABI_PIN_SIZE(tsr_host_alloc_args, 32);

typedef struct tsr_host_memory_iface {
  size_t struct_size;
  /* Fails with TSR_STATUS_OUT_OF_MEMORY (and a message naming the size) when the memory
   * cannot be had; the host then falls back to ordinary memory. */
  tsr_status (*host_alloc)(tsr_host_alloc_args* args, tsr_error** error);
  /* Frees memory of host_alloc. The caller frees only memory that no copy still in flight
   * on a stream of `backend` uses. NULL is ignored. */
  void (*host_free)(tsr_backend* backend, void* ptr);
} tsr_host_memory_iface;
TSR_ABI_PIN_SIZE(tsr_host_memory_iface, 24);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_HOST_MEMORY_H */
