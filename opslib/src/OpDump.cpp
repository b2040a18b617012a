// OpDump.cpp - dump sessions (aclnnDumpStart / aclnnDumpStop), the dump file format and its
// writer.
//
// File format (read by `python -m torch_npu.tools.dump_parse`): the 8 bytes "NPUDUMP1", a
// little-endian uint64 header length, a JSON header
//   {"op_type": "Add", "op_name": "Add_3", "launch": "aclnnAdd", "tag": "(launched from x.py:3)",
//    "device": 0, "stream_id": 0, "task_id": 7, "timestamp": 1700000000000000,
//    "tensors": [{"role": "input", "index": 0, "dtype": "float32", "shape": [2, 3],
//                 "format": "ND", "offset": 0, "nbytes": 24}, ...]}
// and then the tensors' bytes, contiguous and row-major, at `offset` from the end of the header.
// A tensor in a private format (NC1HWC0, FRACTAL_NZ...) is written as its logical values; its
// entry names the format and adds the padded "storage_shape" the device holds.
#include "OpDump.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include <unistd.h>

#include "DataTypes.h"
#include "Error.h"
#include "Executor.h"

namespace npu::opslib {
namespace {

std::atomic<bool> g_active{false};
std::mutex g_mu;
std::shared_ptr<DumpSession> g_session;  // the running session
std::shared_ptr<DumpSession> g_last;     // the running or last one, for aclnnDumpDirectory()

std::string OpType(const std::string& launch_name) {
  return launch_name.starts_with("aclnn") ? launch_name.substr(5) : launch_name;
}

// ACL's rule for file names: '.', '/', '\' and spaces become '_'.
std::string FileNamePart(std::string s) {
  for (char& c : s) {
    if (c == '.' || c == '/' || c == '\\' || c == ' ') c = '_';
  }
  return s;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

const char* NumpyName(aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT: return "float32";
    case ACL_FLOAT16: return "float16";
    case ACL_BF16: return "bfloat16";
    case ACL_DOUBLE: return "float64";
    case ACL_INT8: return "int8";
    case ACL_UINT8: return "uint8";
    case ACL_INT16: return "int16";
    case ACL_INT32: return "int32";
    case ACL_INT64: return "int64";
    case ACL_BOOL: return "bool";
    default: return "unknown";
  }
}

std::string SessionTime() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &local);
  return buf;
}

}  // namespace

DumpSession::DumpSession(std::string directory, aclnnDumpMode mode, std::vector<std::string> ops)
    : directory_(std::move(directory)), mode_(mode), ops_(std::move(ops)) {}

bool DumpSession::Wants(const std::string& op_name) const {
  if (ops_.empty()) return true;
  const std::string type = OpType(op_name);
  for (const std::string& op : ops_) {
    if (op == op_name || op == type) return true;
  }
  return false;
}

std::optional<std::string> DumpSession::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void DumpSession::Write(const aclOpExecutor& executor, const OperandRecord& record,
                        const std::vector<std::vector<char>>& inputs) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) return;
  }
  const uint64_t task_id = next_task_.fetch_add(1);
  const std::string type = OpType(executor.op_name);
  const auto timestamp = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::vector<std::vector<char>> outputs;
  if (wants_outputs()) {
    for (const OperandView& v : record.outputs) outputs.push_back(v.Gather());
  }
  // Header.
  std::ostringstream header;
  header << "{\"op_type\": " << JsonString(type) << ", \"op_name\": "
         << JsonString(type + "_" + std::to_string(task_id)) << ", \"launch\": "
         << JsonString(executor.op_name) << ", \"tag\": " << JsonString(executor.Tag())
         << ", \"device\": " << record.device << ", \"stream_id\": " << record.stream_id
         << ", \"task_id\": " << task_id << ", \"timestamp\": " << timestamp
         << ", \"tensors\": [";
  uint64_t offset = 0;
  bool first = true;
  const auto describe = [&](const char* role, const std::vector<OperandView>& views,
                            const std::vector<std::vector<char>>& data) {
    for (size_t i = 0; i < data.size() && i < views.size(); ++i) {
      header << (first ? "" : ", ") << "{\"role\": \"" << role << "\", \"index\": " << i
             << ", \"dtype\": \"" << NumpyName(views[i].dtype) << "\", \"shape\": "
             << ShapeString(views[i].sizes) << ", \"format\": \""
             << npu::formats::FormatName(views[i].format) << "\"";
      if (views[i].is_private()) {
        header << ", \"storage_shape\": " << ShapeString(views[i].storage_shape);
      }
      header << ", \"offset\": " << offset << ", \"nbytes\": " << data[i].size() << "}";
      offset += data[i].size();
      first = false;
    }
  };
  describe("input", record.inputs, inputs);
  describe("output", record.outputs, outputs);
  header << "]}";
  const std::string text = header.str();

  const std::filesystem::path dir = std::filesystem::path(directory_) /
                                    std::to_string(record.device) / "0" / "0";
  const std::string name = FileNamePart(type) + "." + FileNamePart(type + "_" + std::to_string(task_id)) +
                           "." + std::to_string(task_id) + "." + std::to_string(record.stream_id) +
                           "." + std::to_string(timestamp);
  const std::filesystem::path path = dir / name;
  const std::filesystem::path temp = dir / ("." + name + ".tmp" + std::to_string(getpid()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  bool ok = !ec;
  if (ok) {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    const uint64_t length = text.size();
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(length >> (8 * i));
    out.write("NPUDUMP1", 8);
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const std::vector<std::vector<char>>* group :
         std::initializer_list<const std::vector<std::vector<char>>*>{&inputs, &outputs}) {
      for (size_t i = 0; i < group->size(); ++i) {
        out.write((*group)[i].data(), static_cast<std::streamsize>((*group)[i].size()));
      }
    }
    out.close();
    ok = static_cast<bool>(out);
    if (ok) std::filesystem::rename(temp, path, ec);
    ok = ok && !ec;
    if (!ok) std::filesystem::remove(temp, ec);
  }
  if (!ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) {
      error_ = StrCat("cannot write dump file ", path.string(),
                      " (is the directory writable and is there space left on the device?)");
    }
    return;
  }
  files_.fetch_add(1);
  bytes_.fetch_add(16 + text.size() + offset);
}

