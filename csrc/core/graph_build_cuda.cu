// Device construction of the CSR / transposed CSR (see graph_cuda.h for the contract and graph.h
// for the layout) in one cooperative kernel. The result equals build_graph_cpu's bit for bit: both
// produce the same orders, defined by keys rather than by the order in which threads run.
//   augmented list : kept input edges in input order (ids from a block scan of the loop flags),
//                    then loops 0..L-1;
//   CSR            : rows by destination, sorted by (source, augmented id) within a row;
//   transposed CSR : rows by source, sorted by (destination, augmented id) within a row, which is
//                    the order of the CSR positions.
// Phases, separated by grid-wide barriers (why one kernel: a graph built every step, e.g. a
// sampled block, is dominated by launches and host round trips, not by its bytes):
//   0 zero the per-node counters           4 scatter every edge into its row (integer atomics pick
//   1 validate, count degrees and loops      an unordered slot), or, for input already sorted by
//   2 per-block sums of the degrees          (destination, source), compute CSR positions directly
//   3 exclusive scan -> rowptr, colptr     5 sort each row: runs of 1, 32, 1024, ... elements
//                                            aligned to the row start are merged 32 at a time by
//                                            rank (binary searches), as many levels as the longest
//                                            row needs
//                                          6 write col / eid / row, 7 csc2csr.
// Every output element is written by exactly one thread at a position that depends only on the
// keys, so the build is deterministic. The host waits once (one stream sync), then reads the
// kernel's 48-byte report (sizes, errors) from pinned memory; a deferred build does not wait (its
// first bad index goes to the caller's error word, its outputs then describe an empty graph).
#include <cooperative_groups.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/graph_cuda.h"
#include "core/workspace.h"

namespace iognn::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;       // block-sum arrays are sized for this many blocks
constexpr int64_t kItemsPerThread = 4;  // fewer, fuller blocks make the barriers cheaper
constexpr int kFanIn = 32;              // sorted runs merged by one level of the row sort

using key_t = unsigned long long;  // (other endpoint << id_bits) | augmented id

struct BuildStatus {
  unsigned long long first_bad;  // 2k + row of the first out-of-range index, ~0 when none
  long long bad_value;           // the index at first_bad
  unsigned long long num_input_loops;
  unsigned long long max_in_degree;
  unsigned long long max_out_degree;
  unsigned int unsorted;  // 1 unless the input is ordered by (destination, source)
};

template <typename index_t>
struct BuildParams {
  EdgeIndexView ei;
  int64_t num_src, num_dst, num_input;
  int64_t num_loops;  // L: loops appended (0 for kKeep)
  SelfLoops mode;
  int id_bits;
  GraphArrays<index_t> out;
  // workspace
  index_t* cursor;                // [num_dst + num_src] degrees, then next free slot per row
  long long* block_sums;          // [kMaxBlocks]
  long long* block_loops;         // [kMaxBlocks]
  index_t* last_loop;             // [L] kAddRemaining: largest input id of a loop at node i
  key_t* keys[2][2];              // [CSR / transposed][ping-pong buffer], E' each
  index_t* segment[2];            // [CSR / transposed] row of each position
  index_t* csr_position;          // [E'] CSR position of each augmented id
  BuildStatus* status;
  BuildStatus* host_status;       // pinned, mapped: the kernel's report to the host, or null
  unsigned long long* deferred_error;  // a deferred build's error word (device), or null
};

int bits_for(int64_t n) {  // bits that represent every value in [0, n): 0 for n <= 1
  int b = 0;
  while (b < 63 && (int64_t(1) << b) < n) ++b;
  return b;
}

