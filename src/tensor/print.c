/* tg_print: PyTorch's layout, "tensor([[ 0.1000, -2.0000], ...])", with the
 * middle of each dimension elided ("...") when the tensor has more than 1000
 * elements, and the shape at the end. */
#include "tensor.h"

#include <math.h>
#include <string.h>
#include "half.h"

#define EDGE      3    /* items kept at each end of an elided dimension */
#define THRESHOLD 1000 /* as torch's print options */

typedef struct {
    FILE *f;
    const tg_tensor *t;
    bool elide, sci;
    int width;
} printer;

/* Element i as a number, whatever the storage (a bf16 tensor's widened). */
static tg_real at(const tg_tensor *t, int64_t i) {
    return t->dtype == TG_DTYPE_BF16 ? (tg_real)tg__bf16_to_float(t->bf16[i]) : t->data[i];
}

static void print_value(const printer *p, tg_real v) {
    if (p->sci)
        fprintf(p->f, "%*.4e", p->width, (double)v);
    else
        fprintf(p->f, "%*.4f", p->width, (double)v);
}

/* Prints dimension dim starting at element offset; indent is the column
 * where this dimension's '[' sits. */
static void print_dim(const printer *p, int dim, int64_t offset, int64_t stride, int indent) {
    const tg_tensor *t = p->t;
    int n = t->shape[dim];
    int64_t inner = stride / (n ? n : 1);
    fputc('[', p->f);
    for (int i = 0; i < n; i++) {
        if (p->elide && n > 2 * EDGE && i == EDGE) {
            if (dim == t->ndim - 1)
                fputs(" ...,", p->f);
            else
                fprintf(p->f, "\n%*s...,\n%*s", indent + 1, "", indent + 1, "");
            i = n - EDGE;
        }
        if (dim == t->ndim - 1)
            print_value(p, at(t, offset + i));
        else
            print_dim(p, dim + 1, offset + i * inner, inner, indent + 1);
        if (i < n - 1) {
            fputc(',', p->f);
            if (dim == t->ndim - 1)
                fputc(' ', p->f);
            else {
                for (int k = 0; k < t->ndim - 1 - dim; k++) fputc('\n', p->f);
                fprintf(p->f, "%*s", indent + 1, "");
            }
        }
    }
    fputc(']', p->f);
}

void tg_fprint(FILE *f, const tg_tensor *t) {
    char buf[64];
    if (!t) {
        fprintf(f, "tensor(NULL)\n");
        return;
    }
    printer p = {f, t, t->size > THRESHOLD, false, 7};
    double amax = 0, amin = INFINITY;
    for (int64_t i = 0; i < t->size; i++) {
        double a = fabs((double)at(t, i));
        if (isfinite(a)) {
            if (a > amax) amax = a;
            if (a > 0 && a < amin) amin = a;
        }
    }
    p.sci = amax >= 1e5 || (amin < 1e-4 && amax > 0);
    /* As torch: columns as wide as the widest value, sign included. */
    p.width = 1;
    for (int64_t i = 0; i < t->size; i++) {
        int w = p.sci ? snprintf(NULL, 0, "%.4e", (double)at(t, i)) : snprintf(NULL, 0, "%.4f", (double)at(t, i));
        if (w > p.width) p.width = w;
    }
    fputs("tensor(", f);
    if (t->ndim == 0)
        print_value(&p, at(t, 0));
    else
        print_dim(&p, 0, 0, t->size, 7);
    fprintf(f, ", shape=%s%s%s)\n", tg_tshape(buf, t), t->dtype == TG_DTYPE_BF16 ? ", dtype=bfloat16" : "",
            t->requires_grad ? ", requires_grad=True" : "");
}

void tg_print(const tg_tensor *t) { tg_fprint(stdout, t); }
