// TaskQueue.h - a stream's task queue: tasks stored inline in fixed-size slots of recycled chunks
// (no allocation per task once warm), appended under a short producer spinlock and consumed
// lock-free by the stream's single worker.
#ifndef NPU_RUNTIME_SRC_TASK_QUEUE_H_
#define NPU_RUNTIME_SRC_TASK_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>

namespace npu::runtime {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// A callable of at most kInlineBytes, stored in place. Returns non-zero (or throws) on failure.
// One cache line, aligned: the producer fills one slot while the worker runs the one before it, and
// slots sharing a line, or spanning two, would move more lines between the two cores per task.
class alignas(64) Task {
 public:
  static constexpr size_t kInlineBytes = 32;

  Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { Reset(); }

  template <typename F>
  void Emplace(F&& f) {
    using Fn = std::decay_t<F>;
    static_assert(sizeof(Fn) <= kInlineBytes && alignof(Fn) <= alignof(std::max_align_t),
                  "task callables are stored inline; capture less or a pointer");
    Reset();
    new (storage_) Fn(std::forward<F>(f));
    ops_ = &kOps<Fn>;
  }
  int Run() { return ops_->run(storage_); }
  // Releases the callable's captures (before the stream reports the task complete).
  void Reset() {
    if (ops_ != nullptr && ops_->destroy != nullptr) ops_->destroy(storage_);
    ops_ = nullptr;
  }

 private:
  // How to run and destroy the stored callable: one pointer per task instead of two.
  struct Ops {
    int (*run)(void*);
    void (*destroy)(void*);
  };
  template <typename Fn>
  static constexpr Ops kOps{
      [](void* p) { return static_cast<int>((*static_cast<Fn*>(p))()); },
      std::is_trivially_destructible_v<Fn> ? nullptr : +[](void* p) { static_cast<Fn*>(p)->~Fn(); }};

  alignas(std::max_align_t) unsigned char storage_[kInlineBytes];
  const Ops* ops_ = nullptr;

 public:
  // The op and its launch site (nrtLaunchHostFuncNamed), for the watchdog and injected faults.
  const char* name = nullptr;
  const char* site = nullptr;
  // Run after the stream counts it complete (event markers: a done event implies an idle stream).
  bool after_count = false;
  // With injected faults: which op= rules the task matched when it was launched (FaultInjection.h).
  uint32_t fault_matches = 0;
};
static_assert(sizeof(Task) == 64, "a task is one cache line");

// FIFO of Tasks. Append() from any thread; Front()/Pop() from the one consumer. Published() and
// Consumed() count tasks since creation and are readable from anywhere.
class TaskQueue {
 public:
  TaskQueue() { head_ = tail_ = NewChunk(); }
  ~TaskQueue() {
    while (head_ != nullptr) {
      Chunk* next = head_->next;
      delete head_;
      head_ = next;
    }
    while (spare_ != nullptr) {
      Chunk* next = spare_->next;
      delete spare_;
      spare_ = next;
    }
  }
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  class ProducerLock {
   public:
    explicit ProducerLock(TaskQueue& q) : q_(q) {
      for (int spins = 0; q_.producer_busy_.exchange(true, std::memory_order_acquire); ++spins) {
        if (spins < 64) CpuRelax(); else std::this_thread::yield();
      }
    }
    ~ProducerLock() { q_.producer_busy_.store(false, std::memory_order_release); }

   private:
    TaskQueue& q_;
  };

  // With the ProducerLock held: the slot the next task goes to; Publish() makes it visible.
  Task& Reserve() {
    if (tail_index_ == kChunkSlots) {
      Chunk* chunk = TakeSpare();
      tail_->next = chunk;
      tail_ = chunk;
      tail_index_ = 0;
    }
    return tail_->slots[tail_index_];
  }
  void Publish() {
    ++tail_index_;
    // Seq-cst: the worker's sleep check pairs with the producer's check of its sleeping flag.
    published_.store(published_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  }

  // Consumer side. Front() is valid when Consumed() < Published().
  Task& Front() {
    if (head_index_ == kChunkSlots) {
      Chunk* done = head_;
      head_ = head_->next;  // linked by the producer before it published this slot
      head_index_ = 0;
      Recycle(done);
    }
    return head_->slots[head_index_];
  }
  void Pop() {
    ++head_index_;
    consumed_.store(consumed_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  }

  uint64_t Published() const { return published_.load(std::memory_order_seq_cst); }
  uint64_t Consumed() const { return consumed_.load(std::memory_order_seq_cst); }

 private:
  static constexpr size_t kChunkSlots = 256;
  struct Chunk {
    Task slots[kChunkSlots];
    Chunk* next = nullptr;
  };
  static Chunk* NewChunk() { return new Chunk; }

  // Chunks go back and forth between consumer and producer through a one-entry exchange plus a
  // list both reach only under the spare lock (once per kChunkSlots tasks).
  Chunk* TakeSpare() {
    SpareLock lock(*this);
    Chunk* chunk = spare_;
    if (chunk != nullptr) {
      spare_ = chunk->next;
      chunk->next = nullptr;
      return chunk;
    }
    return NewChunk();
  }
  void Recycle(Chunk* chunk) {
    SpareLock lock(*this);
    chunk->next = spare_;
    spare_ = chunk;
  }
  class SpareLock {
   public:
    explicit SpareLock(TaskQueue& q) : q_(q) {
      while (q_.spare_busy_.exchange(true, std::memory_order_acquire)) CpuRelax();
    }
    ~SpareLock() { q_.spare_busy_.store(false, std::memory_order_release); }

   private:
    TaskQueue& q_;
  };

  // Producer side (under the producer lock).
  alignas(64) std::atomic<bool> producer_busy_{false};
  Chunk* tail_;
  size_t tail_index_ = 0;
  alignas(64) std::atomic<uint64_t> published_{0};
  // Consumer side.
  alignas(64) Chunk* head_;
  size_t head_index_ = 0;
  alignas(64) std::atomic<uint64_t> consumed_{0};
  // Recycled chunks.
  alignas(64) std::atomic<bool> spare_busy_{false};
  Chunk* spare_ = nullptr;
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_TASK_QUEUE_H_
