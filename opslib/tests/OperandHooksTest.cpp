// OperandHooksTest.cpp - what ops do while the operand hooks watch: the overflow rule (inf/nan out
// of finite inputs raises the device's float status) and the data dump's files.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class OperandHooksTest : public OpsTest {
 protected:
  void SetUp() override {
    OpsTest::SetUp();
    detection_before_ = nrtOverflowDetectionEnabled();
    ASSERT_EQ(nrtSetOverflowDetection(1), NRT_SUCCESS);
  }
  void TearDown() override {
    nrtSetOverflowDetection(detection_before_);
    OpsTest::TearDown();
  }

  static float Status() {
    void* status = nullptr;
    float word = -1;
    EXPECT_EQ(nrtMalloc(&status, 32), NRT_SUCCESS);
    EXPECT_EQ(nrtGetOverflowStatus(status, 32, nullptr), NRT_SUCCESS);
    EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_SUCCESS);
    EXPECT_EQ(nrtMemcpy(&word, status, sizeof word, NRT_MEMCPY_DEVICE_TO_HOST), NRT_SUCCESS);
    nrtFree(status);
    return word;
  }
  static void Reset() {
    EXPECT_EQ(nrtResetOverflowStatus(nullptr), NRT_SUCCESS);
  }

  static aclnnStatus Add(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& out) {
    return RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
      return aclnnAddGetWorkspaceSize(a.get(), b.get(), nullptr, out.get(), ws, ex);
    });
  }

 private:
  int detection_before_ = 0;
};

TEST_F(OperandHooksTest, Float16OverflowRaisesTheStatus) {
  EXPECT_EQ(Status(), 0.0f);
  DeviceTensor a(ACL_FLOAT16, {4}, {40000, 1, 2, 3});
  DeviceTensor out(ACL_FLOAT16, {4});
  NOP_ASSERT_OK(Add(a, a, out));  // 80000 does not fit in float16
  EXPECT_TRUE(std::isinf(out.Read()[0]));
  EXPECT_EQ(Status(), 1.0f);
  Reset();
  EXPECT_EQ(Status(), 0.0f);
}

TEST_F(OperandHooksTest, FiniteResultsLeaveTheStatusAlone) {
  for (aclDataType dtype : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE}) {
    DeviceTensor a(dtype, {2, 3}, {1, 2, 3, 4, 5, 6});
    DeviceTensor out(dtype, {2, 3});
    NOP_ASSERT_OK(Add(a, a, out));
  }
  EXPECT_EQ(Status(), 0.0f);
}

TEST_F(OperandHooksTest, NonFiniteInputsAreNotAnOverflow) {
  DeviceTensor a(ACL_FLOAT, {3}, {kInf, 1, 2});
  DeviceTensor out(ACL_FLOAT, {3});
  NOP_ASSERT_OK(Add(a, a, out));
  EXPECT_EQ(Status(), 0.0f);
}

TEST_F(OperandHooksTest, EachFloatingTypeOverflows) {
  struct Case { aclDataType dtype; double big; };
  for (const Case c : {Case{ACL_FLOAT, 3e38}, Case{ACL_BF16, 3e38}, Case{ACL_DOUBLE, 1.7e308}}) {
    DeviceTensor a(c.dtype, {2}, {c.big, 1});
    DeviceTensor out(c.dtype, {2});
    NOP_ASSERT_OK(Add(a, a, out));
    EXPECT_EQ(Status(), 1.0f) << DataTypeName(c.dtype);
    Reset();
  }
  // exp overflows to inf, sqrt(-1) is nan: both from finite inputs.
  DeviceTensor x(ACL_FLOAT, {2}, {100, 1});
  DeviceTensor y(ACL_FLOAT, {2});
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnExpGetWorkspaceSize(x.get(), y.get(), ws, ex);
  }));
  EXPECT_EQ(Status(), 1.0f);
  Reset();
  DeviceTensor n(ACL_FLOAT, {2}, {-1, 4});
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnSqrtGetWorkspaceSize(n.get(), y.get(), ws, ex);
  }));
  EXPECT_EQ(Status(), 1.0f);
}

TEST_F(OperandHooksTest, InPlaceOpJudgesTheInputBeforeTheKernel) {
  // out aliases self: self's inf is gone after the kernel only if it was judged before.
  DeviceTensor a(ACL_FLOAT, {2}, {kInf, 1});
  DeviceTensor b(ACL_FLOAT, {2}, {1, 1});
  aclTensor* alias = a.Alias();
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnAddGetWorkspaceSize(a.get(), b.get(), nullptr, alias, ws, ex);
  }));
  aclDestroyTensor(alias);
  EXPECT_EQ(Status(), 0.0f);
}

