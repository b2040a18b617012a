// NPUBlockingWait.h - a thread that blocks on the device gives up the Python GIL while it waits.
#pragma once

namespace c10_npu {

// Held around every adapter call that blocks until device work finishes (stream, event and device
// synchronisation). PyTorch reads device values under the GIL in places the adapter does not control
// (a 0-d npu tensor passed where a Scalar or an int is expected is read by the argument parser), so a
// wait under the GIL must let go of it: work on the device (a Python future callback, a host function)
// may need it. The Python bindings install the release / restore pair; without them this is a no-op.
class BlockingWaitScope {
 public:
  BlockingWaitScope();
  ~BlockingWaitScope();
  BlockingWaitScope(const BlockingWaitScope&) = delete;
  BlockingWaitScope& operator=(const BlockingWaitScope&) = delete;

 private:
  void* saved_;
};

// release() returns an opaque token (nullptr: nothing was released) that restore() takes back.
using GilRelease = void* (*)();
using GilRestore = void (*)(void*);
void setBlockingWaitHooks(GilRelease release, GilRestore restore);

}  // namespace c10_npu
