// The operators' per-call path in C++: torch.ops.autotune.<name> on CUDA tensors without entering Python.
//
// Python (autotune/runtime/torch_native.py) registers each operator here with a `prepare` callable. The first call of a
// key (each input's sizes, dtype and device) calls it, under the GIL: it checks the tensors (raising torch-style
// errors), lets the dispatcher choose, compile and load the configuration, and returns the description of the
// plan (`autotune.runtime.launch_plan.LaunchPlan.describe`: the same launches, kernel handles, grids and
// arguments that the ctypes path runs). Every later call of that key stays in C++: a hash lookup, the outputs and
// workspace from torch's caching allocator, the buffer pointers written into the parameter blocks (tensor maps
// encoded again where a pointer changed), and cuLaunchKernel on torch's current stream.
//
// The Autograd kernel goes below autograd at once when no input needs a gradient (inference, CUDA graphs). With
// one, the GEMMs, linear, linear_gelu, layernorm and half-precision attention record a C++ autograd node
// (`NativeGrad`: their backward formulas, the same operators as autotune/torch/autograd.py calls), and any other
// operator calls the Python autograd implementation
// torch.library would have built: a training step's Python per operator cost more host time than torch's own
// autograd nodes.
//
// The CUDA driver functions come as addresses from autotune.runtime.cuda_driver (the libcuda.so it loaded), so
// this file needs no CUDA headers or libraries besides torch's own.
#include <torch/extension.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "torch_autograd.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace py = pybind11;

namespace {

using LaunchFn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                         void**);
using EncodeFn = int (*)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*, const uint32_t*,
                         const uint32_t*, int, int, int, int);
using MemsetFn = int (*)(uint64_t, unsigned char, size_t, void*);
using ErrorNameFn = int (*)(int, const char**);

// cuda.h's CUlaunchAttribute and CUlaunchConfig (same members in the same order), for cuLaunchKernelEx.
struct alignas(8) LaunchAttribute {
  int id;
  char pad[4];
  int value[16];  // the 64-byte value union
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
  void* stream;
  LaunchAttribute* attrs;
  unsigned count;
};
static_assert(sizeof(LaunchAttribute) == 72 && sizeof(LaunchConfig) == 56, "cuda.h's layout (LP64)");
using LaunchExFn = int (*)(const LaunchConfig*, void*, void**, void**);
constexpr int PROGRAMMATIC_STREAM_SERIALIZATION = 6;  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

struct Driver {
  LaunchFn launch = nullptr;
  LaunchExFn launch_ex = nullptr;  // null: a driver older than CUDA 11.8 (dependent steps launch plainly)
  EncodeFn encode = nullptr;
  MemsetFn memset = nullptr;
  ErrorNameFn error_name = nullptr;
  int l2_promotion = 0;
};
Driver driver;
std::atomic<bool> recording{false};

void check(int code, const std::string& what) {
  if (code == 0) return;
  const char* name = nullptr;
  if (driver.error_name) driver.error_name(code, &name);
  TORCH_CHECK(false, "autotune: ", what, " failed: ", name ? name : "CUDA error ", name ? "" : std::to_string(code));
}

// A tensor map argument: 128 bytes inside its step's parameter storage, encoded again when its buffer moves.
struct TensorMapArg {
  char* where = nullptr;
  int buffer = 0;
  int dtype = 0;
  unsigned rank = 0;
  std::array<uint64_t, 5> dims{}, strides{};
  std::array<uint32_t, 5> box{}, element_strides{};
  int swizzle = 0;
  uint64_t bound = ~0ull;  // the pointer it was last encoded for
};

struct Step {
  bool zero = false;
  int zero_buffer = 0;
  size_t zero_bytes = 0;
  std::string kernel;
  void* function = nullptr;
  std::array<unsigned, 3> grid{}, block{};
  unsigned shared = 0;
  bool overlaps_previous = false;  // a programmatic dependent launch (Launch.overlaps_previous)
  std::vector<char> raw;  // parameter storage, 64-byte aligned slots
  std::vector<void*> params;
  std::vector<std::pair<char*, int>> pointers;  // (slot, buffer index)
  std::vector<TensorMapArg> maps;
};

