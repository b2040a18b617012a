// LaunchSite.cpp - finds the user's Python line that launched an npu op, for error attribution.
#include "csrc/python/LaunchSite.h"

#include <Python.h>
#include <frameobject.h>

#include <string>

namespace torch_npu::python {
namespace {

bool isLibraryFile(const std::string& file) {
  return file.find("/torch/") != std::string::npos || file.find("/torch_npu/") != std::string::npos ||
         file.rfind("<frozen", 0) == 0;
}

// The innermost frame outside torch / torch_npu ("file.py:line"), or the innermost frame at all.
std::string launchSite() {
  if (!Py_IsInitialized()) return "";
  PyGILState_STATE gil = PyGILState_Ensure();
  std::string first, result;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  for (int depth = 0; frame != nullptr && depth < 32 && result.empty(); ++depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    std::string site = std::string(file ? file : "?") + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    Py_DECREF(code);
    if (first.empty()) first = site;
    if (file && !isLibraryFile(file)) result = site;
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return result.empty() ? first : result;
}

}  // namespace

void installLaunchSiteProvider() { at_npu::native::setLaunchSiteProvider(&launchSite); }

}  // namespace torch_npu::python
