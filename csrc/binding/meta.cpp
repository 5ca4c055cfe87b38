// The Meta kernels of the propagate, segment-reduce and attention ops: what FakeTensorMode and
// torch.compile run to learn the outputs (sizes possibly symbolic, no data). Each family's op
// bodies (<family>_ops.h) under MetaBackend (binding/utils.h): the outputs, allocated by the shape
// functions that size the real outputs, without the checks or the kernels. Graph construction
// (build_graph) has its fake in Python: its edge count depends on the data
// (iognn/_graph_compile.py).
#include <torch/library.h>

#include "binding/attention_ops.h"
#include "binding/propagate_ops.h"
#include "binding/propagate_tiles_ops.h"
#include "binding/segment_reduce_ops.h"

namespace iognn::torch_ext {

TORCH_LIBRARY_IMPL(iognn, Meta, m) {
  propagate::register_propagate<MetaBackend>(m);
  propagate::register_propagate_tiles<MetaBackend>(m);
  segment_reduce::register_segment_reduce<MetaBackend>(m);
  attention::register_attention<MetaBackend>(m);
}

}  // namespace iognn::torch_ext
