"""HEAD's bank model and pad for the single-channel kernel (its tap order), for HEAD's kernel in c1_ab.py."""
import numpy as np

from convbench.core.gpu import banks
from convbench.impls.gpu_14_igemm_tc import C1_SAMPLE_ROWS, C1_SAMPLE_TILES, c1_pixels, c1_store_words


def c1_operand_words(H, W, K, pool: bool, pitch: int) -> np.ndarray:
    """The single-channel kernel's B-operand loads (hi parts; the lo parts are the same IW words further) over the
    first tiles of an image, as the kernel addresses them: one row of 32 lane words per (tile, k8 step, half)."""
    NP, OW = c1_pixels(H, W, K, pool)
    KK = K * K
    tiles = np.arange(min(-(-NP // 8), C1_SAMPLE_TILES))
    gq, t = np.arange(32) >> 2, np.arange(32) & 3
    p = np.minimum(tiles[:, None] * 8 + gq, NP - 1)  # (tiles, lanes)
    if pool:
        q, POW = p >> 2, OW // 2
        row, col = 2 * (q // POW) + ((p >> 1) & 1), 2 * (q % POW) + (p & 1)
    else:
        row, col = p // OW, p % OW
    at = row * pitch + col
    out = []
    for s in range(-(-KK // 8)):
        for h in range(2):
            tap = 8 * s + t + 4 * h
            off = np.where(tap < KK, tap // K * pitch + tap % K, -1)
            out.append(np.where(off >= 0, at + off, -1))
    return np.stack(out, axis=1).reshape(-1, 32)



def c1_pad(H, W, K, pool: bool = False) -> int:
    """Words that pad each converted row of the band (the kernel's PPAD, 0..31): the fewest wavefronts in
    core/gpu/banks.py's model of an image's B-operand loads and band stores, each sample scaled to the whole image
    (ties: the smallest pad). Pooled tiles read 2 x 4 pixels of two rows, so a pitch == 0 (mod 32) puts both rows in
    the same banks; a pitch == W (mod 32) stores the band's rows without a seam."""
    T8 = -(-c1_pixels(H, W, K, pool)[0] // 8)

    def cost(pad):
        pitch = 2 * W + pad
        loads = banks.wavefronts(c1_operand_words(H, W, K, pool, pitch)).sum() * T8 / min(T8, C1_SAMPLE_TILES)
        stores = banks.wavefronts(c1_store_words(H, W, pitch)).sum() * H / min(H, C1_SAMPLE_ROWS)
        return loads + stores

    return min(range(32), key=lambda pad: (cost(pad), pad))


