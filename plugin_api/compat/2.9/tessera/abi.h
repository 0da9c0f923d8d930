/* Tessera plugin ABI: versioning, status codes, errors, tensors and host services.
 *
 * This header and its siblings in tessera/ are the only stable interface between the
 * Tessera core and its plugins. They are C99; no C++ type crosses them.
 *
 * Rules (see sdk/README.md for the full text):
 *  - TSR_ABI_MAJOR changes only when something is removed or reordered; TSR_ABI_MINOR
 *    grows when fields or entries are appended. A host of version M.n loads plugins built
 *    for M.0 ... M.n and refuses newer minors. The 2.x host also loads backend plugins
 *    built for 1.0 ... 1.4 through an adapter of its own, and the other kinds of 1.x
 *    plugin as they are (their tables did not change in 2.0); see CHANGELOG.md.
 *  - Every struct that crosses the boundary starts with `size_t struct_size`, set by its
 *    writer to sizeof() as that writer was compiled. Readers read only struct_size bytes
 *    and treat fields beyond it as absent (zero / NULL). Sizes are pinned below.
 *  - Structs may chain typed extensions through `next` (a tsr_ext_header*).
 *  - Strings are UTF-8; where a length is given the string need not be NUL-terminated.
 *  - Every fallible call returns tsr_status. Details come as a tsr_error created with the
 *    host's error_new and freed by whoever receives it with the host's error_free, so
 *    the module that made the error also frees it.
 *  - No exception, panic or abort crosses the boundary.
 */
#ifndef TESSERA_ABI_H
#define TESSERA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_ABI_MAJOR 2
#define TSR_ABI_MINOR 9

#if defined(_WIN32)
#define TSR_EXPORT __declspec(dllexport)
#else
#define TSR_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define TSR_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define TSR_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Pins the size of an ABI struct on LP64 targets: changing a struct without updating
 * its pinned size (and the CHANGELOG) fails the build. */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
