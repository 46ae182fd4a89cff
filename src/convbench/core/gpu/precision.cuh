// The PREC codes a kernel compiles with (-DPREC=<code>): the table of convbench/core/precision.py.
#pragma once
#define PREC_TF32X3 0  // 3xTF32: fp32-accurate, three TF32 products per multiply-add
#define PREC_TF32 1    // TF32 operands
#define PREC_FP16 2    // FP16 operands
#define PREC_BF16 3    // BF16 operands
#define PREC_FP16X3 4  // 3xFP16: fp32-accurate, block-scaled fp16 high + low parts
// 16-bit operands (FP16, BF16, 3xFP16): k16 mma steps; the others take TF32 operands (k8 steps)
#define PREC_16BIT(p) ((p) == PREC_FP16 || (p) == PREC_BF16 || (p) == PREC_FP16X3)