// Carves the workspace of a build with capacity `cap` (E' <= cap.num_edges); measures when null.
template <typename index_t>
size_t carve(void* base, const GraphSizes& cap, BuildParams<index_t>* p) {
  WorkspaceSlicer s(base);
  BuildParams<index_t> q{};
  const int64_t E = cap.num_edges;
  q.cursor = s.take<index_t>(cap.num_dst + cap.num_src);
  q.block_sums = s.take<long long>(kMaxBlocks);
  q.block_loops = s.take<long long>(kMaxBlocks);
  q.last_loop = s.take<index_t>(cap.num_loops);
  for (auto& pair : q.keys)
    for (key_t*& buffer : pair) buffer = s.take<key_t>(E);
  for (index_t*& seg : q.segment) seg = s.take<index_t>(E);
  q.csr_position = s.take<index_t>(E);
  q.status = s.take<BuildStatus>(1);
  if (p) {
    p->cursor = q.cursor;
    p->block_sums = q.block_sums;
    p->block_loops = q.block_loops;
    p->last_loop = q.last_loop;
    for (int x = 0; x < 2; ++x) {
      p->keys[x][0] = q.keys[x][0];
      p->keys[x][1] = q.keys[x][1];
      p->segment[x] = q.segment[x];
    }
    p->csr_position = q.csr_position;
    p->status = q.status;
  }
  return s.used();
}

// ---- device helpers -----------------------------------------------------------------------------

__device__ int32_t atomic_fetch_add(int32_t* p, int32_t v) { return atomicAdd(p, v); }
__device__ int64_t atomic_fetch_add(int64_t* p, int64_t v) {
  return int64_t(atomicAdd(reinterpret_cast<unsigned long long*>(p),
                           static_cast<unsigned long long>(v)));
}
// Adds 1 to counter[i] for every calling thread with one atomic per distinct i among the threads
// of a warp that call together (input sorted by destination sends runs of equal i); returns the
// counter's old value plus the thread's rank among the threads that share its i.
template <typename index_t>
__device__ index_t claim(index_t* counter, int64_t i) {
  const cg::coalesced_group same =
      cg::labeled_partition(cg::coalesced_threads(), static_cast<unsigned long long>(i));
  index_t base = 0;
  if (same.thread_rank() == 0) base = atomic_fetch_add(counter + i, index_t(same.size()));
  return same.shfl(base, 0) + index_t(same.thread_rank());
}
__device__ void atomic_max(int32_t* p, int32_t v) { atomicMax(p, v); }
__device__ void atomic_max(int64_t* p, int64_t v) {
  atomicMax(reinterpret_cast<long long*>(p), static_cast<long long>(v));
}

// [begin, end) of block b when n items are split into gridDim.x contiguous chunks.
struct Chunk {
  int64_t begin, end;
};
__device__ Chunk block_chunk(int64_t n) {
  const int64_t size = (n + gridDim.x - 1) / gridDim.x;
  const int64_t begin = min(n, int64_t(blockIdx.x) * size);
  return {begin, min(n, begin + size)};
}

// Levels of the row sort a row of n elements goes through: runs of 1, 32, 1024, ... < n.
__host__ __device__ int sort_levels(int64_t n) {
  int levels = 0;
  for (int64_t run = 1; run < n; run *= kFanIn) ++levels;
  return levels;
}

