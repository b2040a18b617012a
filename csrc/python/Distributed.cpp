// Distributed.cpp - torch_npu._C._distributed.ProcessGroupHCCL, a torch.distributed Backend subclass
// that torch_npu/distributed/ constructs for Backend.register_backend("hccl", ...).
#include "csrc/python/Distributed.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "csrc/distributed/ProcessGroupHCCL.h"

namespace py = pybind11;

namespace torch_npu::python {

namespace {

void registerProcessGroupHCCL(py::module_& sub) {
  py::class_<c10d_npu::ProcessGroupHCCL, c10d::Backend, c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL>>(
      sub, "ProcessGroupHCCL", py::release_gil_before_calling_cpp_dtor())
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const c10::intrusive_ptr<c10d::Backend>& data_gloo,
                       const c10::intrusive_ptr<c10d::Backend>& meta_gloo, std::vector<int64_t> global_ranks) {
             return c10::make_intrusive<c10d_npu::ProcessGroupHCCL>(store, rank, size, timeout, data_gloo, meta_gloo,
                                                                    std::move(global_ranks));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("data_gloo"),
           py::arg("meta_gloo"), py::arg("global_ranks") = std::vector<int64_t>{},
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("_timeout", &c10d_npu::ProcessGroupHCCL::timeout)
      .def("_rebuild", &c10d_npu::ProcessGroupHCCL::rebuild, py::arg("store"), py::arg("data_gloo"),
           py::arg("meta_gloo"), py::call_guard<py::gil_scoped_release>())
      // The group's name for the communication-fused ops' `hcom` (rank_id and init_comm are upstream's
      // arguments; the name is the same for every rank of this process).
      .def(
          "get_hccl_comm_name",
          [](c10d_npu::ProcessGroupHCCL& self, int64_t rank_id, bool init_comm) { return self.hcclCommName(); },
          py::arg("rank_id"), py::arg("init_comm") = true)
      .def("_set_hccl_comm_name", &c10d_npu::ProcessGroupHCCL::setHcclCommName, py::arg("name"));
}

}  // namespace

void initDistributedBindings(py::module_& module) {
  py::module_ sub = module.def_submodule("_distributed", "the hccl c10d backend");
  // c10d's Python types (Backend, Store) exist once torch.distributed is imported; the class is
  // registered then, by torch_npu.distributed.
  sub.def("_init", [sub]() mutable {
    if (py::hasattr(sub, "ProcessGroupHCCL")) return;
    py::module_::import("torch.distributed");
    registerProcessGroupHCCL(sub);
  });
}

}  // namespace torch_npu::python
