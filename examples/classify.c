/* classify: a user's program on lm's saved model. It opens the model and its
 * tokenizer with one call (tg_decoder_open: the file describes itself),
 * keeps the decoder frozen and trains a small head on its features to tell
 * a property of each line of a text: does the line end with a period?
 *
 *   line -> tokenizer -> ids [B, T] (cut or padded with spaces)
 *        -> decoder's hidden states [B, T, d] (ln_f's output) -> mean over T [B, d]
 *        -> head (Linear d -> 2) -> cross-entropy with the label
 *
 * Every fifth line is held out; the program prints the held-out accuracy
 * beside the majority class's, so a head that learned nothing shows.
 *
 *   ./build/bin/lm --out out/lm && ./build/bin/classify out/lm */
#include "cli.h"
#include "tgrad.h"

static const char *const ABOUT =
    "Fine-tunes a classifier head on lm's saved model (a run folder or lm.safetensors): it tells whether a\n"
    "line of --data ends with a period, from the mean of the frozen decoder's hidden states.";

typedef struct {
    int *ids;   /* [n, T] */
    int *label; /* [n] */
    int n;
} lines;

/* Every non-empty line of text into a (held-out: every fifth line) or b. */
static int split_lines(const tg_tokenizer *tok, const unsigned char *text, size_t size, int T, lines *train,
                       lines *held) {
    int total = 0;
    for (size_t i = 0; i < size; i++) total += text[i] == '\n';
    total++;
    int64_t n;
    int *pad = tg_tokenizer_encode(tok, (const unsigned char *)" ", 1, &n);
    for (lines *l = train; l; l = l == train ? held : NULL) {
        l->ids = malloc(sizeof(int) * (size_t)total * T), l->label = malloc(sizeof(int) * (size_t)total), l->n = 0;
        if (!l->ids || !l->label) return -1;
    }
    if (!pad || n != 1) return -1;
    int k = 0;
    for (size_t at = 0, end; at < size; at = end + 1, k++) {
        for (end = at; end < size && text[end] != '\n'; end++) {}
        if (end == at) continue;
        int *ids = tg_tokenizer_encode(tok, text + at, end - at, &n);
        if (!ids) return -1;
        lines *l = k % 5 == 4 ? held : train;
        for (int t = 0; t < T; t++) l->ids[(size_t)l->n * T + t] = t < n ? ids[t] : pad[0];
        l->label[l->n++] = text[end - 1] == '.';
        free(ids);
    }
    free(pad);
    return train->n > 0 && held->n > 0 ? 0 : (tg_set_error("classify: too few lines"), -1);
}

/* The head's logits [B, 2] for rows [from, from + B) of l. */
static tg_tensor *logits(tg_decoder *m, tg_linear *head, const lines *l, int from, int B, int T) {
    tg_tensor *h = tg_decoder_hidden(m, l->ids + (size_t)from * T, B, T); /* [B, T, d] */
    return tg_linear_forward(head, tg_mean(h, 1, false));                 /* [B, d] -> [B, 2] */
}

/* The share of l's lines the head labels right. */
static double accuracy(tg_decoder *m, tg_linear *head, const lines *l, int T) {
    int right = 0;
    for (int i = 0; i < l->n; i++) {
        tg_scope_begin();
        int guess = -1;
        tg_tensor *z = logits(m, head, l, i, 1, T);
        if (z && tg_argmax(z, &guess) == 0 && guess == l->label[i]) right++;
        tg_scope_end();
    }
    return (double)right / l->n;
}