// Number of keys below `key` in the sorted run [run, run + n).
__device__ int64_t rank_in_run(const key_t* run, int64_t n, key_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (run[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

using BlockReduce = cub::BlockReduce<long long, kThreads>;
using BlockScan = cub::BlockScan<long long, kThreads>;
union SharedStorage {
  typename BlockReduce::TempStorage reduce;
  typename BlockScan::TempStorage scan;
};

// Sum over the block of each thread's v (valid in thread 0); the storage is reusable afterwards.
__device__ long long block_sum(SharedStorage& smem, long long v) {
  const long long total = BlockReduce(smem.reduce).Sum(v);
  __syncthreads();
  return total;
}
__device__ long long block_max(SharedStorage& smem, long long v) {
  const long long total = BlockReduce(smem.reduce).Reduce(v, ::cuda::maximum<>{});
  __syncthreads();
  return total;
}
__device__ long long block_min(SharedStorage& smem, long long v) {
  const long long total = BlockReduce(smem.reduce).Reduce(v, ::cuda::minimum<>{});
  __syncthreads();
  return total;
}

// Sum of values[0, count) over the whole block, broadcast to every thread.
__device__ long long block_prefix(SharedStorage& smem, const long long* values, int64_t count) {
  __shared__ long long result;
  long long v = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) v += values[i];
  v = block_sum(smem, v);
  if (threadIdx.x == 0) result = v;
  __syncthreads();
  return result;
}

// ---- phases -------------------------------------------------------------------------------------

template <typename index_t>
__device__ void zero_counters(const BuildParams<index_t>& p) {
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  for (int64_t i = t; i < p.num_dst + p.num_src; i += stride) p.cursor[i] = 0;
  for (int64_t i = t; i < p.num_loops; i += stride) p.last_loop[i] = index_t(-1);
  if (t == 0) *p.status = BuildStatus{~0ull, 0, 0, 0, 0, 0};
}

template <typename index_t>
__device__ void count_edges(const BuildParams<index_t>& p, SharedStorage& smem) {
  const Chunk c = block_chunk(p.num_input);
  constexpr long long kNone = 0x7fffffffffffffffll;
  long long first_bad = kNone;  // 2k + row of the first out-of-range index
  long long loops = 0;
  bool unsorted = false;
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += kThreads) {
    const int64_t s = p.ei.src(k), d = p.ei.dst(k);
    if (s < 0 || s >= p.num_src) {  // source before destination within an edge, as plan_graph
      first_bad = min(first_bad, (long long)(2 * k));
      continue;
    }
    if (d < 0 || d >= p.num_dst) {
      first_bad = min(first_bad, (long long)(2 * k + 1));
      continue;
    }
    if (k + 1 < p.num_input) {
      const int64_t s1 = p.ei.src(k + 1), d1 = p.ei.dst(k + 1);
      unsorted |= d1 < d || (d1 == d && s1 < s);
    }
    if (s == d) {
      ++loops;
      if (p.mode == SelfLoops::kAddRemaining) atomic_max(p.last_loop + s, index_t(k));
      if (p.mode != SelfLoops::kKeep) continue;
    }
    claim(p.cursor, d);
    claim(p.cursor, p.num_dst + s);
  }
  if (unsorted) p.status->unsorted = 1;  // every writer stores the same value
  // The block's loops feed the augmented ids of phase 4 (same chunks, so the same counts).
  loops = block_sum(smem, loops);
  first_bad = block_min(smem, first_bad);
  if (threadIdx.x == 0) {
    p.block_loops[blockIdx.x] = loops;
    if (loops) atomicAdd(&p.status->num_input_loops, (unsigned long long)loops);
    if (first_bad != kNone) atomicMin(&p.status->first_bad, (unsigned long long)first_bad);
  }
}

// Degree of scan entry i: in-degree of destination i, or out-degree of source i - num_dst, each
// with the loop appended to nodes below L.
template <typename index_t>
__device__ long long scan_value(const BuildParams<index_t>& p, int64_t i) {
  const int64_t node = i < p.num_dst ? i : i - p.num_dst;
  return (long long)p.cursor[i] + (node < p.num_loops ? 1 : 0);
}

template <typename index_t>
__device__ void sum_degrees(const BuildParams<index_t>& p, SharedStorage& smem) {
  const Chunk c = block_chunk(p.num_dst + p.num_src);
  long long sum = 0, max_in = 0, max_out = 0;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += kThreads) {
    const long long v = scan_value(p, i);
    sum += v;
    if (i < p.num_dst) max_in = max(max_in, v);
    else max_out = max(max_out, v);
  }
  sum = block_sum(smem, sum);
  max_in = block_max(smem, max_in);
  max_out = block_max(smem, max_out);
  if (threadIdx.x == 0) {
    p.block_sums[blockIdx.x] = sum;
    if (max_in) atomicMax(&p.status->max_in_degree, (unsigned long long)max_in);
    if (max_out) atomicMax(&p.status->max_out_degree, (unsigned long long)max_out);
  }
}

