/*
 * trampoline.h: C helpers for the cgo files of package torchscript. The shim
 * is opened with dlopen, so its functions are reached through pointers from
 * dlsym; Go cannot call a C function pointer, so each gets a trampoline.
 */
#ifndef EAS_TORCHSCRIPT_TRAMPOLINE_H
#define EAS_TORCHSCRIPT_TRAMPOLINE_H
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "shim/shim.h"

typedef int (*abi_version_fn)(void);
typedef const char *(*torch_version_fn)(void);
typedef void (*set_num_threads_fn)(int);
typedef eas_ts_module *(*load_fn)(const char *, const char *, int, char **);
typedef int (*int_fn)(void);
typedef const char *(*mod_str_fn)(const eas_ts_module *);
typedef int (*num_args_fn)(const eas_ts_module *);
typedef const char *(*arg_str_fn)(const eas_ts_module *, int);
typedef int (*forward_fn)(eas_ts_module *, const eas_ts_input *, int, eas_ts_output **, int *, char **);
typedef void (*free_outputs_fn)(eas_ts_output *, int);
typedef void (*free_string_fn)(char *);
typedef void (*free_fn)(eas_ts_module *);

static inline int call_abi_version(void *f) { return ((abi_version_fn)f)(); }
static inline const char *call_torch_version(void *f) { return ((torch_version_fn)f)(); }
static inline void call_set_num_threads(void *f, int n) { ((set_num_threads_fn)f)(n); }
static inline eas_ts_module *call_load(void *f, const char *p, const char *dev, int opt, char **err) { return ((load_fn)f)(p, dev, opt, err); }
static inline int call_int(void *f) { return ((int_fn)f)(); }
static inline const char *call_mod_str(void *f, const eas_ts_module *m) { return ((mod_str_fn)f)(m); }
static inline int call_num_args(void *f, const eas_ts_module *m) { return ((num_args_fn)f)(m); }
static inline const char *call_arg_str(void *f, const eas_ts_module *m, int i) { return ((arg_str_fn)f)(m, i); }
static inline int call_forward(void *f, eas_ts_module *m, const eas_ts_input *in, int n, eas_ts_output **out, int *nout, char **err) {
	return ((forward_fn)f)(m, in, n, out, nout, err);
}
static inline void call_free_outputs(void *f, eas_ts_output *o, int n) { ((free_outputs_fn)f)(o, n); }
static inline void call_free_string(void *f, char *s) { ((free_string_fn)f)(s); }
static inline void call_free(void *f, eas_ts_module *m) { ((free_fn)f)(m); }

static inline void *open_lib(const char *path, char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		*err = strdup(e ? e : "dlopen failed");
	}
	return h;
}

static inline void *lookup(void *h, const char *name) { return dlsym(h, name); }

#endif
