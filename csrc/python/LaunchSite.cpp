// LaunchSite.cpp - finds the user's Python line that launched an npu op, for error attribution.
#include "csrc/python/LaunchSite.h"

#include <Python.h>
#include <frameobject.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace torch_npu::python {
namespace {

// Guarded by the GIL (read and written only by code holding it).
std::vector<std::string>* library_prefixes = nullptr;
bool prefixes_changed = false;

bool isLibraryFile(const std::string& file) {
  if (file.find("/torch/") != std::string::npos || file.find("/torch_npu/") != std::string::npos ||
      file.find("/torchair/") != std::string::npos || file.rfind("<frozen", 0) == 0 ||
      file.rfind("<eval_with_key>", 0) == 0) {
    return true;
  }
  if (library_prefixes == nullptr) return false;
  for (const std::string& prefix : *library_prefixes) {
    if (file.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// "file.py:line" of one frame. Computing a line number scans the code's line table, so results are
// cached per (code object, instruction); the cache holds a reference to each code object so that
// its address cannot be reused by another while cached.
std::string frameSite(PyFrameObject* frame, PyCodeObject* code, bool* is_library) {
  static std::unordered_map<uint64_t, std::pair<std::string, bool>>* cache = nullptr;
  static std::vector<PyObject*>* held = nullptr;
  if (cache == nullptr) {
    cache = new std::unordered_map<uint64_t, std::pair<std::string, bool>>();
    held = new std::vector<PyObject*>();
  }
  if (prefixes_changed) {  // cached classifications may be stale
    cache->clear();
    for (PyObject* o : *held) Py_DECREF(o);
    held->clear();
    prefixes_changed = false;
  }
  const uint64_t key = (reinterpret_cast<uint64_t>(code) << 16) ^
                       static_cast<uint64_t>(PyFrame_GetLasti(frame));
  auto it = cache->find(key);
  if (it != cache->end()) {
    *is_library = it->second.second;
    return it->second.first;
  }
  if (cache->size() > 8192) {  // bounded: drop everything and start again
    cache->clear();
    for (PyObject* o : *held) Py_DECREF(o);
    held->clear();
  }
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  std::string site = std::string(file ? file : "?") + ":" + std::to_string(PyFrame_GetLineNumber(frame));
  *is_library = file && isLibraryFile(file);
  Py_INCREF(code);
  held->push_back(reinterpret_cast<PyObject*>(code));
  cache->emplace(key, std::make_pair(site, *is_library));
  return site;
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
    bool is_library = true;
    std::string site = frameSite(frame, code, &is_library);
    Py_DECREF(code);
    if (first.empty()) first = site;
    if (!is_library) result = std::move(site);
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

void addLibraryPathPrefix(const std::string& prefix) {
  if (library_prefixes == nullptr) library_prefixes = new std::vector<std::string>();
  for (const std::string& known : *library_prefixes) {
    if (known == prefix) return;
  }
  library_prefixes->push_back(prefix);
  prefixes_changed = true;
}

void installLaunchSiteProvider() { at_npu::native::setLaunchSiteProvider(&launchSite); }

}  // namespace torch_npu::python