// rowptr / colptr, and the cursors of phase 4 (each row's first slot).
template <typename index_t>
__device__ void scan_degrees(const BuildParams<index_t>& p, SharedStorage& smem, int64_t E) {
  const int64_t n = p.num_dst + p.num_src;
  const Chunk c = block_chunk(n);
  long long carry = block_prefix(smem, p.block_sums, blockIdx.x);
  for (int64_t base = c.begin; base < c.end; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const long long v = i < c.end ? scan_value(p, i) : 0;
    long long before, tile;
    BlockScan(smem.scan).ExclusiveSum(v, before, tile);
    __syncthreads();
    if (i < c.end) {
      const long long x = carry + before;
      if (i < p.num_dst) {
        p.out.rowptr[i] = index_t(x);
        p.cursor[i] = index_t(x);
      } else {  // the transposed offsets start after the E' in-edges
        p.out.colptr[i - p.num_dst] = index_t(x - E);
        p.cursor[i] = index_t(x - E);
      }
    }
    carry += tile;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    p.out.rowptr[p.num_dst] = index_t(E);
    p.out.colptr[p.num_src] = index_t(E);
  }
}

template <typename index_t>
__device__ void put(const BuildParams<index_t>& p, int x, int64_t row, int64_t other, int64_t a) {
  const int64_t slot = claim(p.cursor, x == 0 ? row : p.num_dst + row);
  p.keys[x][0][slot] = (key_t(other) << p.id_bits) | key_t(a);
  p.segment[x][slot] = index_t(row);
}

template <typename index_t>
__device__ void scatter_edges(const BuildParams<index_t>& p, SharedStorage& smem, bool sorted,
                              int64_t num_kept) {
  const Chunk c = block_chunk(p.num_input);
  const bool drop_loops = p.mode != SelfLoops::kKeep;
  long long dropped = drop_loops ? block_prefix(smem, p.block_loops, blockIdx.x) : 0;
  for (int64_t base = c.begin; base < c.end; base += kThreads) {
    const int64_t k = base + threadIdx.x;
    int64_t s = 0, d = 0;
    if (k < c.end) {
      s = p.ei.src(k);
      d = p.ei.dst(k);
    }
    const bool kept = k < c.end && !(drop_loops && s == d);
    long long before = 0, tile = 0;
    if (drop_loops) {  // augmented id = k minus the loops dropped before k
      BlockScan(smem.scan).ExclusiveSum(k < c.end && !kept ? 1ll : 0ll, before, tile);
      __syncthreads();
    }
    if (kept) {
      const int64_t a = k - dropped - before;
      p.out.edge_map[a] = index_t(k);
      if (sorted) {  // rows before d hold the kept edges before a and min(d, L) loops
        const bool has_loop = d < p.num_loops;
        const int64_t pos = a + min(d, p.num_loops) + (has_loop && s > d ? 1 : 0);
        p.out.col[pos] = index_t(s);
        p.out.eid[pos] = index_t(a);
        p.csr_position[a] = index_t(pos);
        if (has_loop && s < d) claim(p.cursor, d);  // the loop of row d goes after this edge
      } else {
        put(p, 0, d, s, a);
      }
      put(p, 1, s, d, a);
    }
    dropped += tile;
  }
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < p.num_loops; i += stride) {
    const int64_t a = num_kept + i;
    p.out.edge_map[a] = p.mode == SelfLoops::kAddRemaining ? p.last_loop[i] : index_t(-1);
    if (!sorted) put(p, 0, i, i, a);
    put(p, 1, i, i, a);
  }
}

