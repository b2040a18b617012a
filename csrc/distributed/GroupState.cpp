// GroupState.cpp - fingerprint agreement and failure diagnosis for one group.
#include "csrc/distributed/GroupState.h"

#include <cstdio>
#include <sstream>

#include <c10/util/Exception.h>

namespace c10d_npu {
namespace {

bool contains(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string errorText(const std::exception& e) {
  if (auto* c10e = dynamic_cast<const c10::Error*>(&e)) return c10e->what_without_backtrace();
  return e.what();
}

}  // namespace

GroupState::GroupState(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::vector<int64_t> global_ranks, c10::intrusive_ptr<c10d::Backend> data_gloo,
                       c10::intrusive_ptr<c10d::Backend> meta_gloo)
    : transport_(std::move(data_gloo), std::move(meta_gloo)),
      progress_(store, rank, size),
      rank_(rank),
      size_(size),
      global_ranks_(std::move(global_ranks)),
      env_(readHCCLEnv()) {}

int64_t GroupState::globalRank(int group_rank) const {
  return global_ranks_.empty() ? group_rank : global_ranks_.at(group_rank);
}

void GroupState::agree(GlooTransport::Exchange& exchange, const Fingerprint& mine, uint64_t seq,
                       const std::string& name) {
  // Peers that arrive within this time never cost a store round trip.
  constexpr std::chrono::milliseconds kSlow(100);
  auto records = transport_.finishExchange(exchange, kSlow, [&] { progress_.publish(seq, name); });
  std::vector<Fingerprint> all;
  for (const auto& record : records) all.push_back(Fingerprint::decode(record.data(), size_));
  all[rank_] = mine;
  std::vector<int64_t> names;
  for (int r = 0; r < size_; ++r) names.push_back(globalRank(r));
  std::string mismatch = compareFingerprints(all, names);
  if (!mismatch.empty()) throw MismatchError(mismatch);
}

std::string GroupState::explain(const std::exception& error, uint64_t seq, const std::string& name,
                                const Deadline& deadline) {
  std::string cause = errorText(error);
  if (dynamic_cast<const MismatchError*>(&error)) return cause;
  bool timed_out = contains(cause, "Timed out") || contains(cause, "timed out") || deadline.passed();
  bool lost = contains(cause, "Connection closed") || contains(cause, "Connection reset") ||
              contains(cause, "Broken pipe") || contains(cause, "pair closure") || contains(cause, "Read error") ||
              contains(cause, "Write error");
  std::ostringstream out;
  if (timed_out) {
    out << "timed out after " << static_cast<double>(deadline.total.count()) / 1000.0 << " s";
  } else if (lost) {
    out << "lost the connection to a peer (its process exited or crashed)";
  } else {
    out << firstLine(cause);
  }
  // The ranks still in the collective publish too; give them a moment to do so.
  progress_.publish(seq, name);
  auto grace = std::clamp(deadline.total / 5, std::chrono::milliseconds(200), std::chrono::milliseconds(1000));
  std::string store_error;
  auto missing = progress_.missing(seq, grace, &store_error);
  if (!store_error.empty()) {
    out << "; could not ask the other ranks where they are (the rendezvous store is unreachable: its host, "
           "usually rank 0, may have exited)";
  } else if (missing.empty()) {
    out << "; every rank reached it";
  } else {
    out << "; ranks that did not arrive: ";
    for (size_t i = 0; i < missing.size(); ++i) out << (i ? ", " : "") << globalRank(missing[i].rank);
    out << " (";
    for (size_t i = 0; i < missing.size(); ++i) {
      const std::string& last = missing[i].last;
      out << (i ? "; " : "") << "rank " << globalRank(missing[i].rank);
      if (last.empty()) {
        out << " was not seen waiting in any collective of this group";
      } else {
        auto space = last.find(' ');
        out << " was last seen waiting in #" << last.substr(0, space) << " "
            << (space == std::string::npos ? "" : last.substr(space + 1));
      }
    }
    out << ")";
  }
  if (timed_out) {
    out << ". Every rank of a group must call the same collectives in the same order; if some ranks are only "
           "slow, pass a larger timeout= to init_process_group / new_group";
  }
  if (!timed_out) out << " [transport: " << firstLine(cause) << "]";
  return out.str();
}

void GroupState::fail(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) return;
    failure_ = message;
  }
  if (env_.async_error_handling) {
    std::fprintf(stderr, "[rank %lld] %s\n", static_cast<long long>(globalRank(rank_)), message.c_str());
    std::fflush(stderr);
  }
}

std::string GroupState::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

}  // namespace c10d_npu
