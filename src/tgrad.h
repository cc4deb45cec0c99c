/** @file
 * tgrad: tensors, reverse-mode autograd and the self-attention modules of
 * d2l, in C. Include this one header. */
#ifndef TGRAD_H
#define TGRAD_H
#include "tensor/tensor.h"
#include "tensor/number.h"
#include "tensor/profile.h"
#include "autograd/autograd.h"
#include "tensor/params.h"
#include "nn/nn.h"
#include "nn/decoder.h"
#include "train/train.h"
#include "train/run.h"
#include "train/bpe.h"
#include "train/report.h"
#include "train/figure.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "io/npy.h"
#include "io/checkpoint.h"
#include "viz/viz.h"
#include "dist/dist.h"
#endif
