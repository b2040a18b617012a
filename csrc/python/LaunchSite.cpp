// LaunchSite.cpp - finds the user's Python line that launched an npu op, for error attribution.
// Per launch: the frames are read without the GIL (FrameCapture) and their sites come from
// per-thread caches; only a code object or line seen for the first time takes the GIL.
#include "csrc/python/LaunchSite.h"

#include <Python.h>
#include <frameobject.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "csrc/python/FrameCapture.h"

namespace torch_npu::python {
namespace {

using at_npu::native::LaunchSite;

constexpr size_t kMaxCachedCodes = 8192;  // per thread; beyond it sites are computed every time
constexpr int kMaxDepth = 32;

// Extra library paths (generated code such as Inductor's cache directory); guarded by the GIL. A
// change bumps the generation so that every thread drops what it classified before.
std::vector<std::string>* library_prefixes = nullptr;
std::atomic<uint64_t> prefixes_generation{0};

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

// Sites live for the process: tasks and executors keep pointers to them.
const LaunchSite* intern(const std::string& location) {
  static std::mutex mutex;
  static auto* sites = new std::unordered_map<std::string, std::unique_ptr<LaunchSite>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*sites)[location];
  if (!slot) slot.reset(new LaunchSite{location, "(launched from " + location + ")"});
  return slot.get();
}

std::string fileOf(PyCodeObject* code) {
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (file == nullptr) PyErr_Clear();
  return file ? file : "?";
}

// What this thread learned about code objects (each held by a reference, so that its address
// cannot be reused while cached) and the sites of their lines.
struct FrameHash {
  size_t operator()(const std::pair<const void*, int>& f) const {
    return std::hash<const void*>()(f.first) * 31 + static_cast<size_t>(f.second);
  }
};
struct SiteCache {
  std::unordered_map<const void*, bool> library;  // code -> is it torch's / torch_npu's own
  std::unordered_map<std::pair<const void*, int>, const LaunchSite*, FrameHash> sites;
  uint64_t generation = 0;  // of the library prefixes the classifications were made with
  // The last launch whose innermost frame was user code: a loop launching from one line finds its
  // site here from that frame alone, without walking the stack or hashing.
  const void* last_code = nullptr;
  int last_lasti = -1;
  const LaunchSite* last_site = nullptr;
};

// Drops stale classifications after the library prefixes changed; the GIL is held.
void refresh(SiteCache& c) {
  const uint64_t now = prefixes_generation.load(std::memory_order_acquire);
  if (c.generation == now) return;
  for (const auto& entry : c.library) Py_DECREF(static_cast<PyObject*>(const_cast<void*>(entry.first)));
  c.library.clear();
  c.sites.clear();
  c.last_code = nullptr;
  c.generation = now;
}

SiteCache& cache() {
  thread_local SiteCache c;
  return c;
}

std::pair<const void*, int> siteKey(const CapturedFrame& f) { return {f.code, f.lasti}; }

// Fills in a code object's library flag; the GIL is held. False when the cache is full.
bool learnCode(SiteCache& c, PyCodeObject* code) {
  if (c.library.size() >= kMaxCachedCodes) return false;
  Py_INCREF(code);
  c.library.emplace(code, isLibraryFile(fileOf(code)));
  return true;
}

const LaunchSite* siteOf(PyCodeObject* code, int lasti) {
  return intern(fileOf(code) + ":" + std::to_string(PyCode_Addr2Line(code, lasti * 2)));
}

// Only for a user-code innermost frame whose code object the cache holds (so that its address is
// not reused while remembered).
void remember(SiteCache& c, const CapturedFrame& innermost, const LaunchSite* site) {
  c.last_code = innermost.code;
  c.last_lasti = innermost.lasti;
  c.last_site = site;
}

// The innermost frame outside torch / torch_npu, or the innermost frame at all, from frames read
// without the GIL; the GIL is taken only for what the caches do not know yet.
const LaunchSite* fromCapturedFrames(const CapturedFrame* frames, int n) {
  SiteCache& c = cache();
  int chosen = -1;
  bool complete = c.generation == prefixes_generation.load(std::memory_order_acquire);
  for (int i = 0; i < n && chosen < 0; ++i) {
    auto it = c.library.find(frames[i].code);
    if (it == c.library.end()) {
      complete = false;
      break;
    }
    if (!it->second) chosen = i;
  }
  if (complete) {
    if (chosen < 0) chosen = 0;
    auto it = c.sites.find(siteKey(frames[chosen]));
    if (it != c.sites.end()) {
      if (chosen == 0) remember(c, frames[0], it->second);
      return it->second;
    }
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  refresh(c);
  chosen = -1;
  bool cacheable = true;
  for (int i = 0; i < n && chosen < 0; ++i) {
    auto* code = static_cast<PyCodeObject*>(frames[i].code);
    auto it = c.library.find(code);
    bool is_library = false;
    if (it != c.library.end()) {
      is_library = it->second;
    } else {
      is_library = isLibraryFile(fileOf(code));
      cacheable = learnCode(c, code) && cacheable;
    }
    if (!is_library) chosen = i;
  }
  if (chosen < 0) chosen = 0;
  const LaunchSite* site = siteOf(static_cast<PyCodeObject*>(frames[chosen].code), frames[chosen].lasti);
  if (cacheable) {
    c.sites.emplace(siteKey(frames[chosen]), site);
    if (chosen == 0) remember(c, frames[0], site);
  }
  PyGILState_Release(gil);
  return site;
}

// Interpreters whose frames cannot be read directly: the walk through the frame API, with the GIL.
const LaunchSite* withFrameApi() {
  PyGILState_STATE gil = PyGILState_Ensure();
  const LaunchSite* first = nullptr;
  const LaunchSite* result = nullptr;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  for (int depth = 0; frame != nullptr && depth < kMaxDepth && result == nullptr; ++depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const std::string file = fileOf(code);
    const LaunchSite* site = intern(file + ":" + std::to_string(PyFrame_GetLineNumber(frame)));
    Py_DECREF(code);
    if (first == nullptr) first = site;
    if (!isLibraryFile(file)) result = site;
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return result ? result : first;
}

const LaunchSite* launchSite() {
  if (!Py_IsInitialized()) return nullptr;
  CapturedFrame frames[kMaxDepth];
  int n = captureFrames(frames, 1);
  if (n == 0) return nullptr;  // not called from Python code
  if (n > 0) {
    const SiteCache& c = cache();
    if (frames[0].code == c.last_code && frames[0].lasti == c.last_lasti &&
        c.generation == prefixes_generation.load(std::memory_order_acquire)) {
      return c.last_site;
    }
    n = captureFrames(frames, kMaxDepth);
    return fromCapturedFrames(frames, n);
  }
  if (PyGILState_GetThisThreadState() == nullptr) return nullptr;  // a thread Python never ran
  return withFrameApi();
}

}  // namespace

void addLibraryPathPrefix(const std::string& prefix) {
  if (library_prefixes == nullptr) library_prefixes = new std::vector<std::string>();
  for (const std::string& known : *library_prefixes) {
    if (known == prefix) return;
  }
  library_prefixes->push_back(prefix);
  prefixes_generation.fetch_add(1, std::memory_order_release);
}

void installLaunchSiteProvider() { at_npu::native::setLaunchSiteProvider(&launchSite); }

}  // namespace torch_npu::python