struct Plan {
  std::vector<Step> steps;
  std::vector<std::vector<int64_t>> out_sizes;
  std::vector<at::ScalarType> out_types;
  std::vector<int64_t> workspace;  // bytes
  py::object note;                 // called with no argument per call while recording
  std::mutex lock;                 // the parameter blocks are shared: fill and launch under it

  // The first buffer a tensor map would read that is not 16-byte aligned (as TMA needs), or -1.
  int misaligned(const std::vector<uint64_t>& pointers) const {
    for (const Step& step : steps)
      for (const TensorMapArg& map : step.maps)
        if (pointers[map.buffer] % 16 != 0) return map.buffer;
    return -1;
  }

  void launch(const std::vector<uint64_t>& pointers, void* stream) {
    std::lock_guard<std::mutex> guard(lock);
    for (Step& step : steps) {
      if (step.zero) {
        check(driver.memset(pointers[step.zero_buffer], 0, step.zero_bytes, stream), "cuMemsetD8Async");
        continue;
      }
      for (auto& [slot, buffer] : step.pointers) std::memcpy(slot, &pointers[buffer], sizeof(uint64_t));
      for (TensorMapArg& map : step.maps) {
        const uint64_t pointer = pointers[map.buffer];
        if (pointer == map.bound) continue;  // `run` checked its alignment before anything was written
        check(driver.encode(map.where, map.dtype, map.rank, reinterpret_cast<void*>(pointer), map.dims.data(),
                            map.strides.data(), map.box.data(), map.element_strides.data(), 0, map.swizzle,
                            driver.l2_promotion, 0),
              "cuTensorMapEncodeTiled");
        map.bound = pointer;
      }
      if (step.overlaps_previous && driver.launch_ex != nullptr) {
        LaunchAttribute attribute{};
        attribute.id = PROGRAMMATIC_STREAM_SERIALIZATION;
        attribute.value[0] = 1;
        const LaunchConfig config{step.grid[0], step.grid[1], step.grid[2], step.block[0], step.block[1],
                                  step.block[2], step.shared, stream, &attribute, 1};
        check(driver.launch_ex(&config, step.function, step.params.data(), nullptr),
              "cuLaunchKernelEx(" + step.kernel + ")");
        continue;
      }
      check(driver.launch(step.function, step.grid[0], step.grid[1], step.grid[2], step.block[0], step.block[1],
                          step.block[2], step.shared, stream, step.params.data(), nullptr),
            "cuLaunchKernel(" + step.kernel + ")");
    }
  }
};

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& key) const {
    size_t h = key.size();
    for (int64_t v : key) h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};

struct Op {
  std::string name;
  size_t inputs = 0;
  py::object prepare;  // (*tensors) -> plan description; raises for tensors the kernel cannot take
  py::object with_grad;  // (keyset, *tensors) -> outputs: torch.library's autograd implementation
  int formula = 0;       // a `Formula` (torch_autograd.h): its backward in C++ (0: none, Python's)
  std::unordered_map<std::vector<int64_t>, std::unique_ptr<Plan>, KeyHash> plans;
  std::mutex lock;
};

// Operators by qualified name; never freed (they hold Python objects, which must outlive no interpreter).
std::unordered_map<std::string, Op*>& operators() {
  static auto* ops = new std::unordered_map<std::string, Op*>();
  return *ops;
}

