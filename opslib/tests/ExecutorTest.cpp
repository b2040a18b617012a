// ExecutorTest.cpp - executors on streams: stream order with other host functions, kernel failures
// reported at the next synchronisation with the op name and launch tag, custom executors
// (aclnnCreateExecutor), many threads launching large kernels at once, and the parallel loops op
// packages run (aclnnParallelFor).
#include <atomic>
#include <chrono>
#include <vector>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

using ExecutorTest = OpsTest;

// Launches any callable as a runtime host function; the task owns it.
nrtError_t LaunchCallable(nrtStream_t stream, std::function<int()> fn) {
  auto* owned = new std::function<int()>(std::move(fn));
  const nrtError_t error = nrtLaunchHostFunc(
      stream,
      [](void* data) {
        std::unique_ptr<std::function<int()>> fn(static_cast<std::function<int()>*>(data));
        return (*fn)();
      },
      owned);
  if (error != NRT_SUCCESS) delete owned;
  return error;
}

// Holds a stream until opened (at the latest when destroyed, so no worker stays blocked).
class Gate {
 public:
  ~Gate() { Open(); }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->open = true;
    }
    state_->cv.notify_all();
  }
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
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

TEST_F(ExecutorTest, RunsInStreamOrderWithOtherHostFunctions) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  DeviceTensor x(ACL_FLOAT, {4}, {1, 2, 3, 4});
  DeviceTensor out(ACL_FLOAT, {4});
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));
  // A host function queued before the op writes its input; one queued after reads its output.
  float* input = static_cast<float*>(x.data());
  NRT_ASSERT_OK(LaunchCallable(stream, [input] {
    for (int i = 0; i < 4; ++i) input[i] = 10.0f * (i + 1);
    return 0;
  }));
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(aclnnMulGetWorkspaceSize(x.get(), x.get(), out.get(), &ws, &executor));
  NOP_ASSERT_OK(aclnnMul(nullptr, ws, executor, stream));
  std::vector<float> seen(4, -1.0f);
  const float* result = static_cast<const float*>(out.data());
  NRT_ASSERT_OK(LaunchCallable(stream, [result, &seen] {
    std::copy(result, result + 4, seen.begin());
    return 0;
  }));
  const auto untouched = out.Read();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(out.Read(), untouched);  // the op waits behind the gate
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(seen, (std::vector<float>{100, 400, 900, 1600}));
  NRT_ASSERT_OK(nrtStreamDestroy(stream));
}

int FailingKernel(void* user_data, void*, uint64_t) { return *static_cast<int*>(user_data); }

TEST_F(ExecutorTest, KernelFailureSurfacesAtSynchronizeWithOpNameAndLaunchTag) {
  static int code = 7;
  aclOpExecutor* executor = aclnnCreateExecutor("aclnnMyKernel", &FailingKernel, &code, nullptr);
  ASSERT_NE(executor, nullptr);
  aclnnSetLaunchTag("(launched from train.py:42)");
  NOP_ASSERT_OK(aclnnLaunchExecutor(nullptr, 0, executor, nullptr));
  aclnnSetLaunchTag(nullptr);  // the tag was taken at launch
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()),
            "aclnnMyKernel failed: kernel returned 7 (launched from train.py:42)");
  // Reported once; the stream stays usable.
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  DeviceTensor x(ACL_INT32, {2}, {-1, 1});
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnAbsGetWorkspaceSize(x.get(), x.get(), ws, ex);
  }));
  EXPECT_EQ(x.Read(), (std::vector<double>{1, 1}));
}

TEST_F(ExecutorTest, StaticLaunchTagIsKeptByPointerAndReplacedByACopiedOne) {
  static int code = 3;
  static const char kSite[] = "(launched from model.py:7)";
  aclnnSetLaunchTagStatic(kSite);
  aclOpExecutor* first = aclnnCreateExecutor("aclnnFirst", &FailingKernel, &code, nullptr);
  NOP_ASSERT_OK(aclnnLaunchExecutor(nullptr, 0, first, nullptr));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()), "aclnnFirst failed: kernel returned 3 (launched from model.py:7)");
  // A copied tag replaces the static one, and clearing it leaves no tag.
  aclnnSetLaunchTag("(launched from other.py:1)");
  aclOpExecutor* second = aclnnCreateExecutor("aclnnSecond", &FailingKernel, &code, nullptr);
  NOP_ASSERT_OK(aclnnLaunchExecutor(nullptr, 0, second, nullptr));
  aclnnSetLaunchTagStatic(nullptr);
  aclOpExecutor* third = aclnnCreateExecutor("aclnnThird", &FailingKernel, &code, nullptr);
  NOP_ASSERT_OK(aclnnLaunchExecutor(nullptr, 0, third, nullptr));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()),
            "aclnnSecond failed: kernel returned 3 (launched from other.py:1) (and 1 more failed task)");
}

