// Whether speculation pays at the current batch size, measured rather than assumed.
//
// A step that verifies drafts emits more tokens but costs more: the draft's own work
// (a draft model's forward passes) and the target's extra rows, which are cheap while
// decode is bound by reading the weights and dear once the batch makes it compute-bound.
// Where the balance falls depends on the machine, the models and the text, so the engine
// times it: for each batch-size class (running requests 1, 2-3, 4-7, 8-15, ...: one per
// power of two) a moving average of the tokens per second of decode steps with drafts
// and of decode steps without. A class drafts while its drafting rate is at least its
// plain rate, and otherwise not. Each class first samples both (kWarmup steps each,
// alternating), then keeps sampling the mode it is not using: every kExploreOff-th step
// without drafts while drafting wins (the plain rate moves little), every kExploreOn-th
// step with drafts while it loses (the text may turn predictable again), which bounds
// what speculation can cost under load to about one losing step in kExploreOn. A draft
// that runs a model is not probed once it loses: its first proposal after a pause
// recomputes the whole pause in the draft model, a cost that grows with the pause, so
// probing it at any interval costs a share of every step. Per-request acceptance
// (SpeculationPolicy) still picks each request's k.
//
// Thread safety: none; the engine's step thread owns it.
#pragma once

#include <array>
#include <cstdint>

namespace tsr {

class SpeculationGate {
 public:
  static constexpr int32_t kWarmup = 3;
  static constexpr int32_t kExploreOff = 64;
  static constexpr int32_t kExploreOn = 32;

  // `probes`: whether a class where drafting loses still drafts one step in kExploreOn.
  explicit SpeculationGate(bool probes) : probes_(probes) {}

  // Whether the next step drafts, with `running` requests in the batch.
  bool drafts(int32_t running);
  // A decode step (no prompt rows) ran: `drafted` whether it verified any draft, `tokens`
  // the tokens it emitted, `seconds` its time, with the drafting that fed it.
  void observe(int32_t running, bool drafted, int64_t tokens, double seconds);

  // The measured rate of a class (tests, logs): tokens per second, 0 before any sample.
  double rate(int32_t running, bool drafted) const;

 private:
  struct Mode {
    double rate = 0;      // moving average of tokens per second
    int32_t samples = 0;
  };
  struct Class {
    Mode on, off;
    int64_t decisions = 0;
  };
  static constexpr int kClasses = 12;  // running requests up to 2^12 and beyond
  static int class_of(int32_t running);

  bool probes_;
  std::array<Class, kClasses> classes_{};
};

}  // namespace tsr
