// CustomPackageTest.cpp - custom op packages from ASCEND_CUSTOM_OPP_PATH (its own executable: the
// registry reads the variable once per process). main() points the variable at two package
// directories around a missing one, then an install root in Ascend's vendors/ layout, and captures
// the warnings of the one-time load.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

std::string g_load_log;  // stderr while the registry loaded the packages
bool g_quiet = false;    // ASCEND_GLOBAL_LOG_LEVEL asked for errors only or nothing

// Runs fn with stderr redirected to a temporary file and returns what was written.
template <typename Fn>
std::string CaptureStderr(Fn&& fn) {
  std::fflush(stderr);
  FILE* capture = std::tmpfile();
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(capture), STDERR_FILENO);
  fn();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  std::rewind(capture);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), capture)) > 0) text.append(buffer, n);
  std::fclose(capture);
  return text;
}

using Prepare2 = aclnnStatus (*)(const aclTensor*, const aclTensor*, const aclScalar*, aclTensor*,
                                 uint64_t*, aclOpExecutor**);
using Prepare1 = aclnnStatus (*)(const aclTensor*, aclTensor*, uint64_t*, aclOpExecutor**);
using Launch = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, nrtStream_t);

// Both phases of a unary op through its registry entry; returns the launch status.
aclnnStatus RunUnaryEntry(const aclnnOpEntry* entry, const DeviceTensor& in, DeviceTensor& out) {
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus status =
      reinterpret_cast<Prepare1>(entry->get_workspace_size)(in.get(), out.get(), &ws, &executor);
  if (status != ACLNN_SUCCESS) return status;
  return reinterpret_cast<Launch>(entry->launch)(nullptr, ws, executor, nullptr);
}

using CustomPackageTest = OpsTest;

TEST_F(CustomPackageTest, CustomOpWinsOverTheBuiltin) {
  const aclnnOpEntry* add = aclnnFindOp("aclnnAdd");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->is_custom, 1);
  EXPECT_NE(add->get_workspace_size, reinterpret_cast<void*>(&aclnnAddGetWorkspaceSize));
  DeviceTensor a(ACL_FLOAT, {3}, {10, 20, 30});
  DeviceTensor b(ACL_FLOAT, {3}, {1, 2, 3});
  DeviceTensor out(ACL_FLOAT, {3});
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(reinterpret_cast<Prepare2>(add->get_workspace_size)(a.get(), b.get(), nullptr, out.get(), &ws, &executor));
  NOP_ASSERT_OK(reinterpret_cast<Launch>(add->launch)(nullptr, ws, executor, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(out.Read(), (std::vector<double>{9, 18, 27}));  // the package's "add" subtracts
  // The exported built-in is still there for direct callers.
  NOP_ASSERT_OK(RunOp([&](uint64_t* w, aclOpExecutor** ex) {
    return aclnnAddGetWorkspaceSize(a.get(), b.get(), nullptr, out.get(), w, ex);
  }));
  EXPECT_EQ(out.Read(), (std::vector<double>{11, 22, 33}));
}

TEST_F(CustomPackageTest, NewOpsFromEveryPackageEarlierDirectoriesFirst) {
  const aclnnOpEntry* my_op = aclnnFindOp("aclnnMyOp");
  ASSERT_NE(my_op, nullptr);
  EXPECT_EQ(my_op->is_custom, 1);
  DeviceTensor in(ACL_FLOAT, {3}, {0, 1, 2.5});
  DeviceTensor out(ACL_FLOAT, {3});
  NOP_ASSERT_OK(RunUnaryEntry(my_op, in, out));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(out.Read(), (std::vector<double>{1, 3, 6}));  // package A's, not B's negation

  const aclnnOpEntry* other = aclnnFindOp("aclnnOtherOp");  // only in package B
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->is_custom, 1);
  NOP_ASSERT_OK(RunUnaryEntry(other, in, out));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(out.Read(), (std::vector<double>{0, 1, 2.5}));
}

TEST_F(CustomPackageTest, PackagesSeeBuiltinsWhileRegistering) {
  const aclnnOpEntry* alias = aclnnFindOp("aclnnMulAlias");
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->is_custom, 1);
  EXPECT_EQ(alias->get_workspace_size, reinterpret_cast<void*>(&aclnnMulGetWorkspaceSize));
  EXPECT_EQ(alias->launch, reinterpret_cast<void*>(&aclnnMul));
}

TEST_F(CustomPackageTest, UntouchedBuiltinsAndTheListing) {
  const aclnnOpEntry* mul = aclnnFindOp("aclnnMul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->is_custom, 0);
  EXPECT_EQ(aclnnFindOp("aclnnBroken"), nullptr);  // registered with NULL functions
  // 27 built-ins (Add replaced) + MyOp, OtherOp, MulAlias, SymOp.
  EXPECT_EQ(aclnnOpCount(), 31);
  int custom = 0;
  for (int i = 0; i < aclnnOpCount(); ++i) custom += aclnnOpAt(i)->is_custom;
  EXPECT_EQ(custom, 5);
}

TEST_F(CustomPackageTest, CustomKernelFailureNamesTheOpAndLaunchTag) {
  const aclnnOpEntry* my_op = aclnnFindOp("aclnnMyOp");
  ASSERT_NE(my_op, nullptr);
  DeviceTensor in(ACL_FLOAT, {2}, {1, -1});
  DeviceTensor out(ACL_FLOAT, {2});
  aclnnSetLaunchTag("(launched from model.py:7)");
  NOP_ASSERT_OK(RunUnaryEntry(my_op, in, out));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()), "aclnnMyOp failed: kernel returned 3 (launched from model.py:7)");
}

