// ina_torch._C: the Python binding of ProcessGroupIna (the PyTorch boundary: errors are Python
// exceptions here). ina_torch/__init__.py registers it as backend "ina".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_ina.h"

namespace py = pybind11;
using ina::torch_backend::BackendOptions;
using ina::torch_backend::InaBackendBase;
using ina::torch_backend::ProcessGroupIna;

PYBIND11_MODULE(_C, m) {
  m.doc() = "ina: in-network all-reduce backend for torch.distributed";
  // The base class must be known to pybind11 before the derived one: torch.distributed binds it
  // (c10d::Backend on torch 2.x, c10d::ProcessGroup on 1.13; process_group_ina.h).
  py::module::import("torch.distributed");
  py::class_<ProcessGroupIna, InaBackendBase, c10::intrusive_ptr<ProcessGroupIna>>(
      m, "ProcessGroupIna")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, c10::intrusive_ptr<InaBackendBase> gloo,
                       c10::intrusive_ptr<InaBackendBase> recovery, std::string switch_addr,
                       int progress_timeout_ms, int join_timeout_ms, int k, int window,
                       int fallback) {
             BackendOptions o;
             o.switch_addr = std::move(switch_addr);
             o.progress_timeout_ms = progress_timeout_ms;
             o.join_timeout_ms = join_timeout_ms;
             o.k = k;
             o.window = window;
             o.fallback = fallback;
             return c10::make_intrusive<ProcessGroupIna>(store, rank, size, timeout, std::move(o),
                                                         std::move(gloo), std::move(recovery));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("gloo"),
           py::arg("recovery"), py::arg("switch") = "", py::arg("progress_timeout_ms") = -1,
           py::arg("join_timeout_ms") = -1, py::arg("k") = -1, py::arg("window") = -1,
           py::arg("fallback") = -1, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("fabric_active", &ProcessGroupIna::fabric_active)
      .def_property_readonly("job_id", &ProcessGroupIna::job_id)
      .def_property_readonly("fabric_status", &ProcessGroupIna::fabric_status)
      .def_property_readonly("fabric_calls", &ProcessGroupIna::fabric_calls)
      .def("metrics", [](const ProcessGroupIna& pg) {
        py::dict d;
        for (const auto& [name, value] : pg.metrics()) d[py::str(name)] = value;
        return d;
      });
  // Whether this build takes CUDA tensors through the fabric (docs/pytorch.md, "CUDA tensors").
  m.def("cuda_path_built", [] { return ina::torch_backend::MakeDevicePath()->built(); });
  // True when ProcessGroupIna is a c10d::Backend (torch 2.x), false when a ProcessGroup (1.13).
  m.attr("IS_BACKEND") = py::bool_(INA_TORCH_BACKEND_API != 0);
}