// One level of the row sort of structure x: every row longer than `run` has sorted runs of `run`
// elements (aligned to its start) in buffer `level & 1`; groups of kFanIn runs are merged into
// buffer `(level + 1) & 1`. An element's place in its group is the sum of its ranks in every run.
template <typename index_t>
__device__ void merge_level(const BuildParams<index_t>& p, int x, int level, int64_t run,
                            int64_t E) {
  const index_t* ptr = x == 0 ? p.out.rowptr : p.out.colptr;
  const key_t* from = p.keys[x][level & 1];
  key_t* to = p.keys[x][(level + 1) & 1];
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t q = int64_t(blockIdx.x) * kThreads + threadIdx.x; q < E; q += stride) {
    const int64_t seg = p.segment[x][q];
    const int64_t start = ptr[seg], end = ptr[seg + 1];
    if (end - start <= run) continue;  // this row is already sorted (its final buffer is known)
    const int64_t group = start + (q - start) / (run * kFanIn) * (run * kFanIn);
    const int64_t group_end = min(end, group + run * kFanIn);
    const int64_t own = start + (q - start) / run * run;
    const key_t key = from[q];
    int64_t rank = 0;
    for (int64_t r = group; r < group_end; r += run)
      rank += r == own ? q - r : rank_in_run(from + r, min(run, group_end - r), key);
    to[group + rank] = key;
  }
}

// Writes the sorted rows: CSR col / eid (and each augmented id's CSR position), transposed row
// (and, for now, its augmented id in csc2csr).
template <typename index_t>
__device__ void write_rows(const BuildParams<index_t>& p, bool sorted, int64_t E,
                           int64_t num_kept) {
  const key_t id_mask = (key_t(1) << p.id_bits) - 1;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const int64_t t = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  for (int64_t q = t; q < E; q += stride) {
    if (!sorted) {
      const int64_t d = p.segment[0][q];
      const key_t key = p.keys[0][sort_levels(p.out.rowptr[d + 1] - p.out.rowptr[d]) & 1][q];
      const int64_t a = int64_t(key & id_mask);
      p.out.col[q] = index_t(key >> p.id_bits);
      p.out.eid[q] = index_t(a);
      p.csr_position[a] = index_t(q);
    }
    const int64_t s = p.segment[1][q];
    const key_t key = p.keys[1][sort_levels(p.out.colptr[s + 1] - p.out.colptr[s]) & 1][q];
    p.out.row[q] = index_t(key >> p.id_bits);
    p.out.csc2csr[q] = index_t(key & id_mask);
  }
  if (sorted) {  // the loop of row i sits after the kept edges with a smaller source
    for (int64_t i = t; i < p.num_loops; i += stride) {
      const int64_t pos = p.cursor[i];
      p.out.col[pos] = index_t(i);
      p.out.eid[pos] = index_t(num_kept + i);
      p.csr_position[num_kept + i] = index_t(pos);
    }
  }
}

