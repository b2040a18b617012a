// OpRegistry.cpp - the op registry: built-in ops from static registrars, custom op packages loaded
// with dlopen from ASCEND_CUSTOM_OPP_PATH (read once, at the first lookup; PackagePaths.cpp), lookup
// and listing.
#include "OpRegistry.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "ElfSymbols.h"
#include "OpHeaders.h"
#include "Error.h"
#include "PackagePaths.h"

namespace npu::opslib {
namespace {

// An entry and the strings it points to, heap-allocated so that the C view stays put.
struct OwnedEntry {
  std::string name;
  std::optional<std::string> param_kinds;
  std::optional<std::string> param_names;
  aclnnOpEntry entry{};
};

std::unique_ptr<OwnedEntry> MakeEntry(const char* name, void* get_workspace_size, void* launch, bool is_custom,
                                      const char* param_kinds = nullptr, const char* param_names = nullptr) {
  auto owned = std::make_unique<OwnedEntry>();
  owned->name = name;
  if (param_kinds != nullptr) owned->param_kinds = param_kinds;
  if (param_names != nullptr) owned->param_names = param_names;
  owned->entry = {owned->name.c_str(), get_workspace_size, launch, is_custom ? 1 : 0,
                  owned->param_kinds ? owned->param_kinds->c_str() : nullptr,
                  owned->param_names ? owned->param_names->c_str() : nullptr};
  return owned;
}

using EntryList = std::vector<std::unique_ptr<OwnedEntry>>;

// Filled by static registrars during library load. Leaked like everything the registry hands out:
// entries must stay valid for callers running at process exit.
EntryList& Builtins() {
  static auto* builtins = new EntryList;
  return *builtins;
}

struct Registry {
  EntryList entries;  // one per name, sorted by name
  std::unordered_map<std::string_view, const aclnnOpEntry*> by_name;
  std::vector<std::string> libraries;    // custom package libraries looked at, in load order
  std::vector<std::string> directories;  // directories searched for them
};

// Set while this thread loads custom packages: a package's registration function that looks ops up
// (e.g. to wrap a built-in) sees the built-ins instead of waiting for the registry it is part of.
thread_local bool t_loading_packages = false;
// Where npu_opslib_register_package's callbacks go, and which package is registering.
thread_local EntryList* t_package_entries = nullptr;
thread_local const std::string* t_package_path = nullptr;

void RegisterCustomOp(const char* name, void* get_workspace_size, void* launch) {
  if (t_package_entries == nullptr) return;  // called outside npu_opslib_register_package
  if (name == nullptr || name[0] == '\0' || get_workspace_size == nullptr || launch == nullptr) {
    NOP_LOG_WARNING("custom op package ", *t_package_path, " registered op \"",
                    name == nullptr ? "(null)" : name,
                    "\" with a NULL name or function pointer; that op is ignored");
    return;
  }
  t_package_entries->push_back(MakeEntry(name, get_workspace_size, launch, true));
}

// Registers the aclnnXxxGetWorkspaceSize / aclnnXxx pairs an op API library exports (Ascend's
// libcust_opapi.so layout). False if it exports none.
bool RegisterExportedOps(void* handle, const std::string& where, EntryList* entries) {
  std::string error;
  const auto functions = ExportedFunctions(where, &error);
  if (!functions) {
    NOP_LOG_WARNING("skipped custom op package ", where, ": its symbol table cannot be read (", error, ")");
    return false;
  }
  constexpr std::string_view kSuffix = "GetWorkspaceSize";
  // Ascend's layout installs the ops' headers beside the library: op_api/include next to op_api/lib.
  const std::vector<std::string> headers = ReadOpHeaders(std::filesystem::path(where).parent_path().parent_path() /
                                                         "include");
  bool any = false;
  for (const std::string& prepare : *functions) {
    if (!prepare.starts_with("aclnn") || !prepare.ends_with(kSuffix) || prepare.size() == 5 + kSuffix.size()) {
      continue;
    }
    const std::string name = prepare.substr(0, prepare.size() - kSuffix.size());
    void* get_workspace_size = dlsym(handle, prepare.c_str());
    void* launch = std::find(functions->begin(), functions->end(), name) == functions->end()
                       ? nullptr
                       : dlsym(handle, name.c_str());
    any = true;
    if (get_workspace_size == nullptr || launch == nullptr) {
      NOP_LOG_WARNING("custom op package ", where, " exports ", prepare, " but not ", name,
                      "; op ", name, " is ignored");
      continue;
    }
    const std::optional<OpHeaderSignature> signature = FindHeaderSignature(headers, name);
    entries->push_back(MakeEntry(name.c_str(), get_workspace_size, launch, true,
                                 signature ? signature->kinds.c_str() : nullptr,
                                 signature ? signature->names.c_str() : nullptr));
  }
  return any;
}

// Loads one package and appends its ops to `custom` (an op already there, from an earlier
// package, keeps priority). A package either exports npu_opslib_register_package or the op API
// functions themselves. Any failure skips the whole package with a warning.
void LoadPackage(const std::filesystem::path& path, EntryList* custom) {
  const std::string where = path.string();
  void* handle = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    NOP_LOG_WARNING("skipped custom op package ", where, ": ", reason ? reason : "dlopen failed");
    return;
  }
  EntryList entries;
  using RegisterPackageFn = void (*)(aclnnRegisterOpFn);
  auto* register_package =
      reinterpret_cast<RegisterPackageFn>(dlsym(handle, "npu_opslib_register_package"));
  if (register_package == nullptr) {
    if (!RegisterExportedOps(handle, where, &entries)) {
      NOP_LOG_WARNING("skipped custom op package ", where,
                      ": it exports neither npu_opslib_register_package nor any "
                      "aclnnXxxGetWorkspaceSize / aclnnXxx pair");
      dlclose(handle);
      return;
    }
  } else {
    t_package_entries = &entries;
    t_package_path = &where;
    bool ok = true;
    try {
      register_package(&RegisterCustomOp);
    } catch (const std::exception& e) {
      NOP_LOG_WARNING("skipped custom op package ", where, ": npu_opslib_register_package threw: ",
                      e.what());
      ok = false;
    } catch (...) {
      NOP_LOG_WARNING("skipped custom op package ", where, ": npu_opslib_register_package threw");
      ok = false;
    }
    t_package_entries = nullptr;
    t_package_path = nullptr;
    if (!ok) return;  // the library stays loaded: its code may have run, unloading is not safe
  }
  // Never dlclose a loaded package: its functions are used for the rest of the process.
  for (auto& entry : entries) {
    const bool taken = std::any_of(custom->begin(), custom->end(),
                                   [&](const auto& other) { return other->name == entry->name; });
    if (!taken) custom->push_back(std::move(entry));
  }
}

// Set once the registry is assembled; built-in registrations after that point are refused.
std::atomic<bool> g_registry_built{false};

Registry* BuildRegistry() {
  g_registry_built = true;
  t_loading_packages = true;
  auto* registry = new Registry;
  EntryList custom;
  try {
    PackageSearch search = FindPackageLibraries();
    for (const auto& file : search.libraries) {
      LoadPackage(file, &custom);
      registry->libraries.push_back(file.string());
    }
    registry->directories = std::move(search.directories);
  } catch (const std::exception& e) {
    NOP_LOG_WARNING("custom op packages not loaded: ", e.what());
  }
  t_loading_packages = false;

  for (auto& entry : custom) registry->entries.push_back(std::move(entry));
  for (const auto& builtin : Builtins()) {
    const bool overridden =
        std::any_of(registry->entries.begin(), registry->entries.end(),
                    [&](const auto& entry) { return entry->name == builtin->name; });
    if (!overridden) {
      registry->entries.push_back(MakeEntry(builtin->name.c_str(), builtin->entry.get_workspace_size,
                                            builtin->entry.launch, false, builtin->entry.param_kinds,
                                            builtin->entry.param_names));
    }
  }
  std::sort(registry->entries.begin(), registry->entries.end(),
            [](const auto& a, const auto& b) { return a->name < b->name; });
  for (const auto& entry : registry->entries) registry->by_name[entry->name] = &entry->entry;
  return registry;
}

// Assembled once, on first use, and leaked: entries handed out stay valid until process exit.
const Registry* GetRegistry() {
  static const Registry* registry = BuildRegistry();
  return registry;
}

// "aclnnFoo is not ...: looked for ... in <libraries> (ASCEND_CUSTOM_OPP_PATH=...)".
aclnnStatus FailNotFound(const Registry& registry, const char* name) {
  std::string where;
  const char* env = std::getenv("ASCEND_CUSTOM_OPP_PATH");
  if (env == nullptr) {
    where = "no custom op package: ASCEND_CUSTOM_OPP_PATH is not set";
  } else if (registry.libraries.empty()) {
    where = "no custom op package: there is no lib*.so in ";
    for (size_t i = 0; i < registry.directories.size(); ++i) {
      where += (i ? ", " : "") + registry.directories[i];
    }
    if (registry.directories.empty()) where += "any directory";
    where += StrCat(" (ASCEND_CUSTOM_OPP_PATH=", env, ")");
  } else {
    where = "the custom op packages ";
    for (size_t i = 0; i < registry.libraries.size(); ++i) {
      where += (i ? ", " : "") + registry.libraries[i];
    }
    where += StrCat(" (ASCEND_CUSTOM_OPP_PATH=", env, ")");
  }
  return NOP_FAIL(ACLNN_ERR_INNER_NOT_FOUND, name, " is not a built-in op and no custom op package ",
                  "provides it: looked for the symbols ", name, "GetWorkspaceSize and ", name, " in ",
                  where);
}

const aclnnOpEntry* FindBuiltin(const char* name) {
  for (const auto& builtin : Builtins()) {
    if (builtin->name == name) return &builtin->entry;
  }
  return nullptr;
}

}  // namespace

