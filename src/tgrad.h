/** @file
 * tgrad: a C11 training framework. Tensors and reverse-mode autograd with a
 * gradient check for every op; the modules of d2l's chapter "Self-Attention
 * and Positional Encoding", Transformer encoders and a GPT-2 decoder;
 * training runs that are folders (typed settings, checkpoints, resume, a
 * report page), optimizers, BPE tokenizers identical to tiktoken, bf16
 * mixed precision, data parallelism over MPI, and PNG figures. Include this
 * one header. */
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
#include "train/model_file.h"
#include "train/report.h"
#include "train/figure.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "io/npy.h"
#include "io/checkpoint.h"
#include "viz/viz.h"
#include "distributed/dist.h"
#endif
