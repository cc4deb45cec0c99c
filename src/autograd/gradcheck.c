/* Gradient checking, as torch.autograd.gradcheck: the analytic gradient from
 * backward() against central differences
 *     dL/dx_j ~ (L(x + eps e_j) - L(x - eps e_j)) / (2 eps),   error O(eps^2),
 * where L = sum(f(x) * R) with R a fixed random tensor, so that every output
 * element takes part. Run it in the double build: in float, rounding error
 * of about 1e-7 / eps swamps the comparison. */
#include "autograd.h"

#include <math.h>
#include <string.h>

/* L(x) = sum f(x) * R, evaluated in its own scope without a graph. */
static bool eval_projected(tg_fn f, tg_tensor *const *in, int n, void *ctx, const tg_tensor *R, double *out) {
    tg_scope_begin();
    bool prev = tg_set_grad_enabled(false);
    tg_tensor *y = f(in, n, ctx);
    tg_set_grad_enabled(prev);
    bool ok = y && y->size == R->size;
    double s = 0;
    if (ok)
        for (int64_t k = 0; k < y->size; k++) s += (double)y->data[k] * (double)R->data[k];
    tg_scope_end();
    *out = s;
    return ok;
}

bool tg_gradcheck(tg_fn f, tg_tensor *const *in, int n, void *ctx, double eps, double tol, tg_gradcheck_result *res) {
    tg_gradcheck_result r = {0, 0, -1, -1, 0};
    if (!f || !in || n <= 0) {
        tg_set_error("gradcheck: no function or no inputs");
        return false;
    }
    if (tg_any_null("gradcheck", n, (const tg_tensor *const *)in)) return false;
    tg_scope_begin();
    bool ok = false;
    for (int i = 0; i < n; i++) tg_zero_grad(in[i]);
    tg_tensor *y = f(in, n, ctx);
    if (!y) goto done;
    if (!y->requires_grad) {
        tg_set_error("gradcheck: the output does not depend on an input that requires grad");
        goto done;
    }
    tg_rng rng = tg_rng_new(20240601);
    tg_tensor *R = tg_empty_arena(y->ndim, y->shape);
    tg_fill_normal(R, 0, 1, &rng);
    for (int i = 0; i < n; i++) /* an input an op made keeps its gradient through tg_backward_seed */
        if (in[i]->node && in[i]->requires_grad) tg_retain_grad(in[i]);
    if (tg_backward_seed(y, R) != 0) goto done;
    ok = true;
    for (int i = 0; i < n && ok; i++) {
        tg_tensor *x = in[i];
        if (!x->requires_grad) continue;
        for (int64_t j = 0; j < x->size; j++) {
            double analytic = x->grad ? (double)x->grad->data[j] : 0.0;
            tg_real orig = x->data[j];
            double lp, lm;
            x->data[j] = orig + (tg_real)eps;
            ok = eval_projected(f, in, n, ctx, R, &lp);
            x->data[j] = orig - (tg_real)eps;
            ok = ok && eval_projected(f, in, n, ctx, R, &lm);
            x->data[j] = orig;
            if (!ok) {
                tg_set_error("gradcheck: the function failed on a perturbed input");
                break;
            }
            double numeric = (lp - lm) / (2 * eps);
            double abs_err = fabs(analytic - numeric);
            double scale = fmax(fmax(fabs(analytic), fabs(numeric)), 1e-2);
            double rel = abs_err / scale;
            if (isnan(rel)) rel = abs_err = INFINITY; /* a NaN gradient is the worst error */
            if (rel > r.max_rel_err || r.worst_input < 0) {
                r.max_rel_err = rel;
                r.worst_input = i;
                r.worst_index = j;
            }
            if (abs_err > r.max_abs_err) r.max_abs_err = abs_err;
            r.checked++;
        }
    }
done:
    tg_scope_end();
    if (res) *res = r;
    if (ok && r.max_rel_err > tol) {
        tg_set_error("gradcheck: max relative error %.3g > tolerance %.3g (input %d, entry %lld)%s", r.max_rel_err, tol,
                     r.worst_input, (long long)r.worst_index,
                     sizeof(tg_real) < 8 ? "; this is the float build, where central differences are too coarse "
                                           "for tight tolerances: use the double build (make DOUBLE=1, pkg-config "
                                           "tgrad-double)"
                                         : "");
        return false;
    }
    return ok;
}