TEST_F(CustomPackageTest, BrokenPackagesAreSkippedWithAWarning) {
  if (g_quiet) GTEST_SKIP() << "ASCEND_GLOBAL_LOG_LEVEL silences warnings";
  const std::string dir_a = NPU_OPSLIB_TEST_OPP_A;
  EXPECT_NE(g_load_log.find("[WARNING] NPU_OPSLIB("), std::string::npos) << g_load_log;
  EXPECT_NE(g_load_log.find("skipped custom op package " + dir_a + "/libbroken.so: "), std::string::npos)
      << g_load_log;
  EXPECT_NE(g_load_log.find("skipped custom op package " + dir_a +
                            "/libnosymbol.so: it exports neither npu_opslib_register_package nor any "
                            "aclnnXxxGetWorkspaceSize / aclnnXxx pair"),
            std::string::npos)
      << g_load_log;
  EXPECT_NE(g_load_log.find("skipped custom op path /nonexistent/opp/dir (ASCEND_CUSTOM_OPP_PATH): not a directory"),
            std::string::npos)
      << g_load_log;
  EXPECT_NE(g_load_log.find("registered op \"aclnnBroken\" with a NULL name or function pointer"),
            std::string::npos)
      << g_load_log;
  const std::string root = NPU_OPSLIB_TEST_OPP_ROOT;
  EXPECT_NE(g_load_log.find("custom op vendor \"gone\" listed in " + root + "/vendors/config.ini has no directory " +
                            root + "/vendors/gone; skipped"),
            std::string::npos)
      << g_load_log;
  EXPECT_NE(g_load_log.find("skipped custom op vendor " + root + "/vendors/v3: not listed in load_priority of " +
                            root + "/vendors/config.ini (add \"v3\" there to load it)"),
            std::string::npos)
      << g_load_log;
  EXPECT_NE(g_load_log.find("custom op package " + root + "/vendors/v2/op_api/lib/libcust_opapi.so exports "
                            "aclnnHalfOpGetWorkspaceSize but not aclnnHalfOp; op aclnnHalfOp is ignored"),
            std::string::npos)
      << g_load_log;
  // One line per problem, nothing else.
  EXPECT_EQ(std::count(g_load_log.begin(), g_load_log.end(), '\n'), 7) << g_load_log;
}

TEST_F(CustomPackageTest, OpApiLibrariesInVendorPriorityOrder) {
  const aclnnOpEntry* sym = aclnnFindOp("aclnnSymOp");
  ASSERT_NE(sym, nullptr) << aclnnGetRecentErrMsg();
  EXPECT_EQ(sym->is_custom, 1);
  DeviceTensor in(ACL_FLOAT, {3}, {1, 2, 3});
  DeviceTensor out(ACL_FLOAT, {3});
  NOP_ASSERT_OK(RunUnaryEntry(sym, in, out));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(out.Read(), (std::vector<double>{201, 202, 203}));  // v2's, first in load_priority
  EXPECT_EQ(aclnnFindOp("aclnnHalfOp"), nullptr);
}

TEST_F(CustomPackageTest, AMissingOpNamesTheSymbolsAndTheLibrariesSearched) {
  EXPECT_EQ(aclnnFindOp("aclnnNoSuchOp"), nullptr);
  const std::string message = aclnnGetRecentErrMsg();
  EXPECT_NE(message.find("aclnnNoSuchOp is not a built-in op and no custom op package provides it: looked for "
                         "the symbols aclnnNoSuchOpGetWorkspaceSize and aclnnNoSuchOp in the custom op packages "),
            std::string::npos)
      << message;
  for (const std::string& library :
       {std::string(NPU_OPSLIB_TEST_OPP_A) + "/libcustom_test_package.so",
        std::string(NPU_OPSLIB_TEST_OPP_ROOT) + "/vendors/v2/op_api/lib/libcust_opapi.so"}) {
    EXPECT_NE(message.find(library), std::string::npos) << message;
  }
  EXPECT_NE(message.find("(ASCEND_CUSTOM_OPP_PATH="), std::string::npos) << message;
}

// ctest runs this once more with ASCEND_GLOBAL_LOG_LEVEL=3.
TEST_F(CustomPackageTest, WarningsFollowTheLogLevel) {
  if (g_quiet) {
    EXPECT_EQ(g_load_log, "");
  } else {
    EXPECT_NE(g_load_log, "");
  }
  EXPECT_NE(aclnnFindOp("aclnnMyOp"), nullptr);  // the good packages load either way
}

}  // namespace
}  // namespace npu::opslib::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using npu::opslib::testing::g_load_log;
  const char* level = std::getenv("ASCEND_GLOBAL_LOG_LEVEL");
  npu::opslib::testing::g_quiet = level != nullptr && (std::string(level) == "3" || std::string(level) == "4");
  // An empty entry and a missing directory around the two package directories.
  const std::string paths = std::string(NPU_OPSLIB_TEST_OPP_A) + "::/nonexistent/opp/dir:" + NPU_OPSLIB_TEST_OPP_B +
                            ":" + NPU_OPSLIB_TEST_OPP_ROOT;
  setenv("ASCEND_CUSTOM_OPP_PATH", paths.c_str(), 1);
  g_load_log = npu::opslib::testing::CaptureStderr([] { aclnnOpCount(); });
  std::fputs(g_load_log.c_str(), stderr);  // still visible in the test output
  return RUN_ALL_TESTS();
}
