// ElfSymbols.h - the functions a shared library exports, read from its ELF dynamic symbol table,
// so that the registry can list the aclnnXxx ops of an Ascend-style op API library (libcust_opapi.so).
#ifndef NPU_OPSLIB_SRC_ELF_SYMBOLS_H_
#define NPU_OPSLIB_SRC_ELF_SYMBOLS_H_

#include <optional>
#include <string>
#include <vector>

namespace npu::opslib {

// Names of the global / weak functions that `path` defines (not the ones it imports), in table
// order. std::nullopt with `*error` set when the file is not a 64-bit ELF shared library this
// reader understands.
std::optional<std::vector<std::string>> ExportedFunctions(const std::string& path, std::string* error);

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_ELF_SYMBOLS_H_