template <typename index_t>
__global__ void __launch_bounds__(kThreads) build_kernel(const BuildParams<index_t> p) {
  cg::grid_group grid = cg::this_grid();
  __shared__ SharedStorage smem;
  zero_counters(p);
  grid.sync();
  count_edges(p, smem);
  grid.sync();
  BuildStatus* const status = p.status;
  const bool reporter = blockIdx.x == 0 && threadIdx.x == 0;
  if (status->first_bad != ~0ull) {  // uniform exit: every block reads the same status
    if (reporter) {
      const int64_t k = int64_t(status->first_bad >> 1);
      status->bad_value = (status->first_bad & 1) ? p.ei.dst(k) : p.ei.src(k);
      if (p.host_status) *p.host_status = *status;
      if (p.deferred_error) atomicMin(p.deferred_error, status->first_bad);
    }
    // A deferred build's outputs are read by later kernels: leave them an empty graph whose
    // edge arrays hold in-range zeros.
    if (!p.deferred_error) return;
    const int64_t stride = int64_t(gridDim.x) * kThreads;
    const int64_t first = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    for (int64_t i = first; i <= p.num_dst; i += stride) p.out.rowptr[i] = 0;
    for (int64_t i = first; i <= p.num_src; i += stride) p.out.colptr[i] = 0;
    for (int64_t e = first; e < p.num_input; e += stride)
      p.out.col[e] = p.out.eid[e] = p.out.row[e] = p.out.csc2csr[e] = p.out.edge_map[e] = 0;
    return;
  }
  const int64_t num_kept =
      p.num_input - (p.mode == SelfLoops::kKeep ? 0 : int64_t(status->num_input_loops));
  const int64_t E = num_kept + p.num_loops;
  const bool sorted = status->unsorted == 0;
  sum_degrees(p, smem);
  grid.sync();
  scan_degrees(p, smem, E);
  grid.sync();
  scatter_edges(p, smem, sorted, num_kept);
  grid.sync();
  const int csr_levels = sorted ? 0 : sort_levels(int64_t(status->max_in_degree));
  const int t_levels = sort_levels(int64_t(status->max_out_degree));
  int64_t run = 1;
  for (int level = 0; level < max(csr_levels, t_levels); ++level, run *= kFanIn) {
    if (level < csr_levels) merge_level(p, 0, level, run, E);
    if (level < t_levels) merge_level(p, 1, level, run, E);
    grid.sync();
  }
  write_rows(p, sorted, E, num_kept);
  grid.sync();
  if (reporter && p.host_status) *p.host_status = *status;  // final since the last barrier but one
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t q = int64_t(blockIdx.x) * kThreads + threadIdx.x; q < E; q += stride)
    p.out.csc2csr[q] = p.csr_position[p.out.csc2csr[q]];
}

// Blocks of a cooperative launch on the current device: all resident at once, at most kMaxBlocks.
template <typename index_t>
int resident_blocks() {
  int device = 0;
  IOGNN_CUDA_CHECK(cudaGetDevice(&device));
  static std::array<std::atomic<int>, 64> cache{};  // per device; 0 = not yet queried
  std::atomic<int>& slot = cache[size_t(device) % cache.size()];
  int blocks = device < int(cache.size()) ? slot.load() : 0;
  if (blocks == 0) {
    int per_sm = 0, sms = 0, cooperative = 0;
    IOGNN_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
    IOGNN_CHECK(cooperative, DeviceError, "the CUDA graph build needs a device that supports "
                "cooperative launches (build the graph on the CPU)");
    IOGNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    IOGNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, build_kernel<index_t>,
                                                                   kThreads, 0));
    blocks = std::max(1, std::min(kMaxBlocks, per_sm * sms));
    if (device < int(cache.size())) slot.store(blocks);
  }
  return blocks;
}

// The host's end of the kernel's report: pinned, mapped memory that the kernel writes and the host
// reads after one stream sync, so a build needs no copy launch. One per host thread (a build returns
// only after its sync, so a thread never has two in flight).
BuildStatus* host_status() {
  struct Pinned {
    BuildStatus* ptr = nullptr;
    ~Pinned() {
      if (ptr) cudaFreeHost(ptr);  // at thread exit; an error there has no one to report to
    }
  };
  thread_local Pinned pinned;
  if (!pinned.ptr) {
    void* ptr = nullptr;
    IOGNN_CUDA_CHECK(
        cudaHostAlloc(&ptr, sizeof(BuildStatus), cudaHostAllocMapped | cudaHostAllocPortable));
    pinned.ptr = static_cast<BuildStatus*>(ptr);
  }
  return pinned.ptr;
}

}  // namespace

GraphSizes graph_capacity(int64_t num_src, int64_t num_dst, int64_t num_input_edges,
                          SelfLoops loops) {
  check_graph_sizes(num_src, num_dst, num_input_edges);
  return graph_sizes(num_src, num_dst, num_input_edges, 0, loops);
}

