// GroupState.h - what a group's queued collectives share with it (and keep alive after it is
// destroyed): the transport, the progress board, the first failure, and the diagnosis of failures.
#pragma once

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "csrc/distributed/CollectiveCheck.h"
#include "csrc/distributed/GlooTransport.h"
#include "csrc/distributed/HCCLEnv.h"
#include "csrc/distributed/RankProgress.h"

namespace c10d_npu {

// The ranks disagree on a collective (different ops, dtypes, sizes or roots).
struct MismatchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class GroupState {
 public:
  GroupState(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::vector<int64_t> global_ranks,
             c10::intrusive_ptr<c10d::Backend> data_gloo, c10::intrusive_ptr<c10d::Backend> meta_gloo);

  GlooTransport& transport() { return transport_; }
  const HCCLEnv& env() const { return env_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int64_t globalRank(int group_rank) const;
  const std::vector<int64_t>& globalRanks() const { return global_ranks_; }

  // Waits for every rank's fingerprint of collective #seq and checks that they agree (throws
  // MismatchError). A rank kept waiting tells the others where it is, for their diagnosis.
  void agree(GlooTransport::Exchange& exchange, const Fingerprint& mine, uint64_t seq, const std::string& name);

  // The user-facing explanation of a failed collective #seq: timed out / lost a peer, which ranks
  // never arrived (and where they were last seen), and what to do.
  std::string explain(const std::exception& error, uint64_t seq, const std::string& name, const Deadline& deadline);

  // Records the group's first failure (later collectives raise it) and prints it when
  // HCCL_ASYNC_ERROR_HANDLING is on.
  void fail(const std::string& message);
  std::string failure() const;

 private:
  GlooTransport transport_;
  RankProgress progress_;
  const int rank_;
  const int size_;
  const std::vector<int64_t> global_ranks_;
  const HCCLEnv env_;
  mutable std::mutex mutex_;
  std::string failure_;
};

}  // namespace c10d_npu
