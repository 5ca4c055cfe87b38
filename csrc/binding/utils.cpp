#include "binding/utils.h"

namespace iognn::torch_ext {

void check_index_vector(const at::Tensor& t, const char* op, const char* name, int64_t size) {
  TORCH_CHECK_VALUE(t.dim() == 1, op, ": ", name, " must be 1-D, got shape ", t.sizes());
  TORCH_CHECK_TYPE(t.scalar_type() == at::kInt || t.scalar_type() == at::kLong, op, ": ", name,
                   " must be int32 or int64, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.is_contiguous(), op, ": ", name, " must be contiguous");
  if (size >= 0)
    TORCH_CHECK_VALUE(t.size(0) == size, op, ": ", name, " must have ", size,
                      " entries, got ", t.size(0));
}

void check_same_index_dtype(const at::Tensor& a, const at::Tensor& b, const char* op,
                            const char* name) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), op, ": ", name, " has dtype ",
                   b.scalar_type(), " but the graph's index dtype is ", a.scalar_type());
}

void check_device(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* name,
                  const char* ref_name) {
  TORCH_CHECK_VALUE(t.device() == ref.device(), op, ": ", name, " is on ", t.device(), " but ",
                    ref_name, " is on ", ref.device());
}

void check_edge_index(const at::Tensor& edge_index, const char* op) {
  TORCH_CHECK_VALUE(edge_index.dim() == 2 && edge_index.size(0) == 2, op,
                    ": edge_index must have shape [2, num_edges], got ", edge_index.sizes());
  TORCH_CHECK_TYPE(edge_index.scalar_type() == at::kInt || edge_index.scalar_type() == at::kLong,
                   op, ": edge_index must be int32 or int64, got ", edge_index.scalar_type());
}

void check_dim(const at::Tensor& t, int64_t dim, const char* op, const char* name) {
  TORCH_CHECK_VALUE(t.dim() == dim, op, ": ", name, " must be ", dim, "-D, got shape ", t.sizes());
}

void check_size(const at::Tensor& t, int64_t d, int64_t size, const char* op, const char* name,
                const char* what) {
  TORCH_CHECK_VALUE(t.size(d) == size, op, ": ", name, " has ", t.size(d), " ", what,
                    " (dimension ", d, ") but ", size, " are expected");
}

void check_dtype(const at::Tensor& t, at::ScalarType dtype, const char* op, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == dtype, op, ": ", name, " must have dtype ", dtype, ", got ",
                   t.scalar_type());
}

at::Tensor last_dim_contiguous(const at::Tensor& t) {
  if (t.dim() == 0 || t.stride(-1) == 1 || t.size(-1) <= 1) return t;
  return t.contiguous();
}

}  // namespace iognn::torch_ext
