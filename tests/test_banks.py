"""core/gpu/banks.py's model of shared-memory bank conflicts, and the single-channel kernel's layouts chosen with it:
the band's row pad (gpu_14_igemm_tc.c1_pad) and POOL's swizzled staging rows (gpu_14_igemm_tc_c1.cu)."""

import numpy as np
import pytest

from convbench.core.gpu import banks
from convbench.impls import gpu_14_igemm_tc as igemm

LANES = np.arange(32)


def test_distinct_banks_or_one_shared_word_take_one_wavefront():
    assert banks.wavefronts([LANES]).tolist() == [1]  # 32 words in 32 banks
    assert banks.wavefronts([np.full(32, 7)]).tolist() == [1]  # one word, broadcast
    assert banks.wavefronts([LANES * 32 + 5]).tolist() == [32]  # 32 words in one bank
    assert banks.wavefronts([LANES * 2]).tolist() == [2]  # stride 2: two words a bank
    assert banks.wavefronts([np.where(LANES < 4, LANES * 32, -1)]).tolist() == [4]  # inactive lanes cost nothing
    assert banks.wavefronts([np.full(32, -1)]).tolist() == [0]


def test_wide_accesses_are_served_in_phases():
    assert banks.wavefronts([LANES * 2], width=2).tolist() == [2]  # 64 consecutive words: two halves of 16 lanes
    assert banks.wavefronts([LANES * 4], width=4).tolist() == [4]
    assert banks.wavefronts([LANES % 8 * 4], width=4).tolist() == [4]  # the same 32 words in each quarter
    assert banks.wavefronts([LANES % 16 * 8], width=2).tolist() == [8]  # 8-word stride: 4-way in each half
    with pytest.raises(ValueError):
        banks.wavefronts([LANES], width=3)


COURSE_C1 = [(70, 5), (48, 5), (86, 7), (72, 7)]  # fa19, sp19, minidnn, fa18: (width, K)


@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("W, K", COURSE_C1 + [(33, 3), (29, 8)])
def test_each_operand_word_is_the_input_value_its_pixel_and_tap_read(W, K, pool):
    H = W
    pad = igemm.c1_pad(H, W, K, pool)
    pitch = 2 * W + pad
    words = igemm.c1_operand_words(H, W, K, pool, pitch)
    NP, OW = igemm.c1_pixels(H, W, K, pool)
    steps = K  # a filter row a k8 step: lane t reads its columns t and t + 4
    for n, row in enumerate(words):
        tile, (s, h) = n // (2 * steps), divmod(n % (2 * steps), 2)
        for lane, word in enumerate(row):
            col = (lane & 3) + 4 * h
            assert (word < 0) == (col >= K and K <= 4)
            if word < 0:
                continue
            col = 4 if col >= K else col  # past the row: column 4 (lane 0's word), weighted 0
            p = min(tile * 8 + (lane >> 2), NP - 1)
            if pool:
                q, POW = p // 4, OW // 2
                oy, ox = 2 * (q // POW) + (p >> 1 & 1), 2 * (q % POW) + (p & 1)
            else:
                oy, ox = divmod(p, OW)
            r, c = divmod(int(word), pitch)
            assert c < W and (r, c) == (oy + s, ox + col)


def test_the_pad_takes_the_pooled_rows_off_shared_banks():
    # sp19's conv1: 48-wide rows, pitch 96 == 0 (mod 32) puts the two rows of a pooled tile in the same banks
    plain = banks.wavefronts(igemm.c1_operand_words(48, 48, 5, True, 96))
    pad = igemm.c1_pad(48, 48, 5, True)
    padded = banks.wavefronts(igemm.c1_operand_words(48, 48, 5, True, 96 + pad))
    assert pad != 0 and plain.min() == 2 and plain.sum() >= 2 * padded.sum()  # every load two-way
    assert padded.max() == 1  # every load one wavefront
    for W, K in COURSE_C1:
        for pool in (False, True):
            best = igemm.c1_pad(W, W, K, pool)
            cost = [banks.wavefronts(igemm.c1_operand_words(W, W, K, pool, 2 * W + pad)).sum()
                    + banks.wavefronts(igemm.c1_store_words(W, W, 2 * W + pad)).sum() for pad in range(32)]
            assert cost[best] <= min(cost) * 1.02, (W, K, pool, best)  # the samples' scales differ a little
    stores = banks.wavefronts(igemm.c1_store_words(48, 48, 2 * 48 + 16))  # pitch == W (mod 32): no seam
    assert stores.max() == 1


def pool_stage_word(m, c, TT, swizzle=True):
    """gpu_14_igemm_tc_c1.cu's POOL staging: value c of map m at row m, column c ^ pool_swizzle(m), rows of 2 TT."""
    SPROW = 2 * TT
    return m * SPROW + (c ^ (2 * ((m * SPROW // 32) % TT)) if swizzle else c)


@pytest.mark.parametrize("TT", [1, 2, 4, 8])
def test_pooled_staging_writes_and_reads_hit_distinct_banks(TT):
    gq, t = LANES >> 2, LANES & 3
    m = gq + 8 * (t & 1)
    writes = [pool_stage_word(m, 2 * u + (t >> 1), TT) for u in range(TT)]  # one instruction per tile
    reads = [pool_stage_word(i // (2 * TT), i % (2 * TT), TT) for i in (LANES + 32 * k for k in range(TT))]
    assert banks.wavefronts(writes).max() == 1 and banks.wavefronts(reads).max() == 1
    # the swizzle only permutes a row: every (map, value) still has its own word
    cells = {pool_stage_word(mm, c, TT) for mm in range(16) for c in range(2 * TT)}
    assert cells == set(range(16 * 2 * TT))
    if TT == 4:  # the layout before the swizzle (rows of TT * 8 + 8): 4-way conflicts on every write
        before = [np.asarray(m) * (TT * 8 + 8) + 2 * u + (t >> 1) for u in range(TT)]
        assert banks.wavefronts(before).max() == 4
