/*
 * shim.h: the C ABI of libeas_torchshim.so, a thin layer over libtorch that
 * the Go package github.com/eas-server/eas-server/torchscript opens with
 * dlopen at run time (the server binary never links libtorch).
 *
 * Rules of the ABI:
 *  - No C++ exception crosses it: every entry point catches them and reports
 *    a message through an out parameter `char **err`, a malloc'd string the
 *    caller releases with eas_ts_free_string.
 *  - Memory the shim hands out (error strings, outputs) is released through
 *    the shim (eas_ts_free_string, eas_ts_free_outputs), never by the caller's
 *    allocator.
 *  - Inputs are copied in: the caller's buffers are not kept after the call.
 */
#ifndef EAS_TORCHSHIM_H
#define EAS_TORCHSHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a signature or struct below changes. */
#define EAS_TS_ABI_VERSION 3

/* Element types; 0 is invalid. */
enum {
	EAS_TS_BOOL = 1,
	EAS_TS_UINT8 = 2,
	EAS_TS_INT8 = 3,
	EAS_TS_INT16 = 4,
	EAS_TS_INT32 = 5,
	EAS_TS_INT64 = 6,
	EAS_TS_FLOAT16 = 7,
	EAS_TS_BFLOAT16 = 8,
	EAS_TS_FLOAT32 = 9,
	EAS_TS_FLOAT64 = 10
};

typedef struct eas_ts_module eas_ts_module;

/* One input tensor: row-major, little-endian, nbytes = product(shape) *
 * element size. data may be NULL when nbytes is 0. */
typedef struct {
	int dtype;
	int ndim;
	const int64_t *shape;
	const void *data;
	size_t nbytes;
} eas_ts_input;

/* One output tensor, owned by the shim until eas_ts_free_outputs. name is
 * the Dict key for a Dict[str, Tensor] output, NULL otherwise. */
typedef struct {
	char *name;
	int dtype;
	int ndim;
	int64_t *shape;
	void *data;
	size_t nbytes;
} eas_ts_output;

/* The ABI version the library was built with (EAS_TS_ABI_VERSION). */
int eas_ts_abi_version(void);

/* The libtorch version the shim was built against, e.g. "1.13.1". */
const char *eas_ts_torch_version(void);

/* Sets libtorch's intra-op thread count. Process-wide: every later forward,
 * on whatever thread, runs with it. n <= 0 is ignored. */
void eas_ts_set_num_threads(int n);

/* The intra-op thread count forward runs with (process-wide). */
int eas_ts_get_num_threads(void);

/* The newest TorchScript file format version this libtorch reads. */
int eas_ts_max_file_version(void);

/* The number of CUDA devices libtorch sees; -1 when this libtorch was built
 * without CUDA (Debian's is), 0 when it has CUDA but sees no GPU. */
int eas_ts_cuda_device_count(void);

/* Graph optimisations at load (eas_ts_load's optimize). */
enum {
	EAS_TS_OPT_NONE = 0,      /* run the module as saved */
	EAS_TS_OPT_FREEZE = 1,    /* torch.jit.freeze: inline weights, fold what is constant */
	EAS_TS_OPT_INFERENCE = 2  /* freeze + torch.jit.optimize_for_inference (conv-BN folding, fusions) */
};

/* Loads a TorchScript file in eval mode onto device ("cpu", "cuda",
 * "cuda:N"; NULL is "cpu"), optimised as optimize says. NULL and *err on
 * failure (a module that cannot be frozen fails, saying so). */
eas_ts_module *eas_ts_load(const char *path, const char *device, int optimize, char **err);

/* forward's declared return type in TorchScript spelling ("Tensor",
 * "Tuple[Tensor, Tensor]", "Dict[str, Tensor]", ...). Lives as long as the
 * module. */
const char *eas_ts_return_type(const eas_ts_module *m);

/* forward's arguments, self excluded: their count, and the name and type
 * (TorchScript spelling, "Tensor", "Optional[Tensor]", "int") of argument i.
 * The strings live as long as the module. */
int eas_ts_num_args(const eas_ts_module *m);
const char *eas_ts_arg_name(const eas_ts_module *m, int i);
const char *eas_ts_arg_type(const eas_ts_module *m, int i);

/* Runs forward on n tensors (positional), copied onto the module's device.
 * Outputs are copied back to host memory. On success returns 0 and sets *out
 * to an array of *nout outputs (free with eas_ts_free_outputs). On failure
 * returns -1 and sets *err. Safe to call concurrently on one module. */
int eas_ts_forward(eas_ts_module *m, const eas_ts_input *in, int n,
		   eas_ts_output **out, int *nout, char **err);

void eas_ts_free_outputs(eas_ts_output *out, int n);
void eas_ts_free_string(char *s);

/* Releases the module. No forward may be running on it. */
void eas_ts_free(eas_ts_module *m);

#ifdef __cplusplus
}
#endif

#endif
