/* Picking tokens from logits: argmax (greedy decoding) and sampling with a
 * temperature and a top-k cut, as nanoGPT's generate:
 *   logits / temperature -> keep the values >= the k-th largest
 *   -> softmax -> one draw (torch.multinomial).
 * The draw inverts the CDF with one uniform number u of the generator:
 * the token is the first i with p_0 + ... + p_i > u. */
#include "decoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows of x over its last axis: count and length; false with an error. */
static bool rows_of(const char *op, const tg_tensor *x, const int *out, int64_t *rows, int *n) {
    char b[64];
    if (!x || !out) {
        tg_set_error("%s: NULL %s", op, !x ? "input" : "output");
        return false;
    }
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1) {
        tg_set_error("%s: input %s has no last axis to choose along", op, tg_tshape(b, x));
        return false;
    }
    *n = x->shape[x->ndim - 1];
    *rows = x->size / *n;
    return true;
}

static int argmax_row(const tg_real *r, int n) {
    int best = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(r[i])) return i; /* NaN is the largest, as torch.argmax */
        if (r[i] > r[best]) best = i;
    }
    return best;
}

int tg_argmax(const tg_tensor *x, int *out) {
    int64_t rows;
    int n;
    if (!rows_of("argmax", x, out, &rows, &n)) return -1;
    for (int64_t r = 0; r < rows; r++) out[r] = argmax_row(x->data + r * n, n);
    return 0;
}

static int desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int tg_sample(const tg_tensor *x, tg_real temperature, int top_k, tg_rng *rng, int *out) {
    int64_t rows;
    int n;
    if (!rows_of("sample", x, out, &rows, &n)) return -1;
    if (!(temperature >= 0) || isinf((double)temperature)) { /* inf would make every logit, -inf too, equal */
        tg_set_error("sample: temperature %g must be 0 (greedy) or positive and finite", (double)temperature);
        return -1;
    }
    if (temperature == 0) return tg_argmax(x, out);
    if (!rng) {
        tg_set_error("sample: NULL rng");
        return -1;
    }
    bool cut = top_k > 0 && top_k < n;
    double *p = tg_sys_alloc(sizeof(double) * (size_t)n * (cut ? 2 : 1));
    if (!p) {
        tg_set_error("sample: out of memory");
        return -1;
    }
    int rc = 0;
    for (int64_t r = 0; r < rows && rc == 0; r++) {
        const tg_real *row = x->data + r * n;
        double max = -INFINITY, kth = -INFINITY;
        for (int i = 0; i < n; i++) {
            if (!isfinite(row[i]) && !(isinf(row[i]) && row[i] < 0)) {
                tg_set_error("sample: logit %d of row %lld is %g", i, (long long)r, (double)row[i]);
                rc = -1;
                break;
            }
            if (row[i] > max) max = row[i];
        }
        if (rc) break;
        if (max == -INFINITY) { /* nothing can be drawn: every logit is -inf */
            tg_set_error("sample: every logit of row %lld is -inf", (long long)r);
            rc = -1;
            break;
        }
        if (cut) { /* the k-th largest value: values below it are dropped */
            double *s = p + n;
            for (int i = 0; i < n; i++) s[i] = row[i];
            qsort(s, (size_t)n, sizeof *s, desc);
            kth = s[top_k - 1];
        }
        /* softmax((x - max) / temperature) over the kept values */
        double sum = 0;
        for (int i = 0; i < n; i++) {
            p[i] = row[i] >= kth ? exp(((double)row[i] - max) / (double)temperature) : 0;
            sum += p[i];
        }
        double u = tg_rng_next_uniform(rng) * sum, acc = 0;
        int pick = -1;
        for (int i = 0; i < n; i++) {
            if (p[i] == 0) continue;
            pick = i; /* the last kept token, should rounding leave acc <= u */
            acc += p[i];
            if (acc > u) break;
        }
        out[r] = pick;
    }
    tg_sys_free(p);
    return rc;
}
