/* tgrad-report DIR: rebuilds DIR/report.html from a run folder alone.
 *
 *   settings and curves   DIR/train_state.safetensors's metadata, DIR/metrics.jsonl
 *   samples               DIR/samples.jsonl (lm writes one at each evaluation)
 *   lm's attention        the decoder rebuilt from the checkpoint (tg_decoder_open, the
 *                         call lm itself makes) over the first validation window
 *                         of its token file: DIR/tokens.npy, or --data's .npy
 *   reverse's attention   the encoder rebuilt from the checkpoint (tg_encoder_open, the
 *                         call reverse itself makes)
 *                         over the first held-out sequence, and its positions
 *
 * A run of lm is told by its checkpoint's metadata (nanoGPT's n_layer and
 * tgrad's tokenizer), a run of reverse by its task (reverse or sort) and
 * ffn; any other run gets the settings and curves. */
#include "cli.h"
#include "tgrad.h"

static const char *const ABOUT =
    "Rebuilds DIR/report.html, the run's self-contained page, from the run folder: settings and\n"
    "curves from its checkpoint and metrics.jsonl, the samples, and for an lm run the attention of\n"
    "every layer and head over the first validation window and the positional encoding in use.";

/* An lm run: the model from the checkpoint, the window from its token file. */
static int lm_page(const char *dir, const char *out, const tg_safetensors *st) {
    char data[4096] = "", v[32];
    int64_t B = 32, seed = 1, step = 0; /* step: the samples up to the checkpoint's, as the curves */
    if (tg_safetensors_meta(st, "batch", v, sizeof v) > 0 && tg_parse_int64(v, &B) != 0) B = 0;
    if (tg_safetensors_meta(st, "seed", v, sizeof v) > 0 && tg_parse_int64(v, &seed) != 0) seed = -1;
    if (tg_safetensors_meta(st, "step", v, sizeof v) > 0 && tg_parse_int64(v, &step) != 0) step = -1;
    if (seed < 0 || step < 0) {
        tg_set_error("%s: metadata 'seed' or 'step' is not a whole number", dir);
        return -1;
    }
    long n = tg_safetensors_meta(st, "data", data, sizeof data);
    bool npy = n > 4 && n < (long)sizeof data && strcmp(data + n - 4, ".npy") == 0;
    char *tokens = npy ? strdup(data) : tg_run_path(dir, "tokens.npy");
    tg_tokenizer *tok = NULL;
    tg_decoder *m = tg_decoder_open(dir, &tok);
    tg_token_data *d = m && tokens ? tg_token_data_open(tokens, 0.1, (uint64_t)seed) : NULL;
    int T = m ? m->cfg.block_size : 0;
    if (B < 1 || B > 4096) B = 1;
    if (d && tg_token_data_val_batches(d, (int)B, T) < 1) B = 1;
    int rc = d ? tg_decoder_report(dir, out, m, tok, d, (int)B, step) : -1;
    tg_tokenizer_free(tok);
    free(tokens);
    tg_token_data_close(d);
    tg_decoder_free(m);
    return rc;
}

/* A reverse run: the model from the checkpoint, its page over the first
 * sequence of the run's held-out set (tg_encoder_task_report: the seed's). */
static int reverse_page(const char *dir, const char *out, const char *state) {
    tg_encoder_model m;
    if (tg_encoder_open(state, &m) != 0) return -1;
    char v[32];
    int64_t seed = 1;
    tg_safetensors st;
    int rc = tg_safetensors_open(state, &st);
    if (rc == 0) {
        if (tg_safetensors_meta(&st, "seed", v, sizeof v) > 0 &&
            (tg_parse_int64(v, &seed) != 0 || seed < 0 || seed > 2000000000)) {
            tg_set_error("%s: metadata 'seed': '%s' is not a whole number in [0, 2000000000]", state, v);
            rc = -1;
        }
        tg_safetensors_close(&st);
    }
    if (rc == 0) rc = tg_encoder_task_report(dir, out, &m, (uint64_t)seed);
    tg_encoder_model_free(&m);
    return rc;
}

int main(int argc, char **argv) {
    const char *out = NULL, *pos[1] = {NULL};
    cli_opt opts[] = {{"out", CLI_STR, &out, "write the page here instead of DIR/report.html", 0, 0}};
    int n = cli_parse(argc, argv, "DIR", ABOUT, opts, 1, pos, 1);
    if (n != 1) return cli_usage_error(argv[0], "DIR", ABOUT, opts, 1, "give one run folder");
    const char *dir = pos[0];
    char *state = tg_run_path(dir, "train_state.safetensors");
    tg_safetensors st;
    if (!state || tg_safetensors_open(state, &st) != 0) {
        fprintf(stderr, "tgrad-report: %s: not a run folder (%s)\n", dir, tg_last_error());
        free(state);
        return 1;
    }
    free(state);
    char v[16];
    bool lm =
        tg_safetensors_meta(&st, "n_layer", v, sizeof v) > 0 && tg_safetensors_meta(&st, "tokenizer", v, sizeof v) > 0;
    bool reverse = tg_safetensors_meta(&st, "ffn", v, sizeof v) > 0 &&
                   tg_safetensors_meta(&st, "task", v, sizeof v) > 0 && tg_seq_task_name(v);
    tg_clear_error(); /* not a task: the run's own page */
    int rc;
    if (lm) {
        rc = lm_page(dir, out, &st);
    } else if (reverse) {
        char *state = tg_run_path(dir, "train_state.safetensors");
        rc = state ? reverse_page(dir, out, state) : -1;
        free(state);
    } else {
        char *page = out ? NULL : tg_run_path(dir, "report.html");
        tg_report *rep = tg_report_new();
        rc = rep && (out || page) ? tg_report_add_run(rep, dir) : -1;
        if (rc == 0) rc = tg_report_add_samples(rep, dir, 0);
        if (rc == 0) rc = tg_report_write(rep, out ? out : page, dir);
        tg_report_free(rep);
        free(page);
    }
    tg_safetensors_close(&st);
    if (rc != 0) {
        fprintf(stderr, "tgrad-report: %s\n", tg_last_error() ? tg_last_error() : "out of memory");
        return 1;
    }
    char *page = out ? NULL : tg_run_path(dir, "report.html");
    printf("wrote %s\n", out ? out : page);
    free(page);
    tg_release_all();
    return 0;
}
