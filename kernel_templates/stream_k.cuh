// Stream-K for a persistent GEMM: the grid's G blocks share the T = tiles × k_tiles main-loop iterations evenly,
// block b taking [b·T/G, (b+1)·T/G). A tile is then computed in pieces by consecutive blocks: every SM is busy to
// the end however few the tiles (a weight gradient's 768×768 output is 36 tiles of 128×128 on 132 SMs), and there
// is no second pass over partial tiles (split-K's reduce launch).
//
// Each block walks its range from the end (`StreamKRange::next`), so its first piece is the *start* of its last
// tile, which it only publishes, and the piece that must wait for its peers (a tile's end: the finisher) comes last,
// when they have long published. A block's range touches at most one tile it does not finish (its last one, or
// the one tile its range lies within), so it publishes at most one partial tile, into its own slot of the
// workspace; the finisher adds its peers' slots in a fixed order (deterministic, whatever the timing) and runs
// the epilogue.
//
// Partials are stored in accumulator-fragment order: each thread's fragments as consecutive float4 per thread
// index, so the stores and loads are coalesced and need no layout or shuffles; the finisher has the same fragments.
// A finisher spins on blocks numbered below it, so those must make progress: the grid is at most one block per SM
// (and blocks are dispatched in order). The flags must be zero at launch (the plan zeroes them first): a stale flag
// would let a finisher add a slot not yet written. The sums' order depends on the grid, so the bits are the same on
// every run of one GPU, not across GPUs of other SM counts.
#pragma once

struct StreamKRange {
  long long begin, cur;  // iterations [begin, cur) remain, walked from cur down
  int k_tiles;

  __device__ __forceinline__ StreamKRange(int tiles, int k_tiles_, int block, int blocks) : k_tiles(k_tiles_) {
    const long long total = (long long)tiles * k_tiles_;
    begin = total * block / blocks;
    cur = total * (block + 1) / blocks;
  }

  // The next piece, last first: tile t over k-tiles [kb, ke). False once the range is walked.
  __device__ __forceinline__ bool next(int& t, int& kb, int& ke) {
    if (cur <= begin) return false;
    t = (int)((cur - 1) / k_tiles);
    const long long start = (long long)t * k_tiles, from = start > begin ? start : begin;
    kb = (int)(from - start);
    ke = (int)(cur - start);
    cur = from;
    return true;
  }
};

// The first iteration of block c's range (of G blocks over T iterations): the finisher's peers for a tile starting at
// iteration s are the blocks before it down to the one whose range holds s.
__device__ __forceinline__ long long stream_k_begin(int c, int blocks, long long total) {
  return total * c / blocks;
}

// `threads` threads (a named barrier `bar`) have stored a partial: one of them publishes it to the GPU.
__device__ __forceinline__ void stream_k_publish(int* flag, int bar, int threads, bool leader) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "r"(threads) : "memory");
  if (leader) asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(flag) : "memory");
}

// Wait until a peer has published (its flag is set); the group's other threads wait at the barrier.
__device__ __forceinline__ void stream_k_wait(const int* flag, int bar, int threads, bool leader) {
  if (leader) {
    int v = 0;
    do {
      asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    } while (v == 0);
  }
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "r"(threads) : "memory");
}

// A thread's fragments to / from (added into) a partial tile in fragment order: float4 v of thread i at
// slot[v·threads + i]. L2 only (cg): the data crosses SMs.
template <int N>
__device__ __forceinline__ void stream_k_store(const float (&frag)[N], float4* slot, int i, int threads) {
  static_assert(N % 4 == 0, "fragments in float4");
#pragma unroll
  for (int v = 0; v < N / 4; ++v)
    __stcg(slot + v * threads + i, make_float4(frag[4 * v], frag[4 * v + 1], frag[4 * v + 2], frag[4 * v + 3]));
}

template <int N>
__device__ __forceinline__ void stream_k_add(float (&frag)[N], const float4* slot, int i, int threads) {
#pragma unroll
  for (int v = 0; v < N / 4; ++v) {
    const float4 p = __ldcg(slot + v * threads + i);
    frag[4 * v] += p.x;
    frag[4 * v + 1] += p.y;
    frag[4 * v + 2] += p.z;
    frag[4 * v + 3] += p.w;
  }
}

// Where a piece of tile t over k-tiles [kb, ke) ends, for the `group` threads that computed it (named barrier
// `bar`; thread i of the group holds fragments acc): not the tile's end → publish acc into this block's slot and
// return false (no epilogue here); the tile's end after other blocks' pieces → add theirs, nearest first, and
// return true; the whole tile → true.
template <int M_TILES, int ACC>
__device__ __forceinline__ bool stream_k_meet(float (&acc)[M_TILES][ACC], float* partial, int* flags, int slot_floats,
                                              int t, int kb, int ke, int tiles, int k_tiles, int group, int bar, int i) {
  const bool leader = i == 0;
  if (ke < k_tiles) {
    float4* slot = reinterpret_cast<float4*>(partial + (size_t)blockIdx.x * slot_floats);
#pragma unroll
    for (int m = 0; m < M_TILES; ++m) stream_k_store(acc[m], slot + m * (ACC / 4) * group, i, group);
    stream_k_publish(flags + blockIdx.x, bar, group, leader);
    return false;
  }
  if (kb == 0) return true;
  const long long total = (long long)tiles * k_tiles, start = (long long)t * k_tiles;
  for (int c = (int)blockIdx.x - 1; c >= 0; --c) {
    const long long begin = stream_k_begin(c, gridDim.x, total);
    if (begin == stream_k_begin(c + 1, gridDim.x, total)) continue;  // a block with nothing to do
    stream_k_wait(flags + c, bar, group, leader);
    const float4* slot = reinterpret_cast<const float4*>(partial + (size_t)c * slot_floats);
#pragma unroll
    for (int m = 0; m < M_TILES; ++m) stream_k_add(acc[m], slot + m * (ACC / 4) * group, i, group);
    if (begin <= start) break;  // block c holds the tile's first k-tile
  }
  return true;
}