Op* op_of(const c10::OperatorHandle& handle) {
  auto& ops = operators();
  auto found = ops.find(handle.schema().name());
  TORCH_CHECK(found != ops.end(), "autotune: no native launcher for ", handle.schema().name());
  return found->second;
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Step from its description: ("zero", buffer, nbytes) or ("launch", kernel, function, grid, block, shared, args,
// overlaps_previous),
// args: ("ptr", buffer) | ("value", bytes) | ("tmap", buffer, dtype, dims, strides, box, swizzle).
Step make_step(const py::tuple& d) {
  Step step;
  const std::string kind = d[0].cast<std::string>();
  if (kind == "zero") {
    step.zero = true;
    step.zero_buffer = d[1].cast<int>();
    step.zero_bytes = d[2].cast<size_t>();
    return step;
  }
  TORCH_CHECK(kind == "launch", "autotune: unknown step ", kind);
  step.kernel = d[1].cast<std::string>();
  step.function = reinterpret_cast<void*>(d[2].cast<uintptr_t>());
  auto grid = d[3].cast<std::vector<unsigned>>(), block = d[4].cast<std::vector<unsigned>>();
  std::copy(grid.begin(), grid.end(), step.grid.begin());
  std::copy(block.begin(), block.end(), step.block.begin());
  step.shared = d[5].cast<unsigned>();
  step.overlaps_previous = d.size() > 7 && d[7].cast<bool>();
  const py::list args = d[6].cast<py::list>();
  // Every argument in its own 64-byte aligned slot of 128 bytes (a tensor map is 128 bytes, 64-byte aligned).
  step.raw.assign(args.size() * 128 + 64, 0);
  char* base = reinterpret_cast<char*>(align_up(reinterpret_cast<uintptr_t>(step.raw.data()), 64));
  for (size_t i = 0; i < args.size(); ++i) {
    const py::tuple arg = args[i].cast<py::tuple>();
    char* slot = base + 128 * i;
    const std::string what = arg[0].cast<std::string>();
    if (what == "ptr") {
      step.pointers.emplace_back(slot, arg[1].cast<int>());
    } else if (what == "value") {
      const std::string bytes = arg[1].cast<std::string>();
      TORCH_CHECK(bytes.size() <= 128, "autotune: a scalar argument of ", bytes.size(), " bytes");
      std::memcpy(slot, bytes.data(), bytes.size());
    } else if (what == "tmap") {
      TensorMapArg map;
      map.where = slot;
      map.buffer = arg[1].cast<int>();
      map.dtype = arg[2].cast<int>();
      const auto dims = arg[3].cast<std::vector<uint64_t>>(), strides = arg[4].cast<std::vector<uint64_t>>();
      const auto box = arg[5].cast<std::vector<uint32_t>>();
      TORCH_CHECK(dims.size() >= 1 && dims.size() <= 5 && box.size() == dims.size(), "autotune: tensor map rank");
      map.rank = dims.size();
      for (size_t k = 0; k < dims.size(); ++k) {
        map.dims[k] = dims[k];
        map.box[k] = box[k];
        map.element_strides[k] = 1;
      }
      for (size_t k = 0; k < strides.size() && k < 4; ++k) map.strides[k] = strides[k];
      map.swizzle = arg[6].cast<int>();
      step.maps.push_back(map);
    } else {
      TORCH_CHECK(false, "autotune: unknown argument kind ", what);
    }
    step.params.push_back(slot);
  }
  return step;
}

// Plan from (outputs [(sizes, empty tensor of the dtype)], workspace [bytes], steps [...], note callable or None).
std::unique_ptr<Plan> make_plan(const py::tuple& d) {
  auto plan = std::make_unique<Plan>();
  for (auto item : d[0].cast<py::list>()) {
    const py::tuple out = item.cast<py::tuple>();
    plan->out_sizes.push_back(out[0].cast<std::vector<int64_t>>());
    plan->out_types.push_back(out[1].cast<at::Tensor>().scalar_type());  // an empty tensor of the dtype
  }
  plan->workspace = d[1].cast<std::vector<int64_t>>();
  for (auto item : d[2].cast<py::list>()) plan->steps.push_back(make_step(item.cast<py::tuple>()));
  plan->note = d[3].cast<py::object>();
  return plan;
}

// Each input's (dim, sizes, dtype, device); false where one is not contiguous (Python explains or copes).
bool append_key(const at::Tensor& t, std::vector<int64_t>& key) {
  key.push_back(t.dim());
  for (int64_t s : t.sizes()) key.push_back(s);
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.push_back(t.get_device());
  return t.is_contiguous();
}

Plan* find_plan(Op* op, const std::vector<int64_t>& key) {
  std::lock_guard<std::mutex> guard(op->lock);
  auto found = op->plans.find(key);
  return found == op->plans.end() ? nullptr : found->second.get();
}

Plan* add_plan(Op* op, const std::vector<int64_t>& key, const py::tuple& description) {  // under the GIL
  auto built = make_plan(description);
  std::lock_guard<std::mutex> guard(op->lock);
  auto& slot = op->plans[key];
  if (!slot) slot = std::move(built);
  return slot.get();
}

void note_call(Plan* plan) {
  if (recording.load(std::memory_order_relaxed) && !plan->note.is_none()) {
    py::gil_scoped_acquire gil;
    plan->note();
  }
}

// Launch `plan` on `inputs` and `outputs` (given, or allocated here when empty) on `stream` (nullptr: torch's
// current stream of the inputs' device); the outputs. A buffer TMA cannot take: with `decline`, no launch and an
// empty result (the caller's general path explains it); else a ValueError. Checked before any parameter block or
// tensor map is touched, so the plan stays as it was.
std::vector<at::Tensor> run(Plan* plan, const std::vector<const at::Tensor*>& inputs, std::vector<at::Tensor> outputs,
                            bool current_stream, void* stream, bool decline = false) {
  const at::Tensor& first = *inputs[0];
  const c10::DeviceIndex device = first.device().index();
  c10::cuda::CUDAGuard device_guard(device);
  if (current_stream) stream = c10::cuda::getCurrentCUDAStream(device).stream();
  std::vector<uint64_t> pointers;
  pointers.reserve(inputs.size() + plan->out_sizes.size() + plan->workspace.size());
  for (const at::Tensor* t : inputs) pointers.push_back(reinterpret_cast<uint64_t>(t->data_ptr()));
  if (outputs.empty()) {
    for (size_t i = 0; i < plan->out_sizes.size(); ++i)
      outputs.push_back(at::empty(plan->out_sizes[i], first.options().dtype(plan->out_types[i])));
  }
  for (const at::Tensor& t : outputs) pointers.push_back(reinterpret_cast<uint64_t>(t.data_ptr()));
  // The workspace from torch's caching allocator, freed stream-ordered after the launch (CUDA-graph safe).
  std::vector<at::Tensor> scratch;
  for (int64_t nbytes : plan->workspace) {
    scratch.push_back(at::empty({std::max<int64_t>(nbytes, 1)}, first.options().dtype(at::kByte)));
    pointers.push_back(reinterpret_cast<uint64_t>(scratch.back().data_ptr()));
  }
  const int bad = plan->misaligned(pointers);
  if (bad >= 0) {
    if (decline) return {};
    std::ostringstream where;
    where << std::hex << pointers[bad];
    TORCH_CHECK_VALUE(false, "autotune: a buffer at 0x", where.str(), " is not 16-byte aligned, which this "
                      "configuration's TMA copies need: pass an aligned array (a fresh allocation is)");
  }
  plan->launch(pointers, stream);
  return outputs;
}

void cuda_kernel(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  Op* op = op_of(handle);
  const size_t n = op->inputs;
  auto args = torch::jit::last(*stack, n);
  std::vector<int64_t> key;
  key.reserve(8 * n);
  std::vector<const at::Tensor*> inputs;
  bool contiguous = true;
  for (size_t i = 0; i < n; ++i) {
    inputs.push_back(&args[i].toTensor());
    contiguous = append_key(*inputs.back(), key) && contiguous;
  }
  Plan* plan = contiguous ? find_plan(op, key) : nullptr;
  if (plan == nullptr) {  // a new key, or tensors the kernel may refuse: Python checks, chooses and describes
    py::gil_scoped_acquire gil;
    py::tuple tensors(n);
    for (size_t i = 0; i < n; ++i) tensors[i] = py::cast(*inputs[i]);
    plan = add_plan(op, key, op->prepare(*tensors).cast<py::tuple>());
  }
  note_call(plan);
  std::vector<at::Tensor> outs = run(plan, inputs, {}, true, nullptr);
  torch::jit::drop(*stack, n);
  for (at::Tensor& t : outs) torch::jit::push(*stack, std::move(t));
}

void autograd_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  Op* op = op_of(handle);
  const size_t n = op->inputs;
  bool grad = false;
  if (at::GradMode::is_enabled()) {
    for (const c10::IValue& v : torch::jit::last(*stack, n)) grad = grad || (v.isTensor() && v.toTensor().requires_grad());
  }
  if (!grad) {
    at::AutoDispatchBelowAutograd below;
    handle.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    return;
  }
  if (op->formula != autotune_native::NO_FORMULA &&  // two or three tensors: (A, B[, bias]), (x, w, b), (q, k, v)
      autotune_native::native_backward(op->formula, torch::jit::peek(*stack, 0, n).toTensor())) {
    TORCH_INTERNAL_ASSERT(n == 2 || n == 3, "autotune: a C++ backward for ", n, " inputs");
    auto args = torch::jit::last(*stack, n);
    const at::Tensor t0 = args[0].toTensor(), t1 = args[1].toTensor();
    const std::optional<at::Tensor> t2 = n > 2 ? std::optional<at::Tensor>(args[2].toTensor()) : std::nullopt;
    torch::jit::drop(*stack, n);
    const int64_t formula = op->formula;
    for (at::Tensor& t : autotune_native::NativeGrad::apply(&handle, keys, formula, t0, t1, t2))
      torch::jit::push(*stack, std::move(t));
    return;
  }
  py::gil_scoped_acquire gil;
  auto args = torch::jit::last(*stack, n);
  py::tuple call(n + 1);
  call[0] = py::cast(keys);
  for (size_t i = 0; i < n; ++i) call[i + 1] = py::cast(args[i].toTensor());
  py::object result = op->with_grad(*call);
  torch::jit::drop(*stack, n);
  if (py::isinstance<py::tuple>(result)) {
    for (auto item : result.cast<py::tuple>()) torch::jit::push(*stack, item.cast<at::Tensor>());
  } else {
    torch::jit::push(*stack, result.cast<at::Tensor>());
  }
}

Op* op_named(const std::string& name) {
  auto& ops = operators();
  const std::string qualified = "autotune::" + name;
  auto found = ops.find(qualified);
  if (found != ops.end()) return found->second;
  Op* op = new Op();
  op->name = qualified;
  ops[qualified] = op;
  return op;
}

}  // namespace

