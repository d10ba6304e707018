// Rasterisation of a GEMM's output tiles: which tile of the tiles_m × tiles_n grid the pid-th block (or the pid-th
// step of a persistent walk) computes. GROUP > 1 sweeps GROUP tile rows column by column before moving down, so
// that blocks running at the same time share B tiles (and A tiles) in L2; GROUP = 1 goes row by row.
#pragma once

template <int GROUP>
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
  if constexpr (GROUP > 1) {
    const int width = GROUP * tiles_n;
    const int first_m = (pid / width) * GROUP;
    const int group_rows = min(tiles_m - first_m, GROUP);
    tile_m = first_m + (pid % width) % group_rows;
    tile_n = (pid % width) / group_rows;
  } else {
    tile_m = pid / tiles_n;
    tile_n = pid % tiles_n;
  }
}

// The first row and column of the TILE_M×TILE_N tile of C (M×N) that this block computes, one block per tile.
template <int TILE_M, int TILE_N, int GROUP>
__device__ __forceinline__ void block_tile_origin(int M, int N, int& bm0, int& bn0) {
  const int tiles_n = (N + TILE_N - 1) / TILE_N;
  const int pid = blockIdx.x;
  const int tiles_m = (M + TILE_M - 1) / TILE_M;
  int tile_m, tile_n;
  grouped_tile<GROUP>(pid, tiles_m, tiles_n, tile_m, tile_n);
  bm0 = tile_m * TILE_M;
  bn0 = tile_n * TILE_N;
}
