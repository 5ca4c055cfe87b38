// Device graph build (graph_cuda.h) against the host build, through the torch-free API: the test
// owns the device memory, as a C++ user of the core would. Compiled in CUDA builds; skipped at run
// time when no device is present.
#if defined(IOGNN_WITH_CUDA)
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/graph_cuda.h"
#include "graph_reference.h"

namespace iognn::test {
namespace {

bool has_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define SKIP_WITHOUT_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no CUDA device"

// Device copy of a host buffer, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0 && cudaMalloc(&ptr_, bytes_) != cudaSuccess) throw DeviceError("cudaMalloc");
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (bytes_ > 0) cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  template <typename T>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  template <typename T>
  std::vector<int64_t> to_host(int64_t count) const {
    std::vector<T> h(count);
    if (count > 0) cudaMemcpy(h.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost);
    return std::vector<int64_t>(h.begin(), h.end());
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

// A host edge list's storage copied to the device, with the same view.
template <typename T>
struct DeviceEdges {
  DeviceBuffer storage;
  EdgeIndexView view;
  explicit DeviceEdges(const EdgeList<T>& host) : storage(host.storage), view(host.view) {
    view.data = storage.get<T>();
  }
};

// build_graph_cuda on a private stream, copied back as int64 vectors.
template <typename I>
ReferenceGraph device_graph(const EdgeIndexView& view, int64_t num_src, int64_t num_dst,
                            SelfLoops loops, GraphSizes* built = nullptr) {
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) throw DeviceError("cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};
  const GraphSizes cap = cuda::graph_capacity(num_src, num_dst, view.num_edges, loops);
  const int64_t C = cap.num_edges;
  DeviceBuffer rowptr((cap.num_dst + 1) * sizeof(I)), colptr((cap.num_src + 1) * sizeof(I)),
      col(C * sizeof(I)), eid(C * sizeof(I)), row(C * sizeof(I)), csc2csr(C * sizeof(I)),
      edge_map(C * sizeof(I));
  DeviceBuffer ws(cuda::build_graph_workspace_bytes<I>(cap));
  const GraphSizes sz = cuda::build_graph_cuda<I>(
      view, cap, loops,
      {rowptr.get<I>(), col.get<I>(), eid.get<I>(), colptr.get<I>(), row.get<I>(),
       csc2csr.get<I>(), edge_map.get<I>()},
      ws.get<void>(), ws.bytes(), stream);
  if (built) *built = sz;
  const int64_t E = sz.num_edges;
  return {rowptr.to_host<I>(sz.num_dst + 1), col.to_host<I>(E),      eid.to_host<I>(E),
          colptr.to_host<I>(sz.num_src + 1), row.to_host<I>(E),      csc2csr.to_host<I>(E),
          edge_map.to_host<I>(E)};
}

struct Case {
  int64_t num_src, num_dst, num_edges;
};

TEST(GraphBuildCuda, EqualsHostBuild) {
  SKIP_WITHOUT_DEVICE();
  // Covers 32-bit keys (small) and 64-bit keys (bits(num_src) + bits(num_dst) > 32).
  const Case cases[] = {{0, 0, 0},     {5, 5, 0},       {1, 1, 7},          {30, 30, 120},
                        {25, 9, 70},   {7, 31, 50},     {65536, 65536, 500}, {65537, 65536, 500},
                        {3, 1 << 20, 2000}, {200000, 200000, 300000}};
  for (const Case& c : cases) {
    const RandomEdges e = c.num_edges ? random_edges(c.num_src, c.num_dst, c.num_edges, 99)
                                      : RandomEdges{};
    const EdgeList<int64_t> rows(e.src, e.dst);
    const EdgeList<int32_t> edge_major(e.src, e.dst, /*edge_major=*/true, /*gap=*/2);
    const DeviceEdges<int64_t> d_rows(rows);
    const DeviceEdges<int32_t> d_edge_major(edge_major);
    for (SelfLoops mode : kSelfLoopModes) {
      SCOPED_TRACE(::testing::Message() << c.num_src << "x" << c.num_dst << " E=" << c.num_edges
                                        << " mode " << int(mode));
      const ReferenceGraph want = core_graph<int32_t>(rows.view, c.num_src, c.num_dst, mode);
      GraphSizes built;
      expect_equal(device_graph<int32_t>(d_rows.view, c.num_src, c.num_dst, mode, &built), want);
      const GraphSizes host = plan_graph(rows.view, c.num_src, c.num_dst, mode);
      EXPECT_EQ(built.num_edges, host.num_edges);
      EXPECT_EQ(built.num_loops, host.num_loops);
      expect_equal(device_graph<int64_t>(d_rows.view, c.num_src, c.num_dst, mode), want);
      expect_equal(device_graph<int32_t>(d_edge_major.view, c.num_src, c.num_dst, mode), want);
    }
  }
}

TEST(GraphBuildCuda, DuplicateInputLoopsKeepTheLastId) {
  SKIP_WITHOUT_DEVICE();
  std::vector<int64_t> src, dst;
  for (int64_t k = 0; k < 5000; ++k) {  // many loops on few nodes, interleaved with other edges
    src.push_back(k % 7);
    dst.push_back(k % 3 == 0 ? k % 7 : (k + 1) % 7);
  }
  const EdgeList<int64_t> host(src, dst);
  const DeviceEdges<int64_t> dev(host);
  for (SelfLoops mode : kSelfLoopModes)
    expect_equal(device_graph<int32_t>(dev.view, 7, 7, mode),
                 reference_graph(src, dst, 7, 7, mode));
}

std::string device_index_error(const EdgeIndexView& view, int64_t n) {
  try {
    device_graph<int32_t>(view, n, n, SelfLoops::kKeep);
  } catch (const IndexError& e) {
    return e.what();
  }
  return "no IndexError";
}

TEST(GraphBuildCuda, ValidationMatchesTheHostMessages) {
  SKIP_WITHOUT_DEVICE();
  std::vector<int64_t> src(100000, 1), dst(100000, 2);
  dst[90000] = 77;
  src[60000] = -5;
  dst[60000] = -6;
  const EdgeList<int64_t> host(src, dst);
  const DeviceEdges<int64_t> dev(host);
  EXPECT_EQ(device_index_error(dev.view, 10), "edge_index[0][60000] = -5 is out of range for 10 source nodes");
  src[60000] = 1;
  const EdgeList<int32_t> host32(src, dst, /*edge_major=*/true);
  const DeviceEdges<int32_t> dev32(host32);
  EXPECT_EQ(device_index_error(dev32.view, 10),
            "edge_index[1][60000] = -6 is out of range for 10 destination nodes");
  // The device stays usable after an error.
  const EdgeList<int64_t> ok({0, 1}, {1, 0});
  const DeviceEdges<int64_t> dev_ok(ok);
  expect_equal(device_graph<int32_t>(dev_ok.view, 2, 2, SelfLoops::kKeep),
               core_graph<int32_t>(ok.view, 2, 2, SelfLoops::kKeep));
}

TEST(GraphBuildCuda, BadSizesAndWorkspaces) {
  SKIP_WITHOUT_DEVICE();
  const EdgeList<int64_t> host({0, 1}, {1, 0});
  const DeviceEdges<int64_t> dev(host);
  EXPECT_THROW(device_graph<int32_t>(dev.view, -1, 2, SelfLoops::kKeep), ValueError);
  const GraphSizes cap = cuda::graph_capacity(2, 2, 2, SelfLoops::kKeep);
  const size_t need = cuda::build_graph_workspace_bytes<int32_t>(cap);
  DeviceBuffer ws(need), out(16 * sizeof(int32_t));
  int32_t* o = out.get<int32_t>();
  const GraphArrays<int32_t> arrays{o, o + 3, o + 5, o + 7, o + 10, o + 12, o + 14};
  EXPECT_THROW(cuda::build_graph_cuda<int32_t>(dev.view, cap, SelfLoops::kKeep, arrays,
                                               ws.get<void>(), need - 1, nullptr),
               ValueError);
  EXPECT_THROW(cuda::build_graph_cuda<int32_t>(dev.view, cap, SelfLoops::kKeep, arrays, nullptr,
                                               need, nullptr),
               ValueError);
  // A capacity made for another self-loop mode would under-size the outputs.
  EXPECT_THROW(cuda::build_graph_cuda<int32_t>(dev.view, cap, SelfLoops::kReplace, arrays,
                                               ws.get<void>(), need, nullptr),
               ValueError);
}

// Input sorted by (destination, source) takes the path without a row sort on the CSR side; input
// sorted by destination only, and rows long enough for several merge levels, take the sorting path.
TEST(GraphBuildCuda, SortedInputsAndLongRows) {
  SKIP_WITHOUT_DEVICE();
  struct Shape {
    int64_t num_src, num_dst, num_edges;
    bool hub;
  };
  const Shape shapes[] = {{50, 40, 600, false}, {20000, 3000, 60000, false},
                          {40000, 40000, 70000, true}};
  for (const Shape& shape : shapes) {
    RandomEdges e = random_edges(shape.num_src, shape.num_dst, shape.num_edges, 7);
    if (shape.hub) {  // node 3 receives 40,000 edges and sends 2,000: four merge levels on the CSR side
      for (int64_t k = 0; k < 40000; ++k) {
        e.src.push_back(k);
        e.dst.push_back(3);
      }
      for (int64_t k = 0; k < 2000; ++k) {
        e.src.push_back(3);
        e.dst.push_back((k * 7) % shape.num_dst);
      }
    }
    std::vector<int64_t> order(e.src.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = int64_t(k);
    for (int by_source = 0; by_source < 2; ++by_source) {
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        if (e.dst[x] != e.dst[y]) return e.dst[x] < e.dst[y];
        return by_source && e.src[x] < e.src[y];
      });
      std::vector<int64_t> src, dst;
      for (int64_t k : order) {
        src.push_back(e.src[k]);
        dst.push_back(e.dst[k]);
      }
      const EdgeList<int64_t> sorted(src, dst);
      const DeviceEdges<int64_t> dev(sorted);
      for (SelfLoops mode : kSelfLoopModes) {
        SCOPED_TRACE(::testing::Message() << shape.num_edges << " by_source " << by_source
                                          << " mode " << int(mode));
        const ReferenceGraph want = reference_graph(src, dst, shape.num_src, shape.num_dst, mode);
        expect_equal(device_graph<int32_t>(dev.view, shape.num_src, shape.num_dst, mode), want);
        expect_equal(device_graph<int64_t>(dev.view, shape.num_src, shape.num_dst, mode), want);
      }
    }
  }
}

}  // namespace
}  // namespace iognn::test
#endif  // IOGNN_WITH_CUDA
