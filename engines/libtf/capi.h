// The part of TensorFlow's C API (tensorflow/c/c_api.h, tf_tensor.h,
// tf_tstring.h) this package calls, declared here rather than included: the
// C API is a stable C ABI, and the library is opened with dlopen at run time,
// so nothing links libtensorflow and no TensorFlow header is needed to build.
// Each call goes through a function pointer dlsym'd from the library.
#ifndef EAS_LIBTF_CAPI_H
#define EAS_LIBTF_CAPI_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct TF_Status TF_Status;
typedef struct TF_Graph TF_Graph;
typedef struct TF_Operation TF_Operation;
typedef struct TF_Session TF_Session;
typedef struct TF_SessionOptions TF_SessionOptions;
typedef struct TF_Tensor TF_Tensor;

typedef struct TF_Buffer {
	const void* data;
	size_t length;
	void (*data_deallocator)(void* data, size_t length);
} TF_Buffer;

typedef struct TF_Output {
	TF_Operation* oper;
	int index;
} TF_Output;

// TF_TString (tf_tstring.h) is 24 bytes, aligned as a pointer; only
// TF_StringInit/Copy/GetDataPointer/GetSize/Dealloc touch its inside.
typedef struct TF_TString {
	union {
		char raw[24];
		void* align;
	} u;
} TF_TString;

// eas_tf_api holds the dlsym'd entry points.
typedef struct eas_tf_api {
	const char* (*Version)(void);
	TF_Status* (*NewStatus)(void);
	void (*DeleteStatus)(TF_Status*);
	int (*GetCode)(const TF_Status*);
	const char* (*Message)(const TF_Status*);
	TF_Graph* (*NewGraph)(void);
	void (*DeleteGraph)(TF_Graph*);
	TF_SessionOptions* (*NewSessionOptions)(void);
	void (*DeleteSessionOptions)(TF_SessionOptions*);
	void (*SetConfig)(TF_SessionOptions*, const void*, size_t, TF_Status*);
	TF_Session* (*LoadSessionFromSavedModel)(const TF_SessionOptions*, const TF_Buffer*, const char*,
		const char* const*, int, TF_Graph*, TF_Buffer*, TF_Status*);
	void (*CloseSession)(TF_Session*, TF_Status*);
	void (*DeleteSession)(TF_Session*, TF_Status*);
	TF_Operation* (*GraphOperationByName)(TF_Graph*, const char*);
	int (*OperationNumOutputs)(TF_Operation*);
	void (*SessionRun)(TF_Session*, const TF_Buffer*, const TF_Output*, TF_Tensor* const*, int,
		const TF_Output*, TF_Tensor**, int, const TF_Operation* const*, int, TF_Buffer*, TF_Status*);
	TF_Tensor* (*AllocateTensor)(int, const int64_t*, int, size_t);
	void (*DeleteTensor)(TF_Tensor*);
	int (*TensorType)(const TF_Tensor*);
	int (*NumDims)(const TF_Tensor*);
	int64_t (*Dim)(const TF_Tensor*, int);
	size_t (*TensorByteSize)(const TF_Tensor*);
	void* (*TensorData)(const TF_Tensor*);
	void (*StringInit)(TF_TString*);
	void (*StringCopy)(TF_TString*, const char*, size_t);
	const char* (*StringGetDataPointer)(const TF_TString*);
	size_t (*StringGetSize)(const TF_TString*);
	void (*StringDealloc)(TF_TString*);
	void* (*LoadLibrary)(const char*, TF_Status*); // returns a TF_Library*
} eas_tf_api;

static void* eas_tf_open(const char* path, char** err) {
	// RTLD_LOCAL: TensorFlow's symbols (its own protobuf and abseil among
	// them) stay out of the global scope, so libraries opened later (ONNX
	// Runtime, libtorch) do not bind to them. libtensorflow_framework.so.2
	// comes in as the _cc library's dependency and dlsym on this handle
	// searches it too.
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char* e = dlerror();
		*err = strdup(e ? e : "dlopen failed");
	}
	return h;
}

static void* eas_tf_sym(void* h, const char* name) { return dlsym(h, name); }