TEST_F(OperandHooksTest, InfiniteScalarIsNotAnOverflow) {
  DeviceTensor a(ACL_FLOAT, {2}, {1, 2});
  DeviceTensor b(ACL_FLOAT, {2}, {1, 2});
  DeviceTensor out(ACL_FLOAT, {2});
  double inf = kInf;
  aclScalar* alpha = aclCreateScalar(&inf, ACL_DOUBLE);
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnAddGetWorkspaceSize(a.get(), b.get(), alpha, out.get(), ws, ex);
  }));
  aclDestroyScalar(alpha);
  EXPECT_TRUE(std::isinf(out.Read()[0]));
  EXPECT_EQ(Status(), 0.0f);
}

TEST_F(OperandHooksTest, DetectionOffChecksNothing) {
  ASSERT_EQ(nrtSetOverflowDetection(0), NRT_SUCCESS);
  DeviceTensor a(ACL_FLOAT16, {1}, {40000});
  DeviceTensor out(ACL_FLOAT16, {1});
  NOP_ASSERT_OK(Add(a, a, out));
  EXPECT_EQ(Status(), 0.0f);
}

// The files of one dump session, by name.
std::vector<std::filesystem::path> DumpFiles(const std::string& session) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(session)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(OperandHooksTest, DumpWritesOneFilePerOpWithItsTensors) {
  ASSERT_EQ(nrtSetOverflowDetection(0), NRT_SUCCESS);
  const auto root = std::filesystem::temp_directory_path() / ("opdump-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  const char* only[] = {"Add"};
  NOP_ASSERT_OK(aclnnDumpStart(root.c_str(), ACLNN_DUMP_ALL, only, 1));
  EXPECT_TRUE(aclnnOperandHooksActive());
  DeviceTensor a(ACL_FLOAT, {2, 2}, {1, 2, 3, 4});
  DeviceTensor out(ACL_FLOAT, {2, 2});
  aclnnSetLaunchTag("(launched from model.py:7)");
  NOP_ASSERT_OK(Add(a, a, out));
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {  // not in the op list
    return aclnnNegGetWorkspaceSize(a.get(), out.get(), ws, ex);
  }));
  NOP_ASSERT_OK(aclnnDumpStop());
  EXPECT_FALSE(aclnnOperandHooksActive());
  EXPECT_EQ(aclnnDumpFileCount(), 1u);
  const std::string session = aclnnDumpDirectory();
  ASSERT_EQ(session.rfind(root.string(), 0), 0u) << session;
  const auto files = DumpFiles(session);
  ASSERT_EQ(files.size(), 1u);
  // {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp} in {session}/{device}/0/0
  EXPECT_EQ(files[0].parent_path(), std::filesystem::path(session) / "0" / "0" / "0");
  EXPECT_EQ(files[0].filename().string().rfind("Add.Add_0.0.0.", 0), 0u) << files[0];
  const std::string bytes = ReadAll(files[0]);
  ASSERT_EQ(bytes.substr(0, 8), "NPUDUMP1");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) {
    length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  }
  const std::string header = bytes.substr(16, length);
  EXPECT_NE(header.find("\"tag\": \"(launched from model.py:7)\""), std::string::npos) << header;
  EXPECT_NE(header.find("{\"role\": \"input\", \"index\": 1, \"dtype\": \"float32\", \"shape\": [2, 2]"),
            std::string::npos) << header;
  // Two inputs and the output, 16 bytes each: the output holds 2, 4, 6, 8.
  ASSERT_EQ(bytes.size(), 16 + length + 48);
  float result[4];
  std::memcpy(result, bytes.data() + 16 + length + 32, sizeof result);
  EXPECT_EQ(result[0], 2.0f);
  EXPECT_EQ(result[3], 8.0f);
  std::filesystem::remove_all(root);
}

TEST_F(OperandHooksTest, DumpStartRejectsAnUnusablePath) {
  ASSERT_EQ(nrtSetOverflowDetection(0), NRT_SUCCESS);
  const auto file = std::filesystem::temp_directory_path() / ("opdump-file-" + std::to_string(getpid()));
  std::ofstream(file) << "x";
  const std::string below_a_file = (file / "dump").string();
  EXPECT_EQ(aclnnDumpStart(below_a_file.c_str(), ACLNN_DUMP_OUTPUT, nullptr, 0), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("cannot create dump directory"), std::string::npos)
      << aclnnGetRecentErrMsg();
  EXPECT_EQ(aclnnDumpStart(below_a_file.c_str(), static_cast<aclnnDumpMode>(7), nullptr, 0),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(aclnnDumpStart(below_a_file.c_str(), static_cast<aclnnDumpMode>(-1), nullptr, 0),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_FALSE(aclnnOperandHooksActive());
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace npu::opslib::testing
