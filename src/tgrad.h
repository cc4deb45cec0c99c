/* tgrad: tensors, reverse-mode autograd and the self-attention modules of
 * d2l, in C. Include this one header. */
#ifndef TGRAD_H
#define TGRAD_H
#include "tensor/tensor.h"
#include "autograd/autograd.h"
#include "tensor/params.h"
#include "nn/nn.h"
#include "nn/checkpoint.h"
#include "nn/npy.h"
#include "viz/viz.h"
#endif
