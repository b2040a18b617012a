// PackagePaths.h - where custom op packages are: the directories of ASCEND_CUSTOM_OPP_PATH, their
// op_api/lib, and their vendors/<name>/op_api/lib in the order of vendors/config.ini.
#ifndef NPU_OPSLIB_SRC_PACKAGE_PATHS_H_
#define NPU_OPSLIB_SRC_PACKAGE_PATHS_H_

#include <filesystem>
#include <string>
#include <vector>

namespace npu::opslib {

struct PackageSearch {
  std::vector<std::filesystem::path> libraries;  // lib*.so files, highest priority first
  std::vector<std::string> directories;          // every directory looked in, for error messages
};

// Reads ASCEND_CUSTOM_OPP_PATH (':'-separated, earlier entries first). Each entry may be
//   - a directory of packages: its lib*.so files (in name order);
//   - a vendor directory of Ascend's layout: op_api/lib/lib*.so (libcust_opapi.so);
//   - an install root: vendors/<name>/op_api/lib/lib*.so for each vendor, in the order of the
//     load_priority line of vendors/config.ini (all vendors in name order without that file).
// Entries that are not directories, and vendors that config.ini does not list or lists without a
// directory, are reported as warnings and skipped.
PackageSearch FindPackageLibraries();

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_PACKAGE_PATHS_H_
