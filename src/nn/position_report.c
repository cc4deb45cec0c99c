/* What the run report shows of each position kind (nn.h, tg_pe_plots): the
 * built-in rows' report functions (position.c's table names them) and the
 * dispatch from a row, so the report (src/train/report.c) draws whatever
 * the plots hold and a new kind's row is enough for its positions to be
 * shown: without a function of its own, an INPUT kind's table is drawn
 * titled with its name and about line. The plots are plain numbers;
 * turning them into the page is the report's part. */
#include "module.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Plot p: a heatmap of rows 0..T-1 of the table t [>= T, d], titled title. */
static int table_plot(tg_pe_plot *p, const char *title, const tg_tensor *t, int T) {
    int d = t->shape[1];
    *p = (tg_pe_plot){.xlabel = "encoding dimension", .ylabel = "position", .rows = T, .cols = d};
    snprintf(p->title, sizeof p->title, "%s", title);
    if (!(p->data = malloc(sizeof(double) * (size_t)T * (size_t)d))) {
        tg_set_error("pe_plots: out of memory");
        return -1;
    }
    for (int64_t i = 0; i < (int64_t)T * d; i++) p->data[i] = (double)t->data[i];
    return 0;
}

int tg__pe_report_fixed(const tg_pe_view *v, tg_pe_plot *plots) {
    char title[200];
    snprintf(title, sizeof title,
             "Fixed sinusoidal positions: P[:%d] [%d, %d], P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = "
             "cos(i / 10000^(2j/d))",
             v->T, v->T, v->table->shape[1]);
    return table_plot(plots, title, v->table, v->T) == 0 ? 1 : -1;
}

/* The learned table, and (beside_fixed) the fixed one of its size beside it. */
int tg__pe_report_learned(const tg_pe_view *v, tg_pe_plot *plots) {
    int T = v->T, d = v->table->shape[1];
    char title[200];
    snprintf(title, sizeof title, "Learned absolute positions: %s[:%d] [%d, %d]", v->table_name, T, T, d);
    if (table_plot(plots, title, v->table, T) != 0) return -1;
    if (!v->beside_fixed) return 1;
    tg_rng rng = tg_rng_new(0);
    tg_posenc *pe = tg_posenc_new(d, 0, T, &rng);
    snprintf(title, sizeof title, "Fixed sinusoidal positions: P[:%d] [%d, %d], beside the learned table", T, T, d);
    int rc = pe ? table_plot(plots + 1, title, pe->P, T) : -1;
    tg_posenc_free(pe);
    if (rc == 0) return 2;
    tg_pe_plots_free(plots, 1);
    return -1;
}

/* The first layer's a^K, one row per clipped offset. */
int tg__pe_report_relative(const tg_pe_view *v, tg_pe_plot *plots) {
    const tg_tensor *k = v->pos->relative_k;
    int clip = (k->shape[0] - 1) / 2;
    char title[200];
    snprintf(title, sizeof title,
             "Relative positions (Shaw et al.): layer 1's relative_k [%d, %d], rows: offsets -%d..%d", k->shape[0],
             k->shape[1], clip, clip);
    if (table_plot(plots, title, k, k->shape[0]) != 0) return -1;
    plots->xlabel = "dimension", plots->ylabel = "offset + clip";
    return 1;
}

/* Lines over the offsets 0..T-1: ALiBi's bias -m_h (i - j) per head; RoPE's
 * q.k of two equal vectors, the mean of cos(o theta_k), theta_k =
 * 10000^(-2k/d). */
static int offset_lines(const tg_pe_view *v, tg_pe_plot *p, bool alibi) {
    int T = v->T, nl = alibi ? v->heads : 1, dh = v->head_dim;
    *p = (tg_pe_plot){.lines = true, .ylabel = alibi ? "bias" : "score", .series = alibi ? "head %d" : "rope, d_head"};
    p->rows = nl, p->cols = T;
    snprintf(p->title, sizeof p->title, "%s",
             alibi ? "ALiBi positions: the bias -m_h (i - j) added to each head's scores"
                   : "RoPE positions: q.k of two equal vectors against their offset (mean cos)");
    if (!(p->data = malloc(sizeof(double) * (size_t)T * (size_t)nl))) {
        tg_set_error("pe_plots: out of memory");
        return -1;
    }
    for (int s = 0; s < nl; s++)
        for (int o = 0; o < T; o++) {
            double val = 0;
            if (alibi) val = -(double)v->pos->alibi[s] * o;
            for (int k = 0; !alibi && k < dh / 2; k++) val += cos(o * pow(10000.0, -2.0 * k / dh)) / (dh / 2);
            p->data[s * T + o] = val;
        }
    return 1;
}

int tg__pe_report_alibi(const tg_pe_view *v, tg_pe_plot *plots) { return offset_lines(v, plots, true); }
int tg__pe_report_rope(const tg_pe_view *v, tg_pe_plot *plots) { return offset_lines(v, plots, false); }

int tg_pe_plots(const tg_pe_view *v, tg_pe_plot *plots) {
    const tg_pe_rule *r = v ? tg_pe_rule_of(v->kind) : NULL;
    if (!r || !plots || v->T < 1) {
        tg_set_error("pe_plots: %s", !v || !plots ? "NULL argument" : !r ? "a kind without a row" : "T < 1");
        return -1;
    }
    bool table = r->where == TG_PE_AT_INPUT, inside = tg_pe_in_attention(v->kind);
    if ((table && (!v->table || v->table->ndim != 2 || v->table->shape[0] < v->T)) || (inside && !v->pos)) {
        tg_set_error("pe_plots: %s: the view lacks the %s it uses", r->name,
                     table ? "table of T rows" : "attention term");
        return -1;
    }
    int n = r->report ? r->report(v, plots) : 0;
    if (!r->report && table) {
        char title[200];
        snprintf(title, sizeof title, "%s positions (%s): %s[:%d] [%d, %d]", r->name, r->about,
                 v->table_name ? v->table_name : "P", v->T, v->T, v->table->shape[1]);
        n = table_plot(plots, title, v->table, v->T) == 0 ? 1 : -1;
    }
    if (n > TG_PE_MAX_PLOTS) {
        tg_pe_plots_free(plots, TG_PE_MAX_PLOTS);
        tg_set_error("pe_plots: %s: its report gave %d plots, at most %d", r->name, n, TG_PE_MAX_PLOTS);
        return -1;
    }
    return n;
}

void tg_pe_plots_free(tg_pe_plot *plots, int n) {
    for (int i = 0; plots && i < n; i++) {
        free(plots[i].data);
        plots[i].data = NULL;
    }
}
