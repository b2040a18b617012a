// RegistryTest.cpp - the registry without custom packages: every built-in is found by name with
// its own entry points, unknown names are NULL, the listing is sorted and complete.
#include <set>
#include <string>

#include "OpsTestUtil.h"
#include "npu/op_signature.h"

namespace npu::opslib::testing {
namespace {

// This binary tests the built-ins alone: keep a custom path from the caller's environment out,
// before the first lookup reads it.
const bool kNoCustomPackages = [] { return unsetenv("ASCEND_CUSTOM_OPP_PATH") == 0; }();

struct Builtin {
  const char* name;
  void* get_workspace_size;
  void* launch;
};

#define NOP_BUILTIN(Name) \
  Builtin { "aclnn" #Name, reinterpret_cast<void*>(&aclnn##Name##GetWorkspaceSize), reinterpret_cast<void*>(&aclnn##Name) }

const Builtin kBuiltins[] = {
    NOP_BUILTIN(Add),  NOP_BUILTIN(Sub),     NOP_BUILTIN(Mul),  NOP_BUILTIN(Div),
    NOP_BUILTIN(Relu), NOP_BUILTIN(Neg),     NOP_BUILTIN(Abs),  NOP_BUILTIN(Exp),
    NOP_BUILTIN(Sqrt), NOP_BUILTIN(Sigmoid), NOP_BUILTIN(Tanh), NOP_BUILTIN(Cast),
    NOP_BUILTIN(Adds), NOP_BUILTIN(Subs),    NOP_BUILTIN(Muls), NOP_BUILTIN(Divs),
    NOP_BUILTIN(LayerNorm),
    NOP_BUILTIN(ForeachAddListV2),       NOP_BUILTIN(ForeachAddScalarV2),
    NOP_BUILTIN(ForeachMulScalarV2),     NOP_BUILTIN(ForeachDivScalarList),
    NOP_BUILTIN(ForeachSqrt),            NOP_BUILTIN(ForeachLerpScalar),
    NOP_BUILTIN(ForeachAddcmulScalarV2), NOP_BUILTIN(ForeachAddcdivScalarList),
    NOP_BUILTIN(TransData),              NOP_BUILTIN(InplaceCopy),
};

using RegistryTest = OpsTest;

TEST_F(RegistryTest, BuiltinsAreFoundByName) {
  ASSERT_TRUE(kNoCustomPackages);
  for (const Builtin& builtin : kBuiltins) {
    const aclnnOpEntry* entry = aclnnFindOp(builtin.name);
    ASSERT_NE(entry, nullptr) << builtin.name;
    EXPECT_STREQ(entry->name, builtin.name);
    EXPECT_EQ(entry->get_workspace_size, builtin.get_workspace_size) << builtin.name;
    EXPECT_EQ(entry->launch, builtin.launch) << builtin.name;
    EXPECT_EQ(entry->is_custom, 0);
    EXPECT_EQ(aclnnFindOp(builtin.name), entry);  // stable
  }
}

TEST_F(RegistryTest, EveryBuiltinKnowsItsParameters) {
  for (int i = 0; i < aclnnOpCount(); ++i) {
    const aclnnOpEntry* entry = aclnnOpAt(i);
    if (entry->is_custom) continue;
    ASSERT_NE(entry->param_kinds, nullptr) << entry->name;
    ASSERT_NE(entry->param_names, nullptr) << entry->name;
    EXPECT_EQ(npu::opslib::CountNames(entry->param_names), std::string(entry->param_kinds).size()) << entry->name;
    EXPECT_EQ(std::string(entry->param_kinds).find('?'), std::string::npos) << entry->name;
  }
  const aclnnOpEntry* add = aclnnFindOp("aclnnAdd");
  ASSERT_NE(add, nullptr);
  EXPECT_STREQ(add->param_kinds, "TTST");
  EXPECT_STREQ(add->param_names, "self, other, alpha, out");
  EXPECT_STREQ(aclnnFindOp("aclnnMuls")->param_kinds, "TST");
}

TEST_F(RegistryTest, KindsFollowTheCTypes) {
  using npu::opslib::KindOf;
  static_assert(KindOf<const aclTensor*>() == 'T' && KindOf<aclScalar*>() == 'S');
  static_assert(KindOf<const aclIntArray*>() == 'I' && KindOf<const aclTensorList*>() == 'L');
  static_assert(KindOf<int64_t>() == 'l' && KindOf<int>() == 'i' && KindOf<bool>() == 'b');
  static_assert(KindOf<double>() == 'd' && KindOf<float>() == 'f' && KindOf<const char*>() == 's');
  static_assert(KindOf<aclDataType>() == 'i' && KindOf<int8_t>() == 'c');
  static_assert(npu::opslib::KindAccepts('l', 'i') && npu::opslib::KindAccepts('b', 'l'));
  static_assert(!npu::opslib::KindAccepts('S', 'l') && !npu::opslib::KindAccepts('d', 'l'));
  static_assert(!npu::opslib::KindAccepts('f', 'd') && !npu::opslib::KindAccepts('T', 'S'));
  static_assert(npu::opslib::CountNames("self, other,alpha , out") == 4 && npu::opslib::CountNames("") == 0);
}

TEST_F(RegistryTest, BuiltinRegistrationIsRefusedOnceTheRegistryIsAssembled) {
  ASSERT_NE(aclnnFindOp("aclnnAdd"), nullptr);  // the first lookup assembles the registry
  void* gws = reinterpret_cast<void*>(&aclnnAddGetWorkspaceSize);
  void* launch = reinterpret_cast<void*>(&aclnnAdd);
  EXPECT_EQ(aclnnRegisterBuiltinOp("aclnnLateOp", gws, launch, nullptr, nullptr), ACLNN_ERR_INNER);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("after the op registry was assembled"),
            std::string::npos)
      << aclnnGetRecentErrMsg();
  EXPECT_EQ(aclnnFindOp("aclnnLateOp"), nullptr);
  EXPECT_EQ(aclnnRegisterBuiltinOp(nullptr, gws, launch, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclnnRegisterBuiltinOp("aclnnX", nullptr, launch, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
}

TEST_F(RegistryTest, SetRecentErrMsgIsWhatPackagesReportWith) {
  EXPECT_EQ(aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_INVALID, "aclnnMine: bad dim 7"),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_STREQ(aclnnGetRecentErrMsg(), "aclnnMine: bad dim 7");
}

TEST_F(RegistryTest, UnknownNamesAreNull) {
  EXPECT_EQ(aclnnFindOp("aclnnNoSuchOp"), nullptr);
  EXPECT_EQ(aclnnFindOp("add"), nullptr);
  EXPECT_EQ(aclnnFindOp(""), nullptr);
  EXPECT_EQ(aclnnFindOp(nullptr), nullptr);
}

TEST_F(RegistryTest, ListingIsSortedAndComplete) {
  ASSERT_EQ(aclnnOpCount(), static_cast<int>(std::size(kBuiltins)));
  std::set<std::string> expected;
  for (const Builtin& builtin : kBuiltins) expected.insert(builtin.name);
  std::set<std::string> listed;
  std::string previous;
  for (int i = 0; i < aclnnOpCount(); ++i) {
    const aclnnOpEntry* entry = aclnnOpAt(i);
    ASSERT_NE(entry, nullptr);
    EXPECT_LT(previous, entry->name);
    previous = entry->name;
    listed.insert(entry->name);
    EXPECT_EQ(aclnnFindOp(entry->name), entry);
  }
  EXPECT_EQ(listed, expected);
  EXPECT_EQ(aclnnOpAt(-1), nullptr);
  EXPECT_EQ(aclnnOpAt(aclnnOpCount()), nullptr);
}

TEST_F(RegistryTest, CallingThroughTheEntryRunsTheOp) {
  // What an adapter does: look the op up once, call both phases through the pointers.
  const aclnnOpEntry* entry = aclnnFindOp("aclnnSub");
  ASSERT_NE(entry, nullptr);
  using Prepare = aclnnStatus (*)(const aclTensor*, const aclTensor*, const aclScalar*, aclTensor*,
                                  uint64_t*, aclOpExecutor**);
  using Launch = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, nrtStream_t);
  DeviceTensor a(ACL_INT64, {3}, {10, 20, 30});
  DeviceTensor b(ACL_INT64, {3}, {1, 2, 3});
  int64_t two = 2;
  aclScalar* alpha = aclCreateScalar(&two, ACL_INT64);
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(reinterpret_cast<Prepare>(entry->get_workspace_size)(a.get(), b.get(), alpha, a.get(), &ws, &executor));
  NOP_ASSERT_OK(reinterpret_cast<Launch>(entry->launch)(nullptr, ws, executor, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(a.Read(), (std::vector<double>{8, 16, 24}));
  aclDestroyScalar(alpha);
}

}  // namespace
}  // namespace npu::opslib::testing
