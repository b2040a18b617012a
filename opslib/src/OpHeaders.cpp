// OpHeaders.cpp - reads aclnnXxxGetWorkspaceSize declarations from a package's op_api/include.
#include "OpHeaders.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <system_error>

namespace npu::opslib {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool HasWord(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool start = at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_');
    const size_t end = at + word.size();
    const bool stop = end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_');
    if (start && stop) return true;
  }
  return false;
}

// The kind letter (npu/op_signature.h) of a C parameter type such as "const aclTensor *".
char KindOfCType(const std::string& type) {
  const bool pointer = type.find('*') != std::string::npos;
  if (pointer) {
    if (HasWord(type, "aclTensorList")) return 'L';
    if (HasWord(type, "aclTensor")) return 'T';
    if (HasWord(type, "aclScalarList")) return 'A';
    if (HasWord(type, "aclScalar")) return 'S';
    if (HasWord(type, "aclIntArray")) return 'I';
    if (HasWord(type, "char") && type.find('*') == type.rfind('*')) return 's';
    return 'p';
  }
  if (HasWord(type, "bool")) return 'b';
  if (HasWord(type, "int8_t")) return 'c';
  if (HasWord(type, "uint8_t")) return 'C';
  if (HasWord(type, "int16_t")) return 'h';
  if (HasWord(type, "uint16_t")) return 'H';
  if (HasWord(type, "int32_t") || HasWord(type, "aclDataType") || HasWord(type, "aclFormat")) return 'i';
  if (HasWord(type, "uint32_t")) return 'u';
  if (HasWord(type, "int64_t")) return 'l';
  if (HasWord(type, "uint64_t") || HasWord(type, "size_t")) return 'm';
  if (HasWord(type, "float")) return 'f';
  if (HasWord(type, "double")) return 'd';
  if (HasWord(type, "int")) return 'i';
  return '?';
}

}  // namespace

std::vector<std::string> ReadOpHeaders(const std::filesystem::path& dir) {
  std::vector<std::string> texts;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return texts;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    if (file.path().extension() != ".h") continue;
    std::ifstream in(file.path());
    std::stringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  return texts;
}

std::optional<OpHeaderSignature> FindHeaderSignature(const std::vector<std::string>& headers,
                                                     const std::string& op) {
  const std::string function = op + "GetWorkspaceSize";
  for (const std::string& text : headers) {
    size_t at = text.find(function);
    while (at != std::string::npos && at + function.size() < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[at + function.size()])) || text[at + function.size()] == '_')) {
      at = text.find(function, at + 1);
    }
    if (at == std::string::npos) continue;
    const size_t open = text.find('(', at + function.size());
    const size_t close = text.find(')', open);
    if (open == std::string::npos || close == std::string::npos) continue;
    std::vector<std::string> params;
    std::stringstream list(text.substr(open + 1, close - open - 1));
    for (std::string param; std::getline(list, param, ',');) params.push_back(Trim(param));
    if (params.size() < 2) return std::nullopt;
    params.resize(params.size() - 2);  // workspaceSize, executor
    OpHeaderSignature signature;
    for (const std::string& param : params) {
      size_t end = param.size();
      while (end > 0 && (std::isalnum(static_cast<unsigned char>(param[end - 1])) || param[end - 1] == '_')) --end;
      const std::string name = param.substr(end);
      const std::string type = param.substr(0, end);
      if (name.empty() || Trim(type).empty()) return std::nullopt;  // unnamed parameters: no signature
      signature.kinds += KindOfCType(type);
      signature.names += (signature.names.empty() ? "" : ", ") + name;
    }
    return signature;
  }
  return std::nullopt;
}

}  // namespace npu::opslib
