// shim.cc: the C ABI of shim.h over libtorch's TorchScript runtime.
// Built by scripts/build-torchshim.sh into third_party/torchshim/.
#include "shim.h"

#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/version.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <caffe2/serialize/versions.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

struct eas_ts_module {
	torch::jit::Module mod;
	std::vector<std::string> names;
	std::vector<std::string> types;
	std::string returns;
	c10::Device device{c10::kCPU};
};

namespace {

// The intra-op thread count last set through the shim (0 = never). libtorch
// (OpenMP backend) keeps the count per OS thread, initialised from the last
// global setting on a thread's first parallel region only; Go runs forward
// on whatever OS thread it likes, so forward brings its thread up to date.
std::atomic<int> g_threads{0};

void sync_threads() {
	int want = g_threads.load(std::memory_order_relaxed);
	if (want > 0 && at::get_num_threads() != want) at::set_num_threads(want);
}

char *dup_string(const std::string &s) {
	char *p = static_cast<char *>(std::malloc(s.size() + 1));
	if (p != nullptr) {
		std::memcpy(p, s.data(), s.size());
		p[s.size()] = '\0';
	}
	return p;
}

void set_err(char **err, const std::string &msg) {
	if (err != nullptr) {
		*err = dup_string(msg);
	}
}

// A c10::Error's message without the C++ backtrace, of no use to a user
// reading a deploy error (a TorchScript traceback, if any, stays).
std::string brief(const c10::Error &e) { return e.what_without_backtrace(); }

bool to_scalar_type(int d, c10::ScalarType *st) {
	switch (d) {
	case EAS_TS_BOOL: *st = c10::kBool; return true;
	case EAS_TS_UINT8: *st = c10::kByte; return true;
	case EAS_TS_INT8: *st = c10::kChar; return true;
	case EAS_TS_INT16: *st = c10::kShort; return true;
	case EAS_TS_INT32: *st = c10::kInt; return true;
	case EAS_TS_INT64: *st = c10::kLong; return true;
	case EAS_TS_FLOAT16: *st = c10::kHalf; return true;
	case EAS_TS_BFLOAT16: *st = c10::kBFloat16; return true;
	case EAS_TS_FLOAT32: *st = c10::kFloat; return true;
	case EAS_TS_FLOAT64: *st = c10::kDouble; return true;
	}
	return false;
}

int from_scalar_type(c10::ScalarType st) {
	switch (st) {
	case c10::kBool: return EAS_TS_BOOL;
	case c10::kByte: return EAS_TS_UINT8;
	case c10::kChar: return EAS_TS_INT8;
	case c10::kShort: return EAS_TS_INT16;
	case c10::kInt: return EAS_TS_INT32;
	case c10::kLong: return EAS_TS_INT64;
	case c10::kHalf: return EAS_TS_FLOAT16;
	case c10::kBFloat16: return EAS_TS_BFLOAT16;
	case c10::kFloat: return EAS_TS_FLOAT32;
	case c10::kDouble: return EAS_TS_FLOAT64;
	default: return 0;
	}
}

// A named tensor on its way out.
struct named {
	std::string name;
	bool has_name;
	at::Tensor t;
};

// Turns a non-tensor scalar result (int, float, bool) into a 0-d tensor.
bool scalar_tensor(const c10::IValue &v, at::Tensor *t) {
	if (v.isTensor()) {
		*t = v.toTensor();
		return true;
	}
	if (v.isInt()) {
		*t = torch::tensor(v.toInt(), torch::kLong).reshape({});
		return true;
	}
	if (v.isDouble()) {
		*t = torch::tensor(v.toDouble(), torch::kDouble).reshape({});
		return true;
	}
	if (v.isBool()) {
		*t = torch::tensor(v.toBool(), torch::kBool).reshape({});
		return true;
	}
	return false;
}

// Flattens forward's result: a tensor, a tuple or list of tensors, or a
// Dict[str, Tensor]. Nested containers are refused.
void collect(const c10::IValue &v, std::vector<named> *out) {
	at::Tensor t;
	if (scalar_tensor(v, &t)) {
		out->push_back({"", false, t});
		return;
	}
	std::vector<c10::IValue> elems;
	if (v.isTuple()) {
		for (const auto &e : v.toTupleRef().elements()) elems.push_back(e);
	} else if (v.isTensorList()) {
		for (const at::Tensor &e : v.toTensorVector()) elems.emplace_back(e);
	} else if (v.isList()) {
		for (const c10::IValue &e : v.toListRef()) elems.push_back(e);
	} else if (v.isGenericDict()) {
		for (const auto &kv : v.toGenericDict()) {
			if (!kv.key().isString()) {
				throw std::runtime_error("forward returned a Dict whose keys are " +
							 kv.key().tagKind() + ", not str");
			}
			std::string key = kv.key().toStringRef();
			if (!scalar_tensor(kv.value(), &t)) {
				throw std::runtime_error("forward returned a Dict whose value for \"" + key +
							 "\" is " + kv.value().tagKind() + ", not a Tensor");
			}
			out->push_back({key, true, t});
		}
		return;
	} else {
		throw std::runtime_error("forward returned " + v.tagKind() +
					 "; a Tensor, a tuple or list of Tensors or a Dict[str, Tensor] is supported");
	}
	for (size_t i = 0; i < elems.size(); i++) {
		if (!scalar_tensor(elems[i], &t)) {
			throw std::runtime_error("forward returned a container whose element " + std::to_string(i) +
						 " is " + elems[i].tagKind() + "; nested containers are not supported");
		}
		out->push_back({"", false, t});
	}
}

void free_outputs(eas_ts_output *out, int n) {
	if (out == nullptr) return;
	for (int i = 0; i < n; i++) {
		std::free(out[i].name);
		std::free(out[i].shape);
		std::free(out[i].data);
	}
	std::free(out);
}

// device_for parses a device string and checks that this libtorch can use it.
c10::Device device_for(const char *spec) {
	c10::Device dev(spec == nullptr || *spec == '\0' ? "cpu" : spec);
	if (dev.is_cpu()) return dev;
	if (!dev.is_cuda()) {
		throw std::runtime_error(std::string("device ") + spec + ": only cpu and cuda devices are served");
	}
	if (!at::hasCUDA()) {
		throw std::runtime_error(std::string("device ") + spec + ": this libtorch (" TORCH_VERSION
					 ") was built without CUDA; build the shim against a CUDA-enabled libtorch");
	}
	int64_t n = static_cast<int64_t>(torch::cuda::device_count());
	int64_t idx = dev.has_index() ? dev.index() : 0;
	if (idx >= n) {
		throw std::runtime_error(std::string("device ") + spec + ": libtorch sees " + std::to_string(n) +
					 " CUDA device(s)");
	}
	return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(idx));
}

}  // namespace

