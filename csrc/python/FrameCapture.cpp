// FrameCapture.cpp - reads the calling thread's interpreter frames directly (CPython 3.11 layout).
// Safe without the GIL: a thread's frame stack changes only on that thread, which is busy running
// this call, and each frame holds a strong reference to its code object.
#include <patchlevel.h>  // PY_VERSION_HEX, before choosing how to include Python.h

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#define NPU_FAST_FRAMES 1
#else
#include <Python.h>
#endif

#include "csrc/python/FrameCapture.h"

namespace torch_npu::python {

int captureFrames(CapturedFrame* out, int max) {
#ifdef NPU_FAST_FRAMES
  // The thread's own state, found without the GIL (NULL for threads Python never saw).
  PyThreadState* tstate = PyGILState_GetThisThreadState();
  if (tstate == nullptr || tstate->cframe == nullptr) return -1;
  int n = 0;
  for (_PyInterpreterFrame* f = tstate->cframe->current_frame; f != nullptr && n < max;
       f = f->previous) {
    if (_PyFrame_IsIncomplete(f)) continue;  // being set up: not a Python line yet
    out[n++] = CapturedFrame{f->f_code, _PyInterpreterFrame_LASTI(f)};
  }
  return n;
#else
  (void)out;
  (void)max;
  return -1;
#endif
}

}  // namespace torch_npu::python
