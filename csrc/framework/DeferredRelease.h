// DeferredRelease.h - what a device task keeps alive is let go of on the release thread, never on a
// stream worker.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

namespace at_npu::native {

// Why: dropping a C++ reference to a tensor or storage that Python also refers to can take the GIL
// (PyTorch keeps the Python object alive while C++ holds references). A stream worker must never
// wait for the GIL: Python threads synchronise streams while holding it (a 0-d npu tensor passed
// where a Scalar is expected is read by the argument parser, under the GIL), so a worker waiting for
// it would never finish the work they wait for. Tasks therefore hold such objects through KeptAlive,
// whose last copy hands them to a thread of their own that may block on the GIL harmlessly.
// Tasks that only need device memory hold host views (HostView.h) and need none of this.
void releaseLater(std::shared_ptr<void> owner) noexcept;

// Waits until everything handed over so far has been released; from then on (stop = true) objects
// handed over are leaked rather than released, as at interpreter exit, when taking the GIL from a
// thread Python does not know aborts the process. Call it without holding the GIL.
void drainReleases(bool stop);

// Counts for tests: objects handed over, objects released.
std::pair<uint64_t, uint64_t> releaseCounts();

template <class T>
class KeptAlive {
 public:
  KeptAlive() = default;
  explicit KeptAlive(T value) : value_(std::make_shared<T>(std::move(value))) {}
  KeptAlive(const KeptAlive&) = default;
  KeptAlive(KeptAlive&&) noexcept = default;
  KeptAlive& operator=(KeptAlive other) noexcept {
    value_.swap(other.value_);  // the old value leaves with `other`, through the release thread
    return *this;
  }
  ~KeptAlive() { reset(); }

  void reset() noexcept {
    if (value_) releaseLater(std::move(value_));
  }

  T& operator*() const { return *value_; }
  T* operator->() const { return value_.get(); }

 private:
  std::shared_ptr<T> value_;
};

}  // namespace at_npu::native
