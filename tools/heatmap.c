/* heatmap: draws a matrix from a .npy file, or a named tensor of a
 * safetensors checkpoint, as a PNG heatmap with tgrad's figure style.
 * A tensor with more than two dimensions is drawn as its last two, at the
 * leading index given by --index (flattened over the leading axes). */
#include <math.h>
#include "cli.h"
#include "tgrad.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int main(int argc, char **argv) {
    const char *tensor = NULL, *out = "heatmap.png", *cmap = "auto", *title = NULL;
    const char *xlabel = "column", *ylabel = "row";
    int index = 0;
    cli_opt opts[] = {
        {"tensor", CLI_STR, &tensor, "name of the tensor in a safetensors file", 0, 0},
        {"index", CLI_INT, &index, "which leading slice of a tensor with more than 2 dims", 0, 1e9},
        {"out", CLI_STR, &out, "PNG to write", 0, 0},
        {"cmap", CLI_STR, &cmap, "blues, reds, rdbu (signed, centred on 0), viridis, or auto", 0, 0},
        {"title", CLI_STR, &title, "title (default: the tensor's name)", 0, 0},
        {"xlabel", CLI_STR, &xlabel, "x axis label", 0, 0},
        {"ylabel", CLI_STR, &ylabel, "y axis label", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *synopsis = "FILE.npy | FILE.safetensors --tensor NAME [options]";
    const char *about = "Draws a matrix as a heatmap PNG with a colour bar.";
    const char *pos[1] = {NULL};
    if (cli_parse(argc, argv, synopsis, about, opts, nopt, pos, 1) != 1) {
        return cli_usage_error(argv[0], synopsis, about, opts, nopt, "give one input file");
    }
    tg_heatmap_opts ho = {0};
    if (strcmp(cmap, "blues") == 0)
        ho.cmap = TG_CMAP_BLUES;
    else if (strcmp(cmap, "reds") == 0)
        ho.cmap = TG_CMAP_REDS;
    else if (strcmp(cmap, "rdbu") == 0)
        ho.cmap = TG_CMAP_RDBU;
    else if (strcmp(cmap, "viridis") == 0)
        ho.cmap = TG_CMAP_VIRIDIS;
    else if (strcmp(cmap, "auto") != 0) {
        return cli_usage_error(argv[0], synopsis, about, opts, nopt, "--cmap: unknown colour map '%s'", cmap);
    }

    int ndim = 0, shape[TG_MAX_DIMS];
    tg_real *values = NULL;
    tg_tensor *t = NULL;
    tg_safetensors st;
    bool have_st = false;
    if (ends_with(pos[0], ".npy") && tensor)
        return cli_usage_error(argv[0], synopsis, about, opts, nopt,
                               "--tensor names a tensor of a safetensors file; %s holds one array", pos[0]);
    if (ends_with(pos[0], ".npy")) {
        t = tg_npy_load(pos[0]);
        if (!t) {
            fprintf(stderr, "heatmap: %s\n", tg_last_error());
            return 1;
        }
        ndim = t->ndim;
        memcpy(shape, t->shape, sizeof shape);
        values = t->data;
        if (!title) title = pos[0];
    } else {
        if (!tensor) {
            fprintf(stderr, "%s: a safetensors file needs --tensor NAME (list them with inspect)\n", argv[0]);
            return 2;
        }
        if (tg_safetensors_open(pos[0], &st) != 0) {
            fprintf(stderr, "heatmap: %s\n", tg_last_error());
            return 1;
        }
        have_st = true;
        int i = tg_safetensors_find(&st, tensor);
        if (i < 0) {
            fprintf(stderr, "heatmap: %s: no tensor named '%s'\n", pos[0], tensor);
            tg_safetensors_close(&st);
            return 1;
        }
        ndim = st.entries[i].ndim;
        memcpy(shape, st.entries[i].shape, sizeof shape);
        values = tg_sys_alloc(sizeof(tg_real) * (size_t)(st.entries[i].numel ? st.entries[i].numel : 1));
        if (!values || tg_safetensors_read(&st, i, values) != 0) {
            fprintf(stderr, "heatmap: %s\n", tg_last_error());
            tg_safetensors_close(&st);
            return 1;
        }
        if (!title) title = tensor;
    }
    int rows = ndim >= 2 ? shape[ndim - 2] : 1, cols = ndim >= 1 ? shape[ndim - 1] : 1;
    int64_t area = (int64_t)rows * cols;
    int64_t slices = area > 0 ? tg_numel(ndim, shape) / area : 0;
    int rc = 0;
    if (index >= slices || rows * cols == 0) {
        fprintf(stderr, "heatmap: --index %d out of range: the tensor has %lld slices of %dx%d\n", index,
                (long long)slices, rows, cols);
        rc = 1;
    } else {
        float *m = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
        bool signed_values = false;
        for (int64_t k = 0; k < (int64_t)rows * cols; k++) {
            m[k] = (float)values[(int64_t)index * rows * cols + k];
            signed_values |= m[k] < 0;
        }
        if (strcmp(cmap, "auto") == 0) ho.cmap = signed_values ? TG_CMAP_RDBU : TG_CMAP_BLUES;
        ho.title = title;
        ho.xlabel = xlabel;
        ho.ylabel = ylabel;
        if (tg_viz_heatmap(out, m, rows, cols, &ho) != 0) {
            fprintf(stderr, "heatmap: %s\n", tg_viz_last_error());
            rc = 1;
        } else
            printf("wrote %s (%dx%d)\n", out, rows, cols);
        free(m);
    }
    if (have_st) {
        tg_sys_free(values);
        tg_safetensors_close(&st);
    }
    tg_free(t);
    return rc;
}