#define TSR_ABI_PIN_SIZE(type, size) \
  TSR_STATIC_ASSERT(sizeof(type) == (size), #type " changed size: ABI break")
#else
#define TSR_ABI_PIN_SIZE(type, size)
#endif

/* The size of `type` up to and including `field`: the struct_size a writer compiled when
 * `field` was the struct's last. When a minor appends to a struct, its header names the
 * size each earlier minor wrote with it (TSR_<TYPE>_SIZE_<M>_<n>), for readers of structs
 * written by older plugins; no other size is kept by hand. */
#define TSR_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* Whether a struct written with `struct_size` bytes contains `field`. */
#define TSR_STRUCT_HAS(ptr, type, field) ((ptr)->struct_size >= TSR_SIZE_THROUGH(type, field))

typedef enum tsr_status {
  TSR_STATUS_OK = 0,
  TSR_STATUS_INVALID_ARGUMENT = 1, /* bad input from the caller */
  TSR_STATUS_NOT_FOUND = 2,
  TSR_STATUS_UNSUPPORTED = 3,      /* a valid request this module cannot serve */
  TSR_STATUS_OUT_OF_MEMORY = 4,
  TSR_STATUS_DEVICE_ERROR = 5,     /* the device failed or is absent */
  TSR_STATUS_ABI_MISMATCH = 6,
  TSR_STATUS_IO_ERROR = 7,
  TSR_STATUS_CANCELLED = 8,
  TSR_STATUS_INTERNAL = 9          /* a bug: please report */
} tsr_status;

/* Opaque error: a status plus a message. Created and freed by the host library. */
typedef struct tsr_error tsr_error;

typedef enum tsr_log_level {
  TSR_LOG_TRACE = 0,
  TSR_LOG_DEBUG = 1,
  TSR_LOG_INFO = 2,
  TSR_LOG_WARN = 3,
  TSR_LOG_ERROR = 4
} tsr_log_level;

/* A string that need not be NUL-terminated. */
typedef struct tsr_string_view {
  const char* data; /* can be NULL when size == 0 */
  size_t size;
} tsr_string_view;

/* Header of a chained extension struct. Unknown types are skipped by readers. */
typedef struct tsr_ext_header {
  size_t struct_size;
  uint32_t type; /* TSR_EXT_* constant of the header that defines the extension */
  uint32_t reserved;
  const struct tsr_ext_header* next; /* can be NULL */
} tsr_ext_header;
TSR_ABI_PIN_SIZE(tsr_ext_header, 24);

/* Element types of tensors. Quantized types use GGUF block layouts. */
typedef enum tsr_dtype {
  TSR_DTYPE_F32 = 0,
  TSR_DTYPE_F16 = 1,
  TSR_DTYPE_BF16 = 2,
  TSR_DTYPE_I32 = 3,
  TSR_DTYPE_I64 = 4,
  TSR_DTYPE_I8 = 5,
  TSR_DTYPE_Q8_0 = 16, /* blocks of 32: f16 scale + 32 x int8 (34 bytes) */
  TSR_DTYPE_Q4_0 = 17, /* blocks of 32: f16 scale + 16 bytes of nibbles (18 bytes) */
  /* 1.1: weight-only formats a quant plugin defines (quant.h); their row layout is the
   * plugin's, a tensor's strides[0] is its row size in bytes. */
  TSR_DTYPE_INT4_G128 = 18, /* groups of 128: f16 scale, u8 zero point, pad, 64 bytes of nibbles */
  TSR_DTYPE_FP8_E4M3 = 19,  /* per row: f32 scale, then one E4M3 byte per element (2.3: fixed,
                             * see tsr_dtype_row_bytes; a KV cache's row is one head) */
  /* 2.2: ggml's K-quants, super-blocks of 256 elements (QK_K) with sub-block scales, the
   * non-linear 4-bit IQ4 types and OCP MXFP4, byte for byte as GGUF stores them
   * (ggml-common.h's block_q2_K ... block_mxfp4). */
  TSR_DTYPE_Q2_K = 20,   /* 256: 16 scale/min bytes, 64 bytes of 2-bit quants, f16 d, dmin (84) */
  TSR_DTYPE_Q3_K = 21,   /* 256: 32 bytes high bits, 64 bytes low 2 bits, 12 scale bytes, f16 d (110) */
  TSR_DTYPE_Q4_K = 22,   /* 256: f16 d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles (144) */
  TSR_DTYPE_Q5_K = 23,   /* 256: as Q4_K plus 32 bytes of fifth bits (176) */
  TSR_DTYPE_Q6_K = 24,   /* 256: 128 bytes low nibbles, 64 bytes high 2 bits, 16 int8 scales, f16 d (210) */
  TSR_DTYPE_Q8_K = 25,   /* 256: f32 d, 256 x int8, 16 x int16 block sums (292); activations only */
  TSR_DTYPE_IQ4_NL = 26, /* 32: f16 d, 16 bytes of indices into kvalues_iq4nl (18) */
  TSR_DTYPE_IQ4_XS = 27, /* 256: f16 d, u16 high scale bits, 4 bytes low scale bits, 128 bytes (136) */
  TSR_DTYPE_MXFP4 = 28,  /* 32: E8M0 shared exponent, 16 bytes of E2M1 nibbles (17) */
  /* 2.2: the other legacy blocks of 32, which llama.cpp's K-quant mixes use for rows that do
   * not fill 256 (Q4_K falls back to Q5_0, Q5_K to Q5_1). */
  TSR_DTYPE_Q4_1 = 29,   /* 32: f16 d, f16 min, 16 bytes of nibbles (20) */
  TSR_DTYPE_Q5_0 = 30,   /* 32: f16 d, 32 fifth bits, 16 bytes of nibbles (22) */
  TSR_DTYPE_Q5_1 = 31,   /* 32: f16 d, f16 min, 32 fifth bits, 16 bytes of nibbles (24) */
  TSR_DTYPE_COUNT_ = 32,
  /* 1.1: the format of a quant plugin that has no dtype of its own above (a third-party
   * scheme): only the kernels of the plugin that produced the weights read it, and no
   * backend supports it. It lies outside [0, TSR_DTYPE_COUNT_) on purpose, so a backend
   * that checks dtypes refuses such a tensor as unknown. */
  TSR_DTYPE_PLUGIN = 64,
  /* 1.3: a matmul weight in the layout of the backend that packed it (backend.h,
   * weight_pack): only that backend's matmul reads it. Outside [0, TSR_DTYPE_COUNT_) for
   * the same reason as TSR_DTYPE_PLUGIN. */
  TSR_DTYPE_PACKED = 65
} tsr_dtype;

/* 2.0: the storage of the dtypes with a layout fixed by this header: elements come in
 * blocks of *block_elems elements taking *block_bytes bytes (a block of one element for
 * the unquantized types). Returns 0, and sets both to 0, for the others: INT4_G128 rows
 * are their quant plugin's layout, FP8_E4M3 rows carry a scale but no blocks (see
 * tsr_dtype_row_bytes), PLUGIN, PACKED and unknown values have none. Either pointer can
 * be NULL. The one table of sizes for hosts and plugins alike. */
static inline int tsr_dtype_block(tsr_dtype dtype, int64_t* block_elems, int64_t* block_bytes) {
  int64_t elems = 1, bytes = 0;
  switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_I32: bytes = 4; break;
    case TSR_DTYPE_F16: case TSR_DTYPE_BF16: bytes = 2; break;
    case TSR_DTYPE_I64: bytes = 8; break;
    case TSR_DTYPE_I8: bytes = 1; break;
    case TSR_DTYPE_Q8_0: elems = 32; bytes = 34; break;
    case TSR_DTYPE_Q4_0: elems = 32; bytes = 18; break;
    case TSR_DTYPE_Q2_K: elems = 256; bytes = 84; break;
    case TSR_DTYPE_Q3_K: elems = 256; bytes = 110; break;
    case TSR_DTYPE_Q4_K: elems = 256; bytes = 144; break;
    case TSR_DTYPE_Q5_K: elems = 256; bytes = 176; break;
    case TSR_DTYPE_Q6_K: elems = 256; bytes = 210; break;
    case TSR_DTYPE_Q8_K: elems = 256; bytes = 292; break;
    case TSR_DTYPE_IQ4_NL: elems = 32; bytes = 18; break;
    case TSR_DTYPE_IQ4_XS: elems = 256; bytes = 136; break;
    case TSR_DTYPE_MXFP4: elems = 32; bytes = 17; break;
    case TSR_DTYPE_Q4_1: elems = 32; bytes = 20; break;
    case TSR_DTYPE_Q5_0: elems = 32; bytes = 22; break;
    case TSR_DTYPE_Q5_1: elems = 32; bytes = 24; break;
    default: elems = 0; break;
  }
  if (block_elems != NULL) *block_elems = elems;
  if (block_bytes != NULL) *block_bytes = bytes;
  return bytes != 0;
}