int main(int argc, char **argv) {
    const char *data = "tests/data/fortunes_excerpt.txt", *pos[1] = {NULL};
    int steps = 200, batch = 16, T = 24, seed = 1;
    double lr = 3e-3;
    cli_opt opts[] = {
        {"data", CLI_STR, &data, "a text: one example a line", 0, 0},
        {"steps", CLI_INT, &steps, "training steps of the head", 1, 1e6},
        {"batch", CLI_INT, &batch, "lines per step", 1, 4096},
        {"len", CLI_INT, &T, "tokens a line (cut, or padded with spaces)", 1, 4096},
        {"lr", CLI_REAL, &lr, "Adam learning rate of the head", 1e-8, 10},
        {"seed", CLI_INT, &seed, "random seed (the head's initialisation, the batches)", 0, 2e9},
    };
    int nopt = (int)(sizeof opts / sizeof opts[0]);
    if (cli_parse(argc, argv, "[options] MODEL", ABOUT, opts, nopt, pos, 1) != 1)
        return cli_usage_error(argv[0], "[options] MODEL", ABOUT, opts, nopt,
                               "give lm's model: a run folder or a file");
    tg_tokenizer *tok = NULL;
    tg_decoder *m = tg_decoder_open(pos[0], &tok);
    if (m && T > m->cfg.block_size) T = m->cfg.block_size;
    unsigned char *text = NULL;
    size_t size = 0;
    lines train = {0}, held = {0};
    int rc =
        m && tg_read_file(data, "classify", &text, &size) == 0 ? split_lines(tok, text, size, T, &train, &held) : -1;
    tg_rng rng = tg_rng_new((uint64_t)seed);
    tg_linear *head = rc == 0 ? tg_linear_new(m->cfg.n_embd, 2, true, &rng) : NULL;
    tg_params p;
    tg_params_init(&p);
    tg_optim_config cfg = tg_adam_config((tg_real)lr);
    tg_optim *opt = head && tg_linear_params(head, &p, "head") == 0 ? tg_optim_new(&cfg, &p) : NULL;
    if (!opt) {
        fprintf(stderr, "classify: %s\n", tg_last_error() ? tg_last_error() : "out of memory");
        return 1;
    }
    tg_params frozen; /* the decoder stays as lm trained it: no gradients into it */
    tg_params_init(&frozen);
    tg_decoder_params(m, &frozen, NULL);
    for (int i = 0; i < frozen.n; i++) tg_set_requires_grad(frozen.items[i].t, false);
    int ones = 0;
    for (int i = 0; i < held.n; i++) ones += held.label[i];
    printf("model %s: %d layers, d %d, %s tokenizer; %d lines to train on, %d held out\n", pos[0], m->cfg.n_layer,
           m->cfg.n_embd, tg_tokenizer_name(tok), train.n, held.n);
    int *x = malloc(sizeof(int) * (size_t)batch * T), *y = malloc(sizeof(int) * (size_t)batch);
    lines b = {x, y, batch};
    for (int step = 1; rc == 0 && step <= steps; step++) {
        for (int i = 0; i < batch; i++) { /* a batch of lines drawn with replacement */
            int k = (int)(tg_rng_next_u64(&rng) % (uint64_t)train.n);
            memcpy(x + (size_t)i * T, train.ids + (size_t)k * T, sizeof(int) * (size_t)T), y[i] = train.label[k];
        }
        tg_scope_begin();
        tg_optim_zero_grad(opt);
        tg_tensor *loss = tg_cross_entropy(logits(m, head, &b, 0, batch, T), y, NULL, -1);
        rc = loss && tg_backward(loss) == 0 ? 0 : -1;
        if (rc == 0) tg_optim_step(opt);
        if (rc == 0 && (step % 50 == 0 || step == steps)) printf("step %4d  loss %.4f\n", step, (double)loss->data[0]);
        tg_scope_end();
    }
    if (rc == 0) {
        double majority = (double)(ones > held.n - ones ? ones : held.n - ones) / held.n;
        printf("held-out accuracy %.1f%% (the majority class: %.1f%%)\n", 100 * accuracy(m, head, &held, T),
               100 * majority);
    } else {
        fprintf(stderr, "classify: %s\n", tg_last_error());
    }
    free(x), free(y), free(train.ids), free(train.label), free(held.ids), free(held.label), tg_sys_free(text);
    tg_params_free(&frozen), tg_params_free(&p), tg_optim_free(opt), tg_linear_free(head);
    tg_decoder_free(m), tg_tokenizer_free(tok);
    return rc == 0 ? 0 : 1;
}
