// RuntimeTest.h - test fixture: a fresh runtime per test, scoped env vars, host-function helpers.
#ifndef NPU_RUNTIME_TESTS_RUNTIME_TEST_H_
#define NPU_RUNTIME_TESTS_RUNTIME_TEST_H_

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "npu/runtime.h"

#define NRT_ASSERT_OK(expr) ASSERT_EQ((expr), NRT_SUCCESS) << nrtGetRecentErrMsg()
#define NRT_EXPECT_OK(expr) EXPECT_EQ((expr), NRT_SUCCESS) << nrtGetRecentErrMsg()

namespace npu::runtime::testing {

// Sets (or, with nullptr, unsets) an environment variable and restores it when destroyed.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    Apply(value);
  }
  ~ScopedEnv() { Apply(old_ ? old_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void Apply(const char* value) {
    if (value == nullptr) {
      unsetenv(name_.c_str());
    } else {
      setenv(name_.c_str(), value, 1);
    }
  }

  std::string name_;
  std::optional<std::string> old_;
};

// Every test starts from a runtime that will re-read a known environment, and finalizes it after,
// so that tests stay independent when the whole binary runs in one process.
class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(nrtFinalize(), NRT_SUCCESS);
    for (const char* name : {"NPU_SIM_DEVICES", "NPU_SIM_MEMORY", "NPU_SIM_CORES", "NPU_SIM_SOC_VERSION",
                             "NPU_SIM_CANN_VERSION", "NPU_SIM_FAULT", "NPU_SIM_TASK_TIMEOUT", "NPU_SIM_HOST_MEMORY",
                             "NPU_SIM_HOST_RESERVE", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_GLOBAL_LOG_LEVEL",
                             "ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_PROCESS_LOG_PATH"}) {
      env_.push_back(std::make_unique<ScopedEnv>(name, nullptr));
    }
  }
  // Runs before the members are destroyed, i.e. before the environment is restored.
  void TearDown() override { EXPECT_EQ(nrtFinalize(), NRT_SUCCESS) << nrtGetRecentErrMsg(); }

  // Sets an env var for the rest of the test and restarts the runtime so that it is read.
  void SetEnv(const char* name, const char* value) {
    ASSERT_EQ(nrtFinalize(), NRT_SUCCESS);
    env_.push_back(std::make_unique<ScopedEnv>(name, value));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

// Launches any callable as a host function (a short one: nrtLaunchHostFuncShort); the task owns it.
inline nrtError_t LaunchCallable(nrtStream_t stream, std::function<int()> fn, bool short_task = false) {
  auto* owned = new std::function<int()>(std::move(fn));
  const nrtHostFunc run = [](void* data) {
    std::unique_ptr<std::function<int()>> fn(static_cast<std::function<int()>*>(data));
    return (*fn)();
  };
  const nrtError_t error = short_task ? nrtLaunchHostFuncShort(stream, run, owned, "short_op", nullptr)
                                      : nrtLaunchHostFunc(stream, run, owned);
  if (error != NRT_SUCCESS) delete owned;
  return error;
}

// A one-shot barrier for host functions. Its state is shared with the tasks, and it opens at the
// latest when the test's Gate goes out of scope, so that a failed assertion never leaves a worker
// blocked on freed memory or nrtFinalize() waiting forever.
class Gate {
 public:
  Gate() : state_(std::make_shared<State>()) {}
  ~Gate() { Open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void Open() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->open = true;
    }
    state_->cv.notify_all();
  }

  // A host function body that blocks until the gate opens.
  std::function<int()> Blocker() const {
    return [state = state_] {
      std::unique_lock<std::mutex> lock(state->mu);
      state->cv.wait(lock, [&] { return state->open; });
      return 0;
    };
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  std::shared_ptr<State> state_;
};

}  // namespace npu::runtime::testing

#endif  // NPU_RUNTIME_TESTS_RUNTIME_TEST_H_