/* 2.0: bytes of a row of n >= 0 elements of `dtype`, or -1 when the dtype has no fixed
 * layout (tsr_dtype_block) or n is not a whole number of its blocks.
 * 2.3: FP8_E4M3 rows have a fixed layout too, though not one of blocks: a row of n > 0
 * elements is its f32 scale s followed by n E4M3 bytes q (OCP "fn": bias 7, no infinities,
 * 0x7f / 0xff NaN), element j = e4m3(q[j]) * s; 4 + n bytes. The quant plugin fp8_e4m3
 * writes weight rows so, and a KV cache of this dtype holds one such row per head of each
 * token (a scale per token and head). INT4_G128 rows stay their plugin's. */
static inline int64_t tsr_dtype_row_bytes(tsr_dtype dtype, int64_t n) {
  int64_t elems = 0, bytes = 0;
  if (dtype == TSR_DTYPE_FP8_E4M3) return n > 0 ? 4 + n : -1;
  if (!tsr_dtype_block(dtype, &elems, &bytes) || n < 0 || n % elems != 0) return -1;
  return n / elems * bytes;
}

/* 2.0: the dtype's name as GGUF and the CLI spell it ("f32", "q8_0", "int4_g128", ...),
 * or NULL for a value this header does not define. Static storage. */
