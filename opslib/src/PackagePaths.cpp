// PackagePaths.cpp - custom op package discovery from ASCEND_CUSTOM_OPP_PATH, including Ascend's
// vendors/<name>/op_api/lib layout and the load priority of vendors/config.ini.
#include "PackagePaths.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>

#include "Error.h"

namespace npu::opslib {
namespace {

namespace fs = std::filesystem;

bool IsDirectory(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

std::string_view Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// lib*.so files of one directory, in name order so that the load order is reproducible.
std::vector<fs::path> LibrariesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(dir, error)) {
    const std::string name = item.path().filename().string();
    if (name.size() > 6 && name.starts_with("lib") && name.ends_with(".so") &&
        !item.is_directory(error)) {
      files.push_back(item.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The vendor names of config.ini's `load_priority=a,b,c` line; nullopt if it has none.
std::optional<std::vector<std::string>> LoadPriority(const fs::path& config) {
  std::ifstream in(config);
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view text = Trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';' || text[0] == '[') continue;
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || Trim(text.substr(0, eq)) != "load_priority") continue;
    std::vector<std::string> vendors;
    std::string_view rest = text.substr(eq + 1);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view vendor = Trim(rest.substr(0, comma));
      if (!vendor.empty()) vendors.emplace_back(vendor);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    return vendors;
  }
  return std::nullopt;
}

// vendors/<name> directories of an install root, in load order.
std::vector<fs::path> VendorDirectories(const fs::path& vendors_dir) {
  std::vector<fs::path> present;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(vendors_dir, error)) {
    if (item.is_directory(error)) present.push_back(item.path());
  }
  std::sort(present.begin(), present.end());
  const fs::path config = vendors_dir / "config.ini";
  if (!fs::exists(config, error)) return present;
  const auto priority = LoadPriority(config);
  if (!priority) {
    NOP_LOG_WARNING(config.string(), " has no load_priority line; loading its vendors in name order");
    return present;
  }
  std::vector<fs::path> ordered;
  for (const std::string& vendor : *priority) {
    const fs::path dir = vendors_dir / vendor;
    if (!IsDirectory(dir)) {
      NOP_LOG_WARNING("custom op vendor \"", vendor, "\" listed in ", config.string(),
                      " has no directory ", dir.string(), "; skipped");
      continue;
    }
    if (std::find(ordered.begin(), ordered.end(), dir) == ordered.end()) ordered.push_back(dir);
  }
  for (const fs::path& dir : present) {
    if (std::find(ordered.begin(), ordered.end(), dir) == ordered.end()) {
      NOP_LOG_WARNING("skipped custom op vendor ", dir.string(), ": not listed in load_priority of ",
                      config.string(), " (add \"", dir.filename().string(), "\" there to load it)");
    }
  }
  return ordered;
}

void AddLibraries(const fs::path& dir, PackageSearch* search) {
  search->directories.push_back(dir.string());
  for (auto& file : LibrariesIn(dir)) search->libraries.push_back(std::move(file));
}

// One vendor directory: its own libraries (a plain package directory) and op_api/lib.
void AddPackageDirectory(const fs::path& dir, PackageSearch* search) {
  AddLibraries(dir, search);
  const fs::path api_dir = dir / "op_api" / "lib";
  if (IsDirectory(api_dir)) AddLibraries(api_dir, search);
}

}  // namespace

PackageSearch FindPackageLibraries() {
  PackageSearch search;
  const char* env = std::getenv("ASCEND_CUSTOM_OPP_PATH");
  if (env == nullptr) return search;
  const std::string_view paths = env;
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string_view::npos) end = paths.size();
    const fs::path dir(std::string(paths.substr(start, end - start)));
    start = end + 1;
    if (dir.empty()) continue;
    if (!IsDirectory(dir)) {
      NOP_LOG_WARNING("skipped custom op path ", dir.string(), " (ASCEND_CUSTOM_OPP_PATH): not a directory");
      continue;
    }
    AddPackageDirectory(dir, &search);
    const fs::path vendors = dir / "vendors";
    if (IsDirectory(vendors)) {
      for (const fs::path& vendor : VendorDirectories(vendors)) AddPackageDirectory(vendor, &search);
    }
  }
  return search;
}

}  // namespace npu::opslib
