// Phase timestamps inside a kernel, for scripts/block_phases.py: compiled with -DPHASES, PHASE_MARK(slot) records, for
// the block it runs in, the SM's cycle counter and the global nanosecond timer at that point (one thread calls it:
// the kernel says which); the script reads them back from the module's convbench_phases array after a launch and
// prints how long each block spends between its slots. Without PHASES it compiles to nothing. Slot 0 is the block's
// start by convention (its SM goes in convbench_phases_sm). A slot is written each time it is reached: a loop's slot
// keeps its last pass.
#pragma once

#ifdef PHASES
#ifndef PHASE_SLOTS
#define PHASE_SLOTS 32
#endif
#ifndef PHASE_BLOCKS
#define PHASE_BLOCKS 2048
#endif
// [block][slot][clock, globaltimer]; a block past PHASE_BLOCKS records nothing
__device__ unsigned long long convbench_phases[PHASE_BLOCKS * PHASE_SLOTS * 2];
__device__ unsigned int convbench_phases_sm[PHASE_BLOCKS];

__device__ __forceinline__ void phase_mark(int slot) {
    const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (block >= PHASE_BLOCKS || slot < 0 || slot >= PHASE_SLOTS) return;
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    const unsigned long long clk = clock64();
    convbench_phases[(block * PHASE_SLOTS + slot) * 2] = clk;
    convbench_phases[(block * PHASE_SLOTS + slot) * 2 + 1] = ns;
    if (slot == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        convbench_phases_sm[block] = sm;
    }
}
#define PHASE_MARK(slot) phase_mark(slot)
#else
#define PHASE_MARK(slot) \
    do {               \
    } while (0)
#endif
