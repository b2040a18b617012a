// OpHeaders.h - a custom op package's parameter kinds and names, read from its op API headers.
#ifndef NPU_OPSLIB_SRC_OP_HEADERS_H_
#define NPU_OPSLIB_SRC_OP_HEADERS_H_

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace npu::opslib {

struct OpHeaderSignature {
  std::string kinds;  // as aclnnOpEntry::param_kinds
  std::string names;  // "x, y, out"
};

// The text of every *.h in `dir` (none if it does not exist).
std::vector<std::string> ReadOpHeaders(const std::filesystem::path& dir);
// The declaration of `<op>GetWorkspaceSize` in those headers, if one is there and parses.
std::optional<OpHeaderSignature> FindHeaderSignature(const std::vector<std::string>& headers,
                                                     const std::string& op);

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_OP_HEADERS_H_