extern "C" {

int eas_ts_abi_version(void) { return EAS_TS_ABI_VERSION; }

const char *eas_ts_torch_version(void) { return TORCH_VERSION; }

void eas_ts_set_num_threads(int n) {
	if (n <= 0) return;
	g_threads.store(n, std::memory_order_relaxed);
	try {
		at::set_num_threads(n);
	} catch (...) {
	}
}

int eas_ts_max_file_version(void) {
	return static_cast<int>(caffe2::serialize::kMaxSupportedFileFormatVersion);
}

int eas_ts_cuda_device_count(void) {
	try {
		if (!at::hasCUDA()) return -1;
		return static_cast<int>(torch::cuda::device_count());
	} catch (...) {
		return -1;
	}
}

int eas_ts_get_num_threads(void) {
	int n = g_threads.load(std::memory_order_relaxed);
	if (n > 0) return n;
	try {
		return at::get_num_threads();
	} catch (...) {
		return 0;
	}
}

eas_ts_module *eas_ts_load(const char *path, const char *device, int optimize, char **err) {
	const std::string where = std::string("load ") + (path ? path : "(null)") + ": ";
	const std::string runtime = " (this runtime is libtorch " TORCH_VERSION
				    "; a file saved by a newer PyTorch may need a newer libtorch)";
	try {
		std::unique_ptr<eas_ts_module> m(new eas_ts_module);
		m->device = device_for(device);
		m->mod = torch::jit::load(path, m->device);
		m->mod.eval();
		if (optimize == EAS_TS_OPT_FREEZE || optimize == EAS_TS_OPT_INFERENCE) {
			try {
				m->mod = torch::jit::freeze(m->mod);
				if (optimize == EAS_TS_OPT_INFERENCE) m->mod = torch::jit::optimize_for_inference(m->mod);
			} catch (const c10::Error &e) {
				set_err(err, where + "cannot optimise the module (" + brief(e) +
						     "); deploy it without the optimisation");
				return nullptr;
			}
		} else if (optimize != EAS_TS_OPT_NONE) {
			set_err(err, where + "unknown optimisation " + std::to_string(optimize));
			return nullptr;
		}
		auto method = m->mod.find_method("forward");
		if (!method) {
			set_err(err, where + "the module has no forward method");
			return nullptr;
		}
		const auto &args = method->function().getSchema().arguments();
		for (size_t i = 0; i < args.size(); i++) {
			if (i == 0 && args[i].name() == "self") continue;
			m->names.push_back(args[i].name());
			m->types.push_back(args[i].type()->annotation_str());
		}
		const auto &rets = method->function().getSchema().returns();
		if (rets.size() == 1) {
			m->returns = rets[0].type()->annotation_str();
		} else {
			m->returns = "Tuple[";
			for (size_t i = 0; i < rets.size(); i++) {
				if (i > 0) m->returns += ", ";
				m->returns += rets[i].type()->annotation_str();
			}
			m->returns += "]";
		}
		return m.release();
	} catch (const c10::Error &e) {
		set_err(err, where + brief(e) + runtime);
	} catch (const std::exception &e) {
		set_err(err, where + e.what() + runtime);
	} catch (...) {
		set_err(err, where + "unknown C++ exception" + runtime);
	}
	return nullptr;
}

int eas_ts_num_args(const eas_ts_module *m) { return static_cast<int>(m->names.size()); }

// Out of range gives "" (no exception may leave the shim).
const char *eas_ts_arg_name(const eas_ts_module *m, int i) {
	return i >= 0 && static_cast<size_t>(i) < m->names.size() ? m->names[i].c_str() : "";
}

const char *eas_ts_arg_type(const eas_ts_module *m, int i) {
	return i >= 0 && static_cast<size_t>(i) < m->types.size() ? m->types[i].c_str() : "";
}

const char *eas_ts_return_type(const eas_ts_module *m) { return m->returns.c_str(); }

int eas_ts_forward(eas_ts_module *m, const eas_ts_input *in, int n, eas_ts_output **out, int *nout,
		   char **err) {
	*out = nullptr;
	*nout = 0;
	eas_ts_output *res = nullptr;
	int nres = 0;
	try {
		sync_threads();
		c10::InferenceMode guard;
		std::vector<c10::IValue> args;
		args.reserve(n);
		for (int i = 0; i < n; i++) {
			c10::ScalarType st;
			if (!to_scalar_type(in[i].dtype, &st)) {
				throw std::runtime_error("input " + std::to_string(i) + ": unsupported dtype code " +
							 std::to_string(in[i].dtype));
			}
			std::vector<int64_t> shape(in[i].shape, in[i].shape + in[i].ndim);
			at::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(st));
			size_t want = static_cast<size_t>(t.numel()) * t.element_size();
			if (want != in[i].nbytes) {
				throw std::runtime_error("input " + std::to_string(i) + ": " +
							 std::to_string(in[i].nbytes) + " bytes for a shape needing " +
							 std::to_string(want));
			}
			if (want > 0) std::memcpy(t.data_ptr(), in[i].data, want);
			if (!m->device.is_cpu()) t = t.to(m->device);
			args.emplace_back(std::move(t));
		}
		c10::IValue result = m->mod.forward(std::move(args));
		std::vector<named> outs;
		collect(result, &outs);
		res = static_cast<eas_ts_output *>(std::calloc(outs.size() ? outs.size() : 1, sizeof(eas_ts_output)));
		if (res == nullptr) throw std::bad_alloc();
		for (const named &o : outs) {
			at::Tensor t = o.t.to(torch::kCPU).contiguous();
			eas_ts_output &r = res[nres++];
			r.dtype = from_scalar_type(t.scalar_type());
			if (r.dtype == 0) {
				throw std::runtime_error(std::string("output ") + std::to_string(nres - 1) +
							 " has unsupported dtype " + c10::toString(t.scalar_type()));
			}
			if (o.has_name) {
				r.name = dup_string(o.name);
				if (r.name == nullptr) throw std::bad_alloc();
			}
			r.ndim = static_cast<int>(t.dim());
			r.shape = static_cast<int64_t *>(std::malloc(sizeof(int64_t) * (r.ndim ? r.ndim : 1)));
			if (r.shape == nullptr) throw std::bad_alloc();
			for (int d = 0; d < r.ndim; d++) r.shape[d] = t.size(d);
			r.nbytes = static_cast<size_t>(t.numel()) * t.element_size();
			r.data = std::malloc(r.nbytes ? r.nbytes : 1);
			if (r.data == nullptr) throw std::bad_alloc();
			if (r.nbytes > 0) std::memcpy(r.data, t.data_ptr(), r.nbytes);
		}
		*out = res;
		*nout = nres;
		return 0;
	} catch (const c10::Error &e) {
		set_err(err, "forward: " + brief(e));
	} catch (const std::exception &e) {
		set_err(err, std::string("forward: ") + e.what());
	} catch (...) {
		set_err(err, "forward: unknown C++ exception");
	}
	free_outputs(res, nres);
	return -1;
}

void eas_ts_free_outputs(eas_ts_output *out, int n) { free_outputs(out, n); }

void eas_ts_free_string(char *s) { std::free(s); }

void eas_ts_free(eas_ts_module *m) {
	try {
		delete m;
	} catch (...) {
	}
}

}  // extern "C"
