#pragma once
#include <string>
#include <string_view>

#include "memrec/snapshot.h"

namespace memrec {

// The model's own path of a module, parameter or optimizer state as a recording named it, with the parts that
// wrappers add left out: torch.compile's `_orig_mod`, FSDP's `_fsdp_wrapped_module`, checkpoint wrappers'
// `_checkpoint_wrapped_module` anywhere; inductor's and Dynamo's `WrapperModule` and `L['self']` in front; and in
// front, DDP's, DataParallel's and FSDP's `module` when the model runs under one of them (`data_parallel`: a
// user's own submodule called `module` keeps its name otherwise).
// "module.blocks.0._checkpoint_wrapped_module.fc1.weight" -> "blocks.0.fc1.weight" (data_parallel).
std::string model_path(std::string_view name, bool data_parallel);

// Whether module scope `id` is a module Dynamo runs rather than one of the model's: DDPOptimizer's split graph
// (`GraphModule`), each of its compiled pieces (`compiled_submod_N` as the recorder names them, or `submod_N`, in a
// `GraphModule`; `WrapperModule`, PyTorch's class). Compiled code run inside one belongs to the module around it.
bool is_graph_piece(const Snapshot& s, uint32_t id);

// Renames the module scopes and owners of a recording to the model's own paths (model_path), so that older files,
// whose recorder kept the wrappers' parts, name each module once as newer ones do. A wrapper at the root keeps its
// class name (the name of the whole model there); a module left with no path takes its root's name; a piece of a
// compiled graph (is_graph_piece) takes the name of the module it runs in. Renaming a renamed
// recording changes nothing.
void name_modules_by_model_path(Snapshot& s);

// Gives the blocks PyTorch allocates for itself an owner that says what they are, by PyTorch's function in the
// block's stack: DDP's gradient buckets ("ddp bucket", c10d::Reducer::initialize_buckets) and cuBLAS's workspaces
// ("cublas workspace", made by the first matmul and kept: not the activation of the layer that ran it) from C++
// frames; FSDP2's and FSDP's all-gather outputs and unsharded parameters ("fsdp all-gather") and FSDP2's
// reduce-scatter buffers ("fsdp reduce-scatter") from Python frames. The owner is its own module too, so that `--by
// layer` and `--by module` show it under that name, not under the module that ran PyTorch's code. Reading a file
// twice adds nothing.
void own_framework_blocks(Snapshot& s);

}  // namespace memrec