OpRegistrar::OpRegistrar(const char* name, void* get_workspace_size, void* launch, const char* param_kinds,
                         const char* param_names) {
  Builtins().push_back(MakeEntry(name, get_workspace_size, launch, false, param_kinds, param_names));
}

}  // namespace npu::opslib

extern "C" {

const aclnnOpEntry* aclnnFindOp(const char* name) {
  if (name == nullptr) return nullptr;
  try {
    if (npu::opslib::t_loading_packages) return npu::opslib::FindBuiltin(name);
    const auto* registry = npu::opslib::GetRegistry();
    const auto found = registry->by_name.find(name);
    if (found != registry->by_name.end()) return found->second;
    npu::opslib::FailNotFound(*registry, name);
    return nullptr;
  } catch (...) {
    return nullptr;  // only out of host memory while building the registry
  }
}

aclnnStatus aclnnRegisterBuiltinOp(const char* name, void* get_workspace_size, void* launch,
                                   const char* param_kinds, const char* param_names) {
  if (name == nullptr || name[0] == '\0' || get_workspace_size == nullptr || launch == nullptr) {
    return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR,
                    "aclnnRegisterBuiltinOp: NULL or empty name, or NULL function pointer");
  }
  if (npu::opslib::g_registry_built) {
    return NOP_FAIL(ACLNN_ERR_INNER, "aclnnRegisterBuiltinOp: op \"", name,
                    "\" registered after the op registry was assembled (first lookup); built-in ",
                    "packages must register while they load");
  }
  try {
    npu::opslib::OpRegistrar(name, get_workspace_size, launch, param_kinds, param_names);
  } catch (const std::exception& e) {
    return NOP_FAIL(ACLNN_ERR_INNER, "aclnnRegisterBuiltinOp: ", e.what());
  }
  return ACLNN_SUCCESS;
}

int aclnnOpCount(void) {
  try {
    if (npu::opslib::t_loading_packages) return static_cast<int>(npu::opslib::Builtins().size());
    return static_cast<int>(npu::opslib::GetRegistry()->entries.size());
  } catch (...) {
    return 0;
  }
}

const aclnnOpEntry* aclnnOpAt(int index) {
  try {
    if (npu::opslib::t_loading_packages) {
      const auto& builtins = npu::opslib::Builtins();
      if (index < 0 || index >= static_cast<int>(builtins.size())) return nullptr;
      return &builtins[index]->entry;
    }
    const auto& entries = npu::opslib::GetRegistry()->entries;
    if (index < 0 || index >= static_cast<int>(entries.size())) return nullptr;
    return &entries[index]->entry;
  } catch (...) {
    return nullptr;
  }
}

}  // extern "C"