void init(uintptr_t launch, uintptr_t launch_ex, uintptr_t encode, uintptr_t memset, uintptr_t error_name,
          int l2_promotion) {
  driver.launch = reinterpret_cast<LaunchFn>(launch);
  driver.launch_ex = reinterpret_cast<LaunchExFn>(launch_ex);
  driver.encode = reinterpret_cast<EncodeFn>(encode);
  driver.memset = reinterpret_cast<MemsetFn>(memset);
  driver.error_name = reinterpret_cast<ErrorNameFn>(error_name);
  driver.l2_promotion = l2_promotion;
}

// The libraries hold the registrations for the life of the process (deliberately never freed).
void register_cuda(const std::string& name, size_t inputs, py::object prepare) {
  Op* op = op_named(name);
  op->inputs = inputs;
  op->prepare = std::move(prepare);
  auto* library = new torch::Library(torch::Library::IMPL, "autotune", c10::DispatchKey::CUDA, __FILE__, __LINE__);
  library->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&cuda_kernel>());
}

// `formula`: a `Formula` (torch_autograd.h) whose backward runs in C++ (its backward operators registered), 0 for
// Python's.
void register_autograd(const std::string& name, size_t inputs, py::object with_grad, int formula) {
  Op* op = op_named(name);
  op->inputs = inputs;
  op->with_grad = std::move(with_grad);
  op->formula = formula;
  auto* library =
      new torch::Library(torch::Library::IMPL, "autotune", c10::DispatchKey::Autograd, __FILE__, __LINE__);
  library->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&autograd_kernel>());
}

