/* attention_basics: attention worked by hand, then by tgrad.
 *
 *   1. The seed blog post's first example: one query against three keys,
 *      scaled dot product, softmax(Q K^T / sqrt(d)) V, and the "sparse
 *      softmax" (sparsemax) that cuts small weights to exactly zero.
 *   2. Its second example: self-attention over "I have a pen", Q = K = V.
 *   3. d2l's multi-head attention shape check: 100 hiddens, 5 heads,
 *      batch 2, 4 queries, 6 key-value pairs, valid_lens [3, 2] -> (2, 4, 100).
 * Prints every intermediate and draws the weights. */
#include "cli.h"
#include "tgrad.h"

static void show(const char *label, const tg_tensor *t) {
    printf("%s\n", label);
    tg_print(t);
}

/* Draws softmax and sparsemax weights side by side. */
static int draw_pair(const char *path, const char *title, const tg_tensor *soft, const tg_tensor *sparse,
                     const char *xlabel, const char *ylabel) {
    const char *titles[2] = {"softmax", "sparsemax"};
    tg_heatmap_opts ho = {.title = title, .xlabel = xlabel, .ylabel = ylabel, .cmap = TG_CMAP_BLUES, .shared_scale = 1};
    int rc = tg_figure_heatmap_grid(path, 1, 2, (const tg_tensor *const[]){soft, sparse}, titles, &ho);
    if (rc != 0)
        fprintf(stderr, "attention_basics: %s\n", tg_last_error());
    else
        printf("wrote %s\n", path);
    return rc != 0;
}

int main(int argc, char **argv) {
    const char *out = "out";
    cli_opt opts[] = {{"out", CLI_STR, &out, "directory for the PNG files", 0, 0}};
    cli_parse(argc, argv, "[options]",
              "Works the attention formula through two small examples and d2l's\n"
              "multi-head attention shape check.",
              opts, 1, NULL, 0);
    if (cli_ensure_dir(out) != 0) {
        fprintf(stderr, "attention_basics: cannot create directory %s\n", out);
        return 1;
    }
    char path[4200];
    int rc = 0;
    tg_scope_begin();

    /* ---- 1. One query, three keys (K = V) ---- */
    printf("== Example 1: scaled dot-product attention, one query, three key-value pairs\n");
    tg_tensor *Q = tg_from_array(TG_SHAPE(1, 4), (tg_real[]){1, -2, 3, -4});
    tg_tensor *K = tg_from_array(TG_SHAPE(3, 4), (tg_real[]){1, -2, 3, -4, -8, 7, 6, -5, 10, 9, 12, 11});
    show("Q K^T (the post prints 42 for the first score; 1+4+9+16 = 30):", tg_score_dot(Q, K));
    tg_tensor *S = tg_score_scaled_dot(Q, K);
    show("Q K^T / sqrt(4):", S);
    tg_tensor *W = tg_softmax(S);
    show("softmax weights: the first key, equal to Q, takes almost all:", W);
    show("output = weights @ V, close to Q = (1, -2, 3, -4):", tg_matmul(W, K));
    tg_tensor *S3 = tg_reshape(S, TG_SHAPE(1, 1, 3));
    tg_tensor *Wsp = tg_sparsemax(S3, (tg_mask){0});
    show("sparsemax weights: exactly one-hot", Wsp);
    show("output with sparsemax: exactly Q", tg_matmul(tg_reshape(Wsp, TG_SHAPE(1, 3)), K));
    snprintf(path, sizeof path, "%s/attention_example1.png", out);
    rc |= draw_pair(path, "Example 1: one query, three keys", W, Wsp, "Key", "Query");

    /* ---- 2. Self-attention over "I have a pen" ---- */
    printf("\n== Example 2: self-attention over \"I have a pen\" (Q = K = V)\n");
    tg_tensor *M =
        tg_from_array(TG_SHAPE(1, 4, 4), (tg_real[]){1, 0.5, 0, 0, 0.5, 1, 0, 0.5, 0, 0, 1, 0.5, 0, 0.5, 0.5, 1});
    tg_tensor *D = tg_score_dot(M, M);
    show("Q K^T:", D);
    tg_tensor *W2 = tg_softmax(D);
    show("softmax(Q K^T), the weights the post prints (it does not divide by sqrt(4)):", W2);
    show("output, as the post's table (\"I\" and \"have\", \"a\" and \"pen\" pair up):", tg_matmul(W2, M));
    tg_dot_attention *att = tg_dot_attention_new(0, NULL);
    show("with the 1/sqrt(d) scaling of DotProductAttention, the output is:",
         tg_dot_attention_forward(att, M, M, M, (tg_mask){0}));
    tg_tensor *W2sp = tg_sparsemax(D, (tg_mask){0});
    show("sparsemax(Q K^T): unrelated words get exactly zero weight", W2sp);
    snprintf(path, sizeof path, "%s/attention_example2.png", out);
    rc |= draw_pair(path, "Example 2: \"I have a pen\" (0 I, 1 have, 2 a, 3 pen)", W2, W2sp, "Key word", "Query word");

    /* ---- 3. d2l's multi-head attention ---- */
    printf("\n== d2l: multi-head attention\n");
    tg_rng rng = tg_rng_new(0);
    int num_hiddens = 100, num_heads = 5, batch = 2, num_queries = 4, num_kvpairs = 6;
    tg_scope_end(); /* the module's parameters are persistent: make them outside any scope */
    tg_mha *mha = tg_mha_new(num_hiddens, num_hiddens, num_hiddens, num_hiddens, num_heads, 0.5, false, &rng);
    tg_mha_train(mha, false);
    tg_mha_record_attention(mha, true);
    tg_scope_begin();
    tg_tensor *X = tg_ones(TG_SHAPE(batch, num_queries, num_hiddens));
    tg_tensor *Y = tg_ones(TG_SHAPE(batch, num_kvpairs, num_hiddens));
    tg_mask valid = {.lens = (const int[]){3, 2}, .lens_ndim = 1};
    tg_tensor *O = tg_mha_forward(mha, X, Y, Y, valid);
    if (!O) {
        fprintf(stderr, "attention_basics: %s\n", tg_last_error());
        return 1;
    }
    printf("attention(X, Y, Y, valid_lens).shape = (%d, %d, %d)\n", O->shape[0], O->shape[1], O->shape[2]);
    const tg_tensor *hw = tg_mha_attention_weights(mha, 0); /* [batch, Q, K] for head 0 */
    if (!hw) {
        fprintf(stderr, "attention_basics: %s\n", tg_last_error());
        return 1;
    }
    printf("per-head weights: (%d, %d, %d), zero past each valid length\n", num_heads * hw->shape[0], hw->shape[1],
           hw->shape[2]);
    tg_scope_end();
    tg_mha_free(mha);
    tg_dot_attention_free(att);
    tg_release_all();
    return rc;
}