// eas_tf_run runs the session and returns the status code (0 = OK); the
// message is copied into *msg (free it) when not OK.
static int eas_tf_run(const eas_tf_api* a, TF_Session* s, const TF_Output* in, TF_Tensor* const* inv, int nin,
		const TF_Output* out, TF_Tensor** outv, int nout, char** msg) {
	TF_Status* st = a->NewStatus();
	a->SessionRun(s, NULL, in, inv, nin, out, outv, nout, NULL, 0, NULL, st);
	int code = a->GetCode(st);
	if (code != 0) *msg = strdup(a->Message(st));
	a->DeleteStatus(st);
	return code;
}

static TF_Session* eas_tf_load(const eas_tf_api* a, const void* config, size_t config_len, const char* dir,
		const char* const* tags, int ntags, TF_Graph* g, char** msg) {
	TF_Status* st = a->NewStatus();
	TF_SessionOptions* o = a->NewSessionOptions();
	TF_Session* s = NULL;
	if (config_len > 0) a->SetConfig(o, config, config_len, st);
	if (a->GetCode(st) == 0) s = a->LoadSessionFromSavedModel(o, NULL, dir, tags, ntags, g, NULL, st);
	if (a->GetCode(st) != 0) {
		*msg = strdup(a->Message(st));
		s = NULL;
	}
	a->DeleteSessionOptions(o);
	a->DeleteStatus(st);
	return s;
}

// eas_tf_load_library loads a custom op library (TF_LoadLibrary) and
// returns the status code (0 = OK); the message is copied into *msg (free
// it) when not OK. The library stays loaded: its handle is not kept.
static int eas_tf_load_library(const eas_tf_api* a, const char* path, char** msg) {
	TF_Status* st = a->NewStatus();
	a->LoadLibrary(path, st);
	int code = a->GetCode(st);
	if (code != 0) *msg = strdup(a->Message(st));
	a->DeleteStatus(st);
	return code;
}

static void eas_tf_close(const eas_tf_api* a, TF_Session* s, TF_Graph* g) {
	TF_Status* st = a->NewStatus();
	a->CloseSession(s, st);
	a->DeleteSession(s, st);
	a->DeleteStatus(st);
	a->DeleteGraph(g);
}

// Thin calls through the pointers, for cgo (which cannot call a C function
// pointer itself).
static const char* eas_tf_version(const eas_tf_api* a) { return a->Version(); }
static TF_Graph* eas_tf_new_graph(const eas_tf_api* a) { return a->NewGraph(); }
static void eas_tf_delete_graph(const eas_tf_api* a, TF_Graph* g) { a->DeleteGraph(g); }
static TF_Operation* eas_tf_op(const eas_tf_api* a, TF_Graph* g, const char* name) { return a->GraphOperationByName(g, name); }
static int eas_tf_op_outputs(const eas_tf_api* a, TF_Operation* op) { return a->OperationNumOutputs(op); }
static TF_Tensor* eas_tf_alloc(const eas_tf_api* a, int dt, const int64_t* dims, int n, size_t len) { return a->AllocateTensor(dt, dims, n, len); }
static void eas_tf_delete_tensor(const eas_tf_api* a, TF_Tensor* t) { if (t) a->DeleteTensor(t); }
static int eas_tf_type(const eas_tf_api* a, const TF_Tensor* t) { return a->TensorType(t); }
static int eas_tf_num_dims(const eas_tf_api* a, const TF_Tensor* t) { return a->NumDims(t); }
static int64_t eas_tf_dim(const eas_tf_api* a, const TF_Tensor* t, int i) { return a->Dim(t, i); }
static size_t eas_tf_byte_size(const eas_tf_api* a, const TF_Tensor* t) { return a->TensorByteSize(t); }
static void* eas_tf_data(const eas_tf_api* a, const TF_Tensor* t) { return a->TensorData(t); }

// eas_tf_set_string initialises element i of a string tensor's data.
static void eas_tf_set_string(const eas_tf_api* a, void* data, int64_t i, const char* s, size_t n) {
	TF_TString* ts = (TF_TString*)data + i;
	a->StringInit(ts);
	a->StringCopy(ts, s, n);
}

static const char* eas_tf_get_string(const eas_tf_api* a, const void* data, int64_t i, size_t* n) {
	const TF_TString* ts = (const TF_TString*)data + i;
	*n = a->StringGetSize(ts);
	return a->StringGetDataPointer(ts);
}

#endif
