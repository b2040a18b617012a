// GraphBindings.cpp - bindings for compiled graphs (torch.compile on npu): stream-ordered launch of
// Inductor's C++ kernels, the compiled-graph context for error attribution, and named device ops
// called from graphs (torchair converters).
#include "csrc/python/GraphBindings.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUStream.h"
#include "csrc/framework/DeferredRelease.h"
#include "csrc/framework/DeviceTask.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"
#include "csrc/python/LaunchSite.h"

namespace torch_npu::python {
namespace {

// The uniform entry point torch_npu adds to each compiled kernel library: the kernel's arguments as
// 64-bit slots (pointers, integers, doubles' bits); returns non-zero and fills `error` on failure.
using KernelEntry = int (*)(const uint64_t* args, char* error, uint64_t error_size);

// One compiled C++ kernel on npu: calling it queues the kernel on the current stream of its tensors'
// device, as an eager op is queued, and returns at once.
class CompiledKernel {
 public:
  CompiledKernel(uint64_t entry, std::string arg_kinds, std::string what, py::object owner)
      : entry_(reinterpret_cast<KernelEntry>(entry)),
        kinds_(std::move(arg_kinds)),
        what_(std::move(what)),
        owner_(std::move(owner)) {
    TORCH_CHECK(entry != 0, "compiled kernel ", what_, " has no entry point");
  }

  void call(const py::args& args) const {
    TORCH_CHECK(args.size() == kinds_.size(), what_, ": expected ", kinds_.size(), " arguments, got ",
                args.size());
    std::vector<uint64_t> values(kinds_.size());
    std::vector<at::Tensor> host_tensors;  // CPU tensors the kernel reads stay alive until it ran
    std::optional<c10::DeviceIndex> device;
    for (size_t i = 0; i < kinds_.size(); ++i) {
      PyObject* obj = args[i].ptr();
      switch (kinds_[i]) {
        case 'p': {
          TORCH_CHECK_TYPE(THPVariable_Check(obj), what_, ": argument ", i, " must be a tensor, got ",
                           Py_TYPE(obj)->tp_name);
          const at::Tensor& t = THPVariable_Unpack(obj);
          if (t.device().type() == c10::DeviceType::PrivateUse1) {
            if (!device) {
              device = t.device().index();
            } else {
              TORCH_CHECK(*device == t.device().index(), what_, ": tensors on npu:", static_cast<int>(*device),
                          " and ", t.device(), " in one kernel");
            }
          } else {
            TORCH_CHECK(t.device().is_cpu(), what_, ": argument ", i, " is on ", t.device(),
                        "; a compiled npu kernel reads npu or CPU tensors");
            host_tensors.push_back(t);
          }
          values[i] = reinterpret_cast<uint64_t>(t.data_ptr());
          break;
        }
        case 'i': {
          const long long v = PyLong_AsLongLong(obj);
          if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
          values[i] = static_cast<uint64_t>(v);
          break;
        }
        case 'f': {
          const double v = PyFloat_AsDouble(obj);
          if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
          std::memcpy(&values[i], &v, sizeof(v));
          break;
        }
        default:
          TORCH_CHECK(false, what_, ": unknown argument kind '", kinds_[i], "'");
      }
    }
    const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device ? *device : -1);
    at_npu::native::launchDeviceTask(
        stream, what_,
        [entry = entry_, values = std::move(values),
         held = at_npu::native::KeptAlive<std::vector<at::Tensor>>(std::move(host_tensors))] {
          char error[2048] = {0};
          if (entry(values.data(), error, sizeof(error)) != 0) throw std::runtime_error(error);
        });
  }

  const std::string& what() const { return what_; }

 private:
  KernelEntry entry_;
  std::string kinds_;  // one letter per argument: p pointer (tensor), i int64, f double
  std::string what_;
  py::object owner_;  // the loaded library: kept loaded while the kernel exists
};

// Named device ops from Python: descriptors for the arguments (kinds: t tensor or None, T tensor
// list, l int list, s scalar; anything else passes through as a number for the ctypes call).
std::vector<void*> makeDescriptors(const py::list& values, const std::string& kinds) {
  TORCH_CHECK(values.size() == kinds.size(), "device op: ", values.size(), " values for ", kinds.size(),
              " kinds");
  std::vector<void*> out(kinds.size(), nullptr);
  for (size_t i = 0; i < kinds.size(); ++i) {
    const py::handle v = values[i];
    switch (kinds[i]) {
      case 't':
        if (!v.is_none()) out[i] = at_npu::native::ConvertType(THPVariable_Unpack(v.ptr()));
        break;
      case 'T': {
        std::vector<at::Tensor> tensors;
        for (py::handle t : v) tensors.push_back(THPVariable_Unpack(t.ptr()));
        out[i] = at_npu::native::ConvertType(at::TensorList(tensors));
        break;
      }
      case 'l': {
        std::vector<int64_t> ints = v.cast<std::vector<int64_t>>();
        out[i] = at_npu::native::ConvertType(at::IntArrayRef(ints));
        break;
      }
      case 's':
        if (py::isinstance<py::bool_>(v)) {
          out[i] = at_npu::native::ConvertType(at::Scalar(v.cast<bool>()));
        } else if (py::isinstance<py::int_>(v)) {
          out[i] = at_npu::native::ConvertType(at::Scalar(v.cast<int64_t>()));
        } else {
          out[i] = at_npu::native::ConvertType(at::Scalar(v.cast<double>()));
        }
        break;
      default:
        break;
    }
  }
  return out;
}

void releaseDescriptors(const std::vector<uint64_t>& ptrs, const std::string& kinds) {
  for (size_t i = 0; i < kinds.size() && i < ptrs.size(); ++i) {
    void* p = reinterpret_cast<void*>(ptrs[i]);
    switch (kinds[i]) {
      case 't': at_npu::native::Release(static_cast<aclTensor*>(p)); break;
      case 'T': at_npu::native::Release(static_cast<aclTensorList*>(p)); break;
      case 'l': at_npu::native::Release(static_cast<aclIntArray*>(p)); break;
      case 's': at_npu::native::Release(static_cast<aclScalar*>(p)); break;
      default: break;
    }
  }
}

}  // namespace