// --- TunedKernel's torch calls (autotune.runtime.torch_calls): the same plans, without the dispatcher ---------
std::vector<Op*>& tables() {
  static auto* all = new std::vector<Op*>();
  return *all;
}

int64_t new_table(size_t inputs) {  // one per TunedKernel and GPU
  Op* op = new Op();
  op->inputs = inputs;
  tables().push_back(op);
  return static_cast<int64_t>(tables().size()) - 1;
}

bool unpack(PyObject* obj, c10::DeviceIndex device, const at::Tensor*& out) {
  if (!THPVariable_Check(obj)) return false;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.is_cuda() || t.get_device() != device) return false;
  out = &t;
  return true;
}

// A call of `table` on `arrays` (a tuple), `out` (None, a tensor or a sequence of them) and `stream` (None:
// torch's current stream; an int: a CUstream handle): the result (a tensor, or a tuple of them); None where this
// path cannot take the call (another array type, an unseen key, an `out` that does not fit, another stream
// type), and the general path takes it, explaining any error.
py::object call(int64_t table, c10::DeviceIndex device, const py::tuple& arrays, const py::object& out,
                const py::object& stream) {
  Op* op = tables().at(table);
  const size_t n = arrays.size();
  if (n != op->inputs) return py::none();
  std::vector<const at::Tensor*> inputs(n);
  std::vector<int64_t> key;
  key.reserve(8 * n);
  for (size_t i = 0; i < n; ++i) {
    if (!unpack(arrays[i].ptr(), device, inputs[i]) || !append_key(*inputs[i], key)) return py::none();
  }
  Plan* plan = find_plan(op, key);
  if (plan == nullptr) return py::none();
  const bool current = stream.is_none();
  void* handle = nullptr;
  if (!current) {
    if (!PyLong_Check(stream.ptr())) return py::none();
    handle = reinterpret_cast<void*>(PyLong_AsUnsignedLongLongMask(stream.ptr()));
  }
  std::vector<at::Tensor> given;
  if (!out.is_none()) {
    std::vector<PyObject*> items;
    if (plan->out_sizes.size() == 1) {
      items.push_back(out.ptr());
    } else if (PyTuple_Check(out.ptr()) || PyList_Check(out.ptr())) {
      for (auto item : out) items.push_back(item.ptr());
    }
    if (items.size() != plan->out_sizes.size()) return py::none();
    for (size_t i = 0; i < items.size(); ++i) {
      const at::Tensor* t = nullptr;
      if (!unpack(items[i], device, t) || !t->is_contiguous() || t->scalar_type() != plan->out_types[i] ||
          t->sizes() != c10::IntArrayRef(plan->out_sizes[i]))
        return py::none();
      given.push_back(*t);
    }
  }
  note_call(plan);
  std::vector<at::Tensor> outs = run(plan, inputs, std::move(given), current, handle, /*decline=*/true);
  if (outs.empty()) return py::none();  // a buffer TMA cannot take: the general path raises InvalidArgument
  if (outs.size() == 1) return py::cast(outs[0]);
  py::tuple result(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) result[i] = py::cast(outs[i]);
  return result;
}

void table_add(int64_t table, const py::tuple& arrays, const py::tuple& description) {
  Op* op = tables().at(table);
  std::vector<int64_t> key;
  for (auto item : arrays) append_key(item.cast<at::Tensor>(), key);
  add_plan(op, key, description);
}

void forget(const std::string& name) {  // drop an operator's plans (a test switching databases)
  auto& ops = operators();
  auto found = ops.find("autotune::" + name);
  if (found == ops.end()) return;
  std::lock_guard<std::mutex> guard(found->second->lock);
  found->second->plans.clear();
}

void set_recording(bool on) { recording.store(on); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("init", &init);
  m.def("register_cuda", &register_cuda);
  m.def("register_autograd", &register_autograd);
  m.def("forget", &forget);
  m.def("set_recording", &set_recording);
  m.def("new_table", &new_table);
  m.def("table_add", &table_add);
  m.def("call", &call);
}
