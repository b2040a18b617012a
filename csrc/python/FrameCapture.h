// FrameCapture.h - the calling thread's Python frames as (code object, instruction) pairs, read
// without the GIL and without allocating: the cheap half of launch-site attribution.
#pragma once

namespace torch_npu::python {

struct CapturedFrame {
  void* code;  // PyCodeObject*, kept alive by its frame while the caller's C code runs
  int lasti;   // instruction index, for the line number
};

// Fills up to `max` frames, innermost first, and returns how many; -1 when this interpreter
// version or thread cannot be read this way (the caller then walks frames with the GIL).
int captureFrames(CapturedFrame* out, int max);

}  // namespace torch_npu::python