void initGraphBindings(py::module& m) {
  py::class_<CompiledKernel>(m, "_CompiledKernel")
      .def(py::init<uint64_t, std::string, std::string, py::object>())
      .def("__call__", &CompiledKernel::call)
      .def_property_readonly("what", &CompiledKernel::what);

  // Sets this thread's compiled-graph context; returns the previous one (to restore on exit).
  // _empty_strided_npu(sizes, strides, dtype): an uninitialised tensor on the current npu device made
  // by the npu empty_strided kernel directly (no dispatcher round trip), as Inductor's generated code
  // allocates its buffers.
  m.def("_empty_strided_npu", [](std::vector<int64_t> sizes, std::vector<int64_t> strides, py::object dtype) {
    TORCH_CHECK_TYPE(THPDtype_Check(dtype.ptr()), "_empty_strided_npu: dtype must be a torch.dtype, got ",
                     std::string(py::str(py::type::of(dtype))));
    TORCH_CHECK_VALUE(sizes.size() == strides.size(), "_empty_strided_npu: ", sizes.size(), " sizes but ",
                      strides.size(), " strides");
    const at::ScalarType type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
    at::Tensor t;
    {
      py::gil_scoped_release no_gil;
      t = at_npu::native::empty_strided(sizes, strides, type, std::nullopt, std::nullopt, std::nullopt);
    }
    return py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
  });
  m.def("_graph_context", [](std::string context) {
    std::string previous = at_npu::native::graphContext();
    at_npu::native::setGraphContext(std::move(context));
    return previous;
  });
  m.def("_add_launch_site_library_prefix", &addLibraryPathPrefix);

  // Entering a compiled graph's call: its kernels read storages as plain strided memory, so an input
  // held in a private format has its storage converted to the base format in place (TransData on the
  // stream; every view of the storage keeps its values, as after npu_format_cast_), and the graph's
  // npu ops return base formats. Returns the previous base-formats-only setting for _graph_exit.
  m.def("_graph_enter_formats", [](const py::list& args) {
    if (at_npu::native::anyPrivateFormat()) {
      for (const py::handle item : args) {
        if (!THPVariable_Check(item.ptr())) continue;
        const at::Tensor& t = THPVariable_Unpack(item.ptr());
        if (t.defined() && at_npu::native::privateDesc(t) != nullptr) {
          c10::DeviceGuard guard(t.device());
          at_npu::native::unformatStorage(t.storage());
        }
      }
    }
    return at_npu::native::setBaseFormatsOnly(true);
  });
  m.def("_graph_exit_formats", [](bool previous) { at_npu::native::setBaseFormatsOnly(previous); });

  // A named device op called from Python: _device_op_prepare gives the GetWorkspaceSize address and
  // the argument descriptors (the caller makes the typed call), _device_op_launch releases them and
  // queues the op on the current stream (or raises the GetWorkspaceSize failure).
  m.def("_device_op_prepare", [](const std::string& name, const py::list& values, const std::string& kinds) {
    const aclnnOpEntry& op = at_npu::native::findDeviceOp(name.c_str());
    at_npu::native::tagDeviceOpLaunch();
    std::vector<uint64_t> ptrs;
    for (void* p : makeDescriptors(values, kinds)) ptrs.push_back(reinterpret_cast<uint64_t>(p));
    return py::make_tuple(reinterpret_cast<uint64_t>(op.get_workspace_size), ptrs);
  });
  m.def("_device_op_launch", [](const std::string& name, const std::vector<uint64_t>& ptrs,
                                const std::string& kinds, int status, uint64_t workspace_size,
                                uint64_t executor) {
    releaseDescriptors(ptrs, kinds);
    const aclnnOpEntry& op = at_npu::native::findDeviceOp(name.c_str());
    if (status != ACLNN_SUCCESS) at_npu::native::throwDeviceOpError(op.name, "GetWorkspaceSize", status);
    at_npu::native::launchDeviceOp(op, workspace_size, reinterpret_cast<aclOpExecutor*>(executor));
  });
  m.def("_device_op_release", &releaseDescriptors);
}

}  // namespace torch_npu::python
