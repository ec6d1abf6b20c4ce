// "What if": replay a recorded history under a different memory policy and predict its peak.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec {

struct CheckpointPrediction {
  uint8_t device = 0;
  uint64_t recorded_peak = 0;     // allocated peak of the history as recorded
  uint64_t predicted_peak = 0;    // allocated peak with the chosen layers checkpointed
  int64_t predicted_peak_ns = 0;  // since the first event
  std::vector<std::string> layers;  // the layers checkpointed, named as `stats --by layer` names them ("layers.3")
  uint64_t blocks_dropped = 0;      // activation blocks freed early (all steps)
  uint64_t saving = 0;            // recorded_peak - predicted_peak, or 0 when the predicted peak is higher
  double saving_percent = 0;      // (recorded_peak - predicted_peak) in percent of recorded_peak, so may be < 0
};

// Predicts activation checkpointing of `layers` (empty = every layer with activations in its module scopes; each
// given as find_layer() reads it): each layer's forward activations, except its output,
// are freed when the layer's forward ends and allocated again when its backward starts, that is at the
// first free of one of them. Throws Error when the history has no module scopes, or a layer is unknown or given twice.
CheckpointPrediction predict_checkpoint(const Snapshot& s, uint8_t device, const std::vector<std::string>& layers);

// predict_checkpoint() for many choices of layers (the report asks for every layer and then each alone): the
// recording is replayed and its layers' forward passes found once. Throws as predict_checkpoint() does: when made,
// for a history without module scopes; in predict(), for an unknown layer.
class CheckpointPredictor {
 public:
  CheckpointPredictor(const Snapshot& s, uint8_t device);
  ~CheckpointPredictor();
  CheckpointPrediction predict(const std::vector<std::string>& layers) const;
  // The layers with activations in their forward passes (what an empty choice checkpoints), in natural order.
  const std::vector<std::string>& layers() const;
  // Each forward pass of a layer: when it began and ended (its recompute, were it checkpointed).
  struct Forward {
    std::string layer;
    int64_t start_ns = 0, end_ns = 0;
  };
  std::vector<Forward> forwards() const;
  // The predicted history itself (the device's events, start state and owner rows), for replays that predict more
  // than the allocated peak: the allocator model's reserved peak under checkpointing. Throws as predict() does.
  Snapshot history(const std::vector<std::string>& layers) const;

 private:
  struct Recorded;
  std::unique_ptr<Recorded> recorded_;
};

}  // namespace memrec
