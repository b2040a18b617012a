// ErrorLogTest.cpp - error names, the thread-local recent message, and log level / destination.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

using ErrorLogTest = RuntimeTest;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Provokes one debug line (malloc/free), one info line (stream creation), one error line.
void DoLoggedWork() {
  void* ptr = nullptr;
  EXPECT_EQ(nrtMalloc(&ptr, 128), NRT_SUCCESS);
  EXPECT_EQ(nrtFree(ptr), NRT_SUCCESS);
  nrtStream_t stream = nullptr;
  EXPECT_EQ(nrtStreamCreate(&stream), NRT_SUCCESS);
  EXPECT_EQ(nrtStreamDestroy(stream), NRT_SUCCESS);
  EXPECT_EQ(nrtSetDevice(99), NRT_ERROR_INVALID_DEVICE);
}

TEST_F(ErrorLogTest, ErrorNames) {
  EXPECT_STREQ(nrtGetErrorName(NRT_SUCCESS), "NRT_SUCCESS");
  EXPECT_STREQ(nrtGetErrorName(NRT_ERROR_OUT_OF_MEMORY), "NRT_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(nrtGetErrorName(NRT_ERROR_INVALID_MEMCPY_KIND), "NRT_ERROR_INVALID_MEMCPY_KIND");
  EXPECT_STREQ(nrtGetErrorName(NRT_ERROR_TASK_FAILED), "NRT_ERROR_TASK_FAILED");
  EXPECT_STREQ(nrtGetErrorName(NRT_ERROR_EVENT_NOT_RECORDED), "NRT_ERROR_EVENT_NOT_RECORDED");
  EXPECT_STREQ(nrtGetErrorName(static_cast<nrtError_t>(99)), "NRT_ERROR_UNKNOWN");
}

TEST_F(ErrorLogTest, RecentMessageIsPerThreadAndKeptUntilTheNextFailure) {
  std::string other_thread_message = "unset";
  std::thread other([&] {
    other_thread_message = nrtGetRecentErrMsg();
    EXPECT_EQ(nrtSetDevice(42), NRT_ERROR_INVALID_DEVICE);
  });
  other.join();
  EXPECT_EQ(other_thread_message, "");
  EXPECT_FALSE(Contains(nrtGetRecentErrMsg(), "npu:42")) << "another thread's failure";

  EXPECT_EQ(nrtFree(reinterpret_cast<void*>(0x10)), NRT_ERROR_INVALID_POINTER);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_TRUE(Contains(message, "0x10")) << message;
  int32_t count = 0;
  NRT_EXPECT_OK(nrtGetDeviceCount(&count));
  EXPECT_EQ(message, nrtGetRecentErrMsg()) << "a successful call keeps the message";
}

TEST_F(ErrorLogTest, LogsEveryLevelToStdoutAtLevelZero) {
  SetEnv("ASCEND_SLOG_PRINT_TO_STDOUT", "1");
  SetEnv("ASCEND_GLOBAL_LOG_LEVEL", "0");
  ::testing::internal::CaptureStdout();
  DoLoggedWork();
  nrtFinalize();
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::regex debug_line(R"(\[DEBUG\] NPU_RT\()" + std::to_string(getpid()) +
                              R"(\) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} )" +
                              R"(DeviceMemory\.cpp:\d+ npu:0 allocated 128 bytes)");
  EXPECT_TRUE(std::regex_search(out, debug_line)) << out;
  EXPECT_TRUE(Contains(out, "[INFO]")) << out;
  EXPECT_TRUE(Contains(out, "[ERROR]")) << out;
  EXPECT_TRUE(Contains(out, "NRT_ERROR_INVALID_DEVICE: npu:99 does not exist")) << out;
}

TEST_F(ErrorLogTest, DefaultLevelShowsOnlyErrors) {
  SetEnv("ASCEND_SLOG_PRINT_TO_STDOUT", "1");
  ::testing::internal::CaptureStdout();
  DoLoggedWork();
  nrtFinalize();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Contains(out, "[ERROR]")) << out;
  EXPECT_FALSE(Contains(out, "[DEBUG]")) << out;
  EXPECT_FALSE(Contains(out, "[INFO]")) << out;
}

TEST_F(ErrorLogTest, WithoutADestinationNothingIsWrittenButErrorsRemainAvailable) {
  SetEnv("ASCEND_GLOBAL_LOG_LEVEL", "0");
  ::testing::internal::CaptureStdout();
  DoLoggedWork();
  nrtFinalize();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_TRUE(Contains(nrtGetRecentErrMsg(), "npu:99 does not exist")) << nrtGetRecentErrMsg();
}

TEST_F(ErrorLogTest, LogsToAPerProcessFileUnderProcessLogPath) {
  std::string dir_template = (std::filesystem::temp_directory_path() / "nrt-log-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir_template.data()), nullptr);
  const std::filesystem::path dir = dir_template;
  SetEnv("ASCEND_PROCESS_LOG_PATH", (dir / "nested").c_str());
  SetEnv("ASCEND_GLOBAL_LOG_LEVEL", "1");
  DoLoggedWork();
  NRT_ASSERT_OK(nrtFinalize());

  std::ifstream file(dir / "nested" / ("npu-runtime-" + std::to_string(getpid()) + ".log"));
  ASSERT_TRUE(file.good());
  std::stringstream content;
  content << file.rdbuf();
  const std::string log = content.str();
  EXPECT_TRUE(Contains(log, "[INFO] NPU_RT(")) << log;
  EXPECT_TRUE(Contains(log, "created npu:0 stream #")) << log;
  EXPECT_TRUE(Contains(log, "[ERROR]")) << log;
  EXPECT_FALSE(Contains(log, "[DEBUG]")) << log;
  std::filesystem::remove_all(dir);
}

TEST_F(ErrorLogTest, InvalidConfigurationIsAWarning) {
  SetEnv("ASCEND_SLOG_PRINT_TO_STDOUT", "1");
  SetEnv("ASCEND_GLOBAL_LOG_LEVEL", "2");
  SetEnv("NPU_SIM_MEMORY", "plenty");
  ::testing::internal::CaptureStdout();
  NRT_EXPECT_OK(nrtInit());
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(Contains(out, "[WARNING]")) << out;
  EXPECT_TRUE(Contains(out, "NPU_SIM_MEMORY=\"plenty\"")) << out;
}

}  // namespace
}  // namespace npu::runtime::testing