template <typename index_t>
size_t build_graph_workspace_bytes(const GraphSizes& capacity) {
  return carve<index_t>(nullptr, capacity, nullptr);
}

template <typename index_t>
GraphSizes build_graph_cuda(const EdgeIndexView& ei, const GraphSizes& capacity, SelfLoops loops,
                            const GraphArrays<index_t>& out, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, GraphDegrees* degrees,
                            unsigned long long* deferred_error) {
  const GraphSizes cap = graph_capacity(capacity.num_src, capacity.num_dst, ei.num_edges, loops);
  IOGNN_CHECK(capacity.num_edges == cap.num_edges && capacity.num_loops == cap.num_loops,
              ValueError, "build_graph_cuda: the capacity was not made by graph_capacity for this "
              "edge index and self-loop mode");
  const int id_bits = bits_for(cap.num_edges);
  IOGNN_CHECK(bits_for(std::max(cap.num_src, cap.num_dst)) + id_bits <= 64, ValueError,
              "the CUDA graph build needs bits(num_nodes) + bits(num_edges) <= 64, got ",
              cap.num_src, " x ", cap.num_dst, " nodes and ", cap.num_edges,
              " edges (build this graph on the CPU)");
  const size_t need = build_graph_workspace_bytes<index_t>(cap);
  // need > 0 (the status slice): a null workspace is always refused.
  check_workspace("build_graph_cuda", workspace, workspace_bytes, need);
  IOGNN_CHECK(!deferred_error || loops == SelfLoops::kKeep, ValueError,
              "build_graph_cuda: a deferred build keeps self-loops as given (its sizes must not "
              "depend on the data)");

  BuildParams<index_t> p{};
  p.ei = ei;
  p.num_src = cap.num_src;
  p.num_dst = cap.num_dst;
  p.num_input = ei.num_edges;
  p.num_loops = cap.num_loops;
  p.mode = loops;
  p.id_bits = id_bits;
  p.out = out;
  carve<index_t>(workspace, cap, &p);
  p.deferred_error = deferred_error;
  BuildStatus* const report = deferred_error ? nullptr : host_status();
  if (report)
    IOGNN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&p.host_status), report, 0));

  const int64_t items = std::max(cap.num_edges, cap.num_src + cap.num_dst);
  const int64_t wanted = (items + kThreads * kItemsPerThread - 1) / (kThreads * kItemsPerThread);
  const int blocks = int(std::max<int64_t>(1, std::min<int64_t>(wanted, resident_blocks<index_t>())));
  void* args[] = {&p};
  IOGNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(build_kernel<index_t>),
                                               dim3(blocks), dim3(kThreads), args, 0, stream));
  if (deferred_error) {  // kKeep: the sizes are the capacity's; the longest rows are unknown
    if (degrees) *degrees = {-1, -1};
    return cap;
  }
  IOGNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  const BuildStatus host = *report;
  if (host.first_bad != ~0ull)
    throw_edge_out_of_range(int(host.first_bad & 1), int64_t(host.first_bad >> 1),
                            int64_t(host.bad_value), cap.num_src, cap.num_dst);
  if (degrees) *degrees = {int64_t(host.max_in_degree), int64_t(host.max_out_degree)};
  return graph_sizes(cap.num_src, cap.num_dst, ei.num_edges, int64_t(host.num_input_loops), loops);
}

#define IOGNN_INSTANTIATE(index_t)                                                           \
  template size_t build_graph_workspace_bytes<index_t>(const GraphSizes&);                   \
  template GraphSizes build_graph_cuda<index_t>(const EdgeIndexView&, const GraphSizes&,     \
                                                SelfLoops, const GraphArrays<index_t>&, void*, \
                                                size_t, cudaStream_t, GraphDegrees*,            \
                                                unsigned long long*);
IOGNN_INSTANTIATE(int32_t)
IOGNN_INSTANTIATE(int64_t)
#undef IOGNN_INSTANTIATE

}  // namespace iognn::cuda