TEST_F(ExecutorTest, AThrowingKernelFailsWithItsMessageAndNoTag) {
  aclOpExecutor* executor = aclnnCreateExecutor(
      "aclnnThrower",
      [](void*, void*, uint64_t) -> int { throw std::runtime_error("input has NaN at [3]"); },
      nullptr, nullptr);
  NOP_ASSERT_OK(aclnnLaunchExecutor(nullptr, 0, executor, nullptr));
  EXPECT_EQ(nrtDeviceSynchronize(), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()), "aclnnThrower failed: input has NaN at [3]");
}

TEST_F(ExecutorTest, CustomExecutorGetsTheWorkspaceAndReleasesItsData) {
  struct Data {
    void* workspace = nullptr;
    uint64_t size = 0;
    int destroyed = 0;
  };
  Data data;
  const auto kernel = [](void* user, void* workspace, uint64_t size) {
    auto* d = static_cast<Data*>(user);
    d->workspace = workspace;
    d->size = size;
    return 0;
  };
  const auto destroy = [](void* user) { ++static_cast<Data*>(user)->destroyed; };
  void* workspace = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&workspace, 256));
  aclOpExecutor* executor = aclnnCreateExecutor("aclnnWs", kernel, &data, destroy);
  NOP_ASSERT_OK(aclnnLaunchExecutor(workspace, 256, executor, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(data.workspace, workspace);
  EXPECT_EQ(data.size, 256u);
  EXPECT_EQ(data.destroyed, 1);
  // Destroyed unlaunched: the user data goes too, once.
  executor = aclnnCreateExecutor("aclnnWs", kernel, &data, destroy);
  NOP_EXPECT_OK(aclDestroyAclOpExecutor(executor));
  EXPECT_EQ(data.destroyed, 2);
  EXPECT_EQ(aclnnCreateExecutor(nullptr, kernel, nullptr, nullptr), nullptr);
  EXPECT_EQ(aclnnCreateExecutor("x", nullptr, nullptr, nullptr), nullptr);
  NRT_EXPECT_OK(nrtFree(workspace));
}

TEST_F(ExecutorTest, ManyThreadsLaunchLargeKernelsConcurrently) {
  // Each thread owns a stream and runs large ops that all share the kernel thread pool.
  constexpr int kThreads = 4;
  constexpr int64_t kN = 300000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      nrtStream_t stream = nullptr;
      if (nrtStreamCreate(&stream) != NRT_SUCCESS) {
        ++failures;
        return;
      }
      DeviceTensor a(ACL_FLOAT, {kN}, std::vector<double>(kN, t + 1.0));
      DeviceTensor b(ACL_FLOAT, {kN / 2, 2}, {1, kN / 2}, 0, kN, std::vector<double>(kN, 2.0));
      DeviceTensor out(ACL_FLOAT, {kN / 2, 2});
      for (int round = 0; round < 5; ++round) {
        uint64_t ws = 0;
        aclOpExecutor* ex = nullptr;
        if (aclnnAddGetWorkspaceSize(a.get(), a.get(), nullptr, a.get(), &ws, &ex) != ACLNN_SUCCESS ||
            aclnnAdd(nullptr, 0, ex, stream) != ACLNN_SUCCESS) {
          ++failures;
        }
      }
      // a = (t + 1) * 32 now; out = a viewed as [kN/2, 2] times b.
      const int64_t dims[] = {kN / 2, 2};
      aclTensor* a2 = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, a.data());
      uint64_t ws = 0;
      aclOpExecutor* ex = nullptr;
      if (aclnnMulGetWorkspaceSize(a2, b.get(), out.get(), &ws, &ex) != ACLNN_SUCCESS ||
          aclnnMul(nullptr, 0, ex, stream) != ACLNN_SUCCESS) {
        ++failures;
      }
      aclDestroyTensor(a2);
      if (nrtStreamSynchronize(stream) != NRT_SUCCESS) ++failures;
      const auto values = out.Read();
      for (double v : values) {
        if (v != (t + 1) * 64.0) {
          ++failures;
          break;
        }
      }
      nrtStreamDestroy(stream);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ExecutorTest, PackageParallelLoopsCoverTheRangeOnceAndRethrow) {
  constexpr int64_t kN = 100000;
  std::vector<std::atomic<int>> seen(kN);
  auto mark = [](void* context, int64_t begin, int64_t end) {
    auto* counts = static_cast<std::vector<std::atomic<int>>*>(context);
    for (int64_t i = begin; i < end; ++i) (*counts)[i].fetch_add(1);
  };
  aclnnParallelFor(kN, 64, &seen, mark);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
  aclnnParallelFor(0, 1, &seen, mark);  // empty: nothing runs
  auto fail = [](void*, int64_t begin, int64_t end) {
    if (begin <= 5000 && 5000 < end) throw std::runtime_error("chunk failed");
  };
  EXPECT_THROW(aclnnParallelFor(kN, 64, nullptr, fail), std::runtime_error);
}

}  // namespace
}  // namespace npu::opslib::testing
