// Caller-provided device workspaces (host side): the CUDA graph build and the attention kernels
// take one buffer of scratch and carve it into slices, each aligned to kWorkspaceAlign bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace iognn {

constexpr size_t kWorkspaceAlign = 256;  // alignment of the workspace and of every slice

inline size_t workspace_align_up(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Hands out consecutive aligned slices of a workspace; with a null base it only measures.
class WorkspaceSlicer {
 public:
  explicit WorkspaceSlicer(void* base) : base_(static_cast<char*>(base)) {}
  // count elements of X, or null for count <= 0 (an empty slice takes no room).
  template <typename X>
  X* take(int64_t count) {
    if (count <= 0) return nullptr;
    const size_t offset = used_;
    used_ += workspace_align_up(size_t(count) * sizeof(X));
    return base_ ? reinterpret_cast<X*>(base_ + offset) : nullptr;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// The checks of a workspace of `have` bytes for a call `fn` that needs `need` bytes.
inline void check_workspace(const char* fn, const void* workspace, size_t have, size_t need) {
  IOGNN_CHECK(need == 0 || workspace != nullptr, ValueError, fn, ": the workspace is null");
  IOGNN_CHECK(reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign == 0, ValueError, fn,
              ": the workspace must be ", kWorkspaceAlign, "-byte aligned");
  IOGNN_CHECK(have >= need, ValueError, fn, ": the workspace has ", have, " bytes, ", need,
              " are needed");
}

}  // namespace iognn