static inline const char* tsr_dtype_name(tsr_dtype dtype) {
  switch (dtype) {
    case TSR_DTYPE_F32: return "f32";
    case TSR_DTYPE_F16: return "f16";
    case TSR_DTYPE_BF16: return "bf16";
    case TSR_DTYPE_I32: return "i32";
    case TSR_DTYPE_I64: return "i64";
    case TSR_DTYPE_I8: return "i8";
    case TSR_DTYPE_Q8_0: return "q8_0";
    case TSR_DTYPE_Q4_0: return "q4_0";
    case TSR_DTYPE_INT4_G128: return "int4_g128";
    case TSR_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case TSR_DTYPE_Q2_K: return "q2_K";
    case TSR_DTYPE_Q3_K: return "q3_K";
    case TSR_DTYPE_Q4_K: return "q4_K";
    case TSR_DTYPE_Q5_K: return "q5_K";
    case TSR_DTYPE_Q6_K: return "q6_K";
    case TSR_DTYPE_Q8_K: return "q8_K";
    case TSR_DTYPE_IQ4_NL: return "iq4_nl";
    case TSR_DTYPE_IQ4_XS: return "iq4_xs";
    case TSR_DTYPE_MXFP4: return "mxfp4";
    case TSR_DTYPE_Q4_1: return "q4_1";
    case TSR_DTYPE_Q5_0: return "q5_0";
    case TSR_DTYPE_Q5_1: return "q5_1";
    case TSR_DTYPE_PLUGIN: return "plugin";
    case TSR_DTYPE_PACKED: return "packed";
    default: return NULL;
  }
}

/* Describes a strided tensor in a backend's memory. Shape is outermost-first
 * (row-major: shape[ndim-1] is the contiguous dimension); strides are in bytes and for
 * quantized dtypes apply to rows only (a row is whole blocks, contiguous). */
#define TSR_MAX_DIMS 4
typedef struct tsr_tensor {
  size_t struct_size;
  tsr_dtype dtype;
  int32_t ndim;
  int64_t shape[TSR_MAX_DIMS];
  int64_t strides[TSR_MAX_DIMS];
  void* data; /* backend address of element [0,...,0]; device memory for device backends */
} tsr_tensor;
TSR_ABI_PIN_SIZE(tsr_tensor, 88);

/* Services the host offers to plugins. Every entry is thread-safe. */
typedef struct tsr_host_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Logs through the host's logger. `msg` need not be NUL-terminated. */
  void (*log)(tsr_log_level level, const char* msg, size_t msg_len);
  /* Host memory; alignment is a power of two (0 means the default). Returns NULL on
   * failure. Memory from alloc is released with free. */
  void* (*alloc)(size_t size, size_t alignment);
  void (*free)(void* ptr);
  /* Makes an error object. Returns NULL only when out of memory. */
  tsr_error* (*error_new)(tsr_status status, const char* msg, size_t msg_len);
  /* Frees an error object; NULL is ignored. */
  void (*error_free)(tsr_error* error);
  tsr_status (*error_status)(const tsr_error* error);
  /* NUL-terminated message, valid until error_free. */
  const char* (*error_message)(const tsr_error* error);
} tsr_host_api;
TSR_ABI_PIN_SIZE(tsr_host_api, 72);

/* Plugin kinds. */
typedef enum tsr_plugin_kind {
  TSR_PLUGIN_BACKEND = 1,
  TSR_PLUGIN_QUANT = 2,
  TSR_PLUGIN_DRAFT = 3,
  TSR_PLUGIN_CONSTRAINT = 4
} tsr_plugin_kind;

/* What tsr_plugin_query returns: static data owned by the plugin, valid while the
 * library is loaded. */
typedef struct tsr_plugin_desc {
  size_t struct_size;
  uint32_t abi_major;    /* TSR_ABI_MAJOR the plugin was compiled against */
  uint32_t abi_minor;    /* TSR_ABI_MINOR the plugin was compiled against */
  tsr_plugin_kind kind;
  const char* name;      /* e.g. "cpu"; must match the file name libtessera_<kind>_<name>.so */
  const char* version;   /* the plugin's own version string */
  const void* iface;     /* kind-specific table, e.g. const tsr_backend_iface* */
} tsr_plugin_desc;
TSR_ABI_PIN_SIZE(tsr_plugin_desc, 48);

/* The one symbol every plugin exports. Returns NULL when the plugin cannot serve this
 * host (it logs its reason through host->log first). `host` outlives the plugin. */
#define TSR_PLUGIN_QUERY_SYMBOL "tsr_plugin_query"
typedef const tsr_plugin_desc* (*tsr_plugin_query_fn)(const tsr_host_api* host,
                                                       uint32_t host_abi_major,
                                                       uint32_t host_abi_minor);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_ABI_H */