bool DumpActive() { return g_active.load(std::memory_order_relaxed); }

std::shared_ptr<DumpSession> ActiveDumpSession(const std::string& op_name) {
  if (!DumpActive()) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  return g_session && g_session->Wants(op_name) ? g_session : nullptr;
}

}  // namespace npu::opslib

using npu::opslib::Fail;
using npu::opslib::StrCat;

extern "C" {

aclnnStatus aclnnDumpStart(const char* dumpPath, aclnnDumpMode mode, const char* const* opNames,
                           uint64_t opNameNum) {
  return npu::opslib::GuardApi("aclnnDumpStart", [&]() -> aclnnStatus {
    if (dumpPath == nullptr || *dumpPath == '\0') {
      return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnDumpStart: dumpPath is empty");
    }
    if (mode != ACLNN_DUMP_OUTPUT && mode != ACLNN_DUMP_INPUT && mode != ACLNN_DUMP_ALL) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, "aclnnDumpStart: dump mode ", static_cast<int>(mode),
                      " is not one of output (0), input (1), all (2)");
    }
    if (opNames == nullptr && opNameNum != 0) {
      return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnDumpStart: opNames is NULL with a non-zero count");
    }
    std::vector<std::string> ops;
    for (uint64_t i = 0; i < opNameNum; ++i) {
      if (opNames[i] != nullptr && *opNames[i] != '\0') ops.emplace_back(opNames[i]);
    }
    const std::filesystem::path dir = std::filesystem::path(dumpPath) / npu::opslib::SessionTime();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, "aclnnDumpStart: cannot create dump directory ",
                      dir.string(), ": ", ec.message(), "; set dump_path to a writable directory");
    }
    const std::filesystem::path probe = dir / (".probe" + std::to_string(getpid()));
    if (!std::ofstream(probe)) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, "aclnnDumpStart: dump directory ", dir.string(),
                      " is not writable; set dump_path to a writable directory");
    }
    std::filesystem::remove(probe, ec);
    auto session = std::make_shared<npu::opslib::DumpSession>(dir.string(), mode, std::move(ops));
    std::lock_guard<std::mutex> lock(npu::opslib::g_mu);
    npu::opslib::g_session = session;
    npu::opslib::g_last = session;
    npu::opslib::g_active.store(true);
    return ACLNN_SUCCESS;
  });
}

aclnnStatus aclnnDumpStop(void) {
  return npu::opslib::GuardApi("aclnnDumpStop", [&]() -> aclnnStatus {
    std::shared_ptr<npu::opslib::DumpSession> session;
    {
      std::lock_guard<std::mutex> lock(npu::opslib::g_mu);
      session = std::move(npu::opslib::g_session);
      npu::opslib::g_session.reset();
      npu::opslib::g_active.store(false);
    }
    if (session) {
      if (auto error = session->error()) return Fail(ACLNN_ERR_INNER, "aclnnDumpStop: " + *error);
    }
    return ACLNN_SUCCESS;
  });
}

const char* aclnnDumpDirectory(void) {
  std::lock_guard<std::mutex> lock(npu::opslib::g_mu);
  static thread_local std::string dir;
  dir = npu::opslib::g_last ? npu::opslib::g_last->directory() : std::string();
  return dir.c_str();
}

uint64_t aclnnDumpFileCount(void) {
  std::lock_guard<std::mutex> lock(npu::opslib::g_mu);
  return npu::opslib::g_last ? npu::opslib::g_last->files() : 0;
}

}  // extern "C"
