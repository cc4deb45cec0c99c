/* Files that describe themselves (train/model_file.h): the tokenizer object
 * (bytes or BPE) and a decoder opened from its file alone, with the
 * tokenizer its metadata carries; a token file tied to its vocabulary. */
#include <criterion/criterion.h>

#include "test_util.h"
#include "io_test_util.h"

TestSuite(model_file, .fini = cleanup);

static const unsigned char TEXT[] = "Hello, world! Hello again, world.";
#define TEXT_N (sizeof TEXT - 1)

/* A BPE of vocab ids trained on the committed fortunes excerpt. */
static tg_tokenizer *trained(int vocab) {
    size_t n;
    unsigned char *text = read_all(TG_SRC_DIR "/tests/data/fortunes_excerpt.txt", &n);
    tg_tokenizer *t = tg_tokenizer_from_bpe(tg_bpe_train(text, n, vocab, NULL, NULL));
    free(text);
    cr_assert_not_null(t, "%s", tg_last_error());
    cr_assert_eq(tg_tokenizer_vocab_size(t), vocab);
    return t;
}

Test(model_file, bytes_tokenizer_encodes_decodes_and_names_itself) {
    tg_tokenizer *t = tg_tokenizer_open("bytes");
    cr_assert_not_null(t, "%s", tg_last_error());
    cr_expect_str_eq(tg_tokenizer_name(t), "bytes");
    cr_expect_eq(tg_tokenizer_vocab_size(t), 256);
    cr_expect_null(tg_tokenizer_bpe(t));
    size_t len = 0;
    const unsigned char *b = tg_tokenizer_token(t, 'A', &len);
    cr_expect(b && len == 1 && *b == 'A');
    cr_expect_null(tg_tokenizer_token(t, 256, &len));
    int64_t n = -1;
    int *ids = tg_tokenizer_encode(t, TEXT, TEXT_N, &n);
    cr_assert_not_null(ids);
    cr_expect_eq(n, (int64_t)TEXT_N);
    unsigned char back[64];
    cr_expect_eq(tg_tokenizer_decode(t, ids, (size_t)n, NULL, 0), (int64_t)TEXT_N);
    cr_expect_eq(tg_tokenizer_decode(t, ids, (size_t)n, back, sizeof back), (int64_t)TEXT_N);
    cr_expect(memcmp(back, TEXT, TEXT_N) == 0);
    free(ids);
    ids = tg_tokenizer_encode(t, NULL, 0, &n); /* an empty text: a valid pointer and no ids */
    cr_expect(ids && n == 0);
    free(ids);
    int bad = 300;
    cr_expect_eq(tg_tokenizer_decode(t, &bad, 1, back, sizeof back), -1);
    cr_expect(error_has("tokenizer_decode", "300"));
    tg_tokenizer_free(t);
    cr_expect_null(tg_tokenizer_open("no-such-vocabulary.tiktoken"));
    cr_expect_not_null(tg_last_error());
}

/* A decoder saved with its tokenizer opens from the file alone: the same
 * configuration, weights, logits and tokenizer. */
static void round_trip(tg_tokenizer *tok, int vocab) {
    tmpdir();
    tg_decoder_config c = tg_decoder_config_default(vocab, 8, 2, 2, 8);
    c.bias = false, c.gelu = TG_DEC_GELU_ERF, c.pos = TG_PE_ROPE, c.dropout = (tg_real)0.25;
    tg_rng rng = tg_rng_new(3);
    tg_decoder *m = tg_decoder_new(&c, &rng);
    cr_assert_not_null(m, "%s", tg_last_error());
    char *meta = tg_tokenizer_meta(tok, "{\"n_layer\":\"99\",\"note\":\"mine\"}");
    cr_assert_not_null(meta);
    cr_assert_eq(tg_decoder_save(m, in_dir("m.safetensors"), meta), 0, "%s", tg_last_error());
    free(meta);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(in_dir("m.safetensors"), &st), 0);
    char v[32];
    cr_expect(tg_safetensors_meta(&st, "model_type", v, sizeof v) > 0 && strcmp(v, "decoder") == 0);
    cr_expect(tg_safetensors_meta(&st, "n_layer", v, sizeof v) > 0 && strcmp(v, "2") == 0, "the model's own: %s", v);
    cr_expect(tg_safetensors_meta(&st, "note", v, sizeof v) > 0 && strcmp(v, "mine") == 0, "the caller's kept");
    cr_expect(tg_safetensors_meta(&st, "pe", v, sizeof v) > 0 && strcmp(v, "rope") == 0);
    tg_safetensors_close(&st);
    tg_tokenizer *back = NULL;
    tg_decoder *o = tg_decoder_open(in_dir("m.safetensors"), &back);
    cr_assert_not_null(o, "%s", tg_last_error());
    cr_expect(o->cfg.vocab_size == vocab && o->cfg.n_layer == 2 && o->cfg.n_head == 2 && o->cfg.n_embd == 8 &&
              o->cfg.block_size == 8 && !o->cfg.bias && o->cfg.gelu == TG_DEC_GELU_ERF && o->cfg.pos == TG_PE_ROPE &&
              o->cfg.dropout == (tg_real)0.25);
    cr_assert_not_null(back);
    cr_expect_str_eq(tg_tokenizer_name(back), tg_tokenizer_name(tok));
    cr_expect_eq(tg_tokenizer_vocab_size(back), tg_tokenizer_vocab_size(tok));
    char h1[17], h2[17];
    tg_tokenizer_hash(tok, h1), tg_tokenizer_hash(back, h2);
    cr_expect_str_eq(h1, h2);
    int64_t n;
    int *ids = tg_tokenizer_encode(back, TEXT, TEXT_N, &n);
    cr_assert_not_null(ids);
    if (n > 8) n = 8;
    tg_decoder_train(m, false);
    tg_scope_begin();
    tg_tensor *a = tg_decoder_forward(m, ids, 1, (int)n), *b = tg_decoder_forward(o, ids, 1, (int)n);
    cr_assert(a && b);
    cr_expect(memcmp(a->data, b->data, sizeof(tg_real) * (size_t)a->size) == 0, "the same logits");
    tg_scope_end();
    free(ids);
    tg_tokenizer_free(back);
    tg_decoder_free(o);
    tg_decoder_free(m);
}

Test(model_file, decoder_with_bytes_tokenizer_round_trips) {
    tg_tokenizer *t = tg_tokenizer_open("bytes");
    round_trip(t, 256);
    tg_tokenizer_free(t);
}

Test(model_file, decoder_with_bpe_tokenizer_round_trips) {
    tg_tokenizer *t = trained(280);
    cr_expect_str_eq(tg_tokenizer_name(t), "bpe");
    round_trip(t, 300);
    tg_tokenizer_free(t);
}

/* The exact reason a file is not a model, and the checks against the tensors. */
Test(model_file, decoder_open_says_what_is_wrong) {
    tmpdir();
    tg_decoder_config c = tg_decoder_config_default(256, 8, 1, 2, 8);
    tg_rng rng = tg_rng_new(1);
    tg_decoder *m = tg_decoder_new(&c, &rng);
    cr_assert_eq(tg_decoder_save(m, in_dir("m.safetensors"), "{\"model_type\":\"encoder\"}"), 0);
    /* the model's own model_type wins over the caller's */
    tg_decoder *o = tg_decoder_open(in_dir("m.safetensors"), NULL);
    cr_expect_not_null(o, "%s", tg_last_error());
    tg_decoder_free(o);
    /* a tokenizer larger than the model */
    tg_tokenizer *t = trained(270);
    char *meta = tg_tokenizer_meta(t, NULL);
    cr_assert_eq(tg_decoder_save(m, in_dir("big.safetensors"), meta), 0, "%s", tg_last_error());
    free(meta);
    tg_tokenizer *got = NULL;
    cr_expect_null(tg_decoder_open(in_dir("big.safetensors"), &got));
    cr_expect(error_has("big.safetensors", "its tokenizer has") && !got, "%s", tg_last_error());
    cr_expect_not_null(o = tg_decoder_open(in_dir("big.safetensors"), NULL), "without the tokenizer it loads");
    tg_decoder_free(o);
    /* a token file is not a model */
    int ids[4] = {1, 2, 3, 4};
    cr_assert_eq(tg_tokens_save(in_dir("t.npy"), ids, 4, 256), 0);
    cr_expect_null(tg_decoder_open(in_dir("t.npy"), NULL));
    cr_expect(error_has("t.npy is a .npy array", "decoder_open takes"), "%s", tg_last_error());
    cr_expect_null(tg_decoder_open(NULL, NULL));
    tg_tokenizer_free(t);
    tg_decoder_free(m);
}

/* A token file remembers the vocabulary that made it (issue 34, item 9:
 * another one decoded it to garbage). */
Test(model_file, token_files_are_tied_to_their_vocabulary) {
    tmpdir();
    write_all(in_dir("text.txt"), TEXT, TEXT_N);
    tg_tokenizer *a = trained(270), *b = trained(280);
    tg_tokenizer *bytes = tg_tokenizer_open("bytes");
    size_t nb;
    int64_t nt;
    cr_assert_eq(tg_tokenizer_encode_file(a, in_dir("text.txt"), in_dir("t.npy"), &nb, &nt), 0, "%s", tg_last_error());
    cr_expect(nb == TEXT_N && nt > 0 && nt < (int64_t)TEXT_N);
    cr_expect_eq(tg_tokens_check(in_dir("t.npy"), a), 0, "%s", tg_last_error());
    cr_expect_eq(tg_tokens_check(in_dir("t.npy"), b), -1);
    cr_expect(error_has("t.npy was made with the bpe tokenizer of 270 ids", "not this bpe tokenizer of 280 ids"), "%s",
              tg_last_error());
    cr_expect_eq(tg_tokens_check(in_dir("t.npy"), bytes), -1);
    int ids[3] = {1, 2, 3};
    cr_assert_eq(tg_tokens_save(in_dir("plain.npy"), ids, 3, 256), 0);
    cr_expect_eq(tg_tokens_check(in_dir("plain.npy"), b), 0, "a file without a sidecar is not judged");
    tg_tokenizer_free(a), tg_tokenizer_free(b), tg_tokenizer_free(bytes);
}

/* The position kind and GELU by the names a model file and the --pe and
 * --gelu flags spell them: the encoder's fixed table is refused, pe named
 * first, and a refused pair leaves the configuration as it was. */
Test(model_file, decoder_config_kinds_by_name) {
    tg_decoder_config c = tg_decoder_config_default(256, 16, 1, 2, 16);
    cr_assert_eq(tg_decoder_config_kinds(&c, "rope", "erf"), 0, "%s", tg_last_error());
    cr_expect_eq(c.pos, TG_PE_ROPE);
    cr_expect_eq(c.gelu, TG_DEC_GELU_ERF);
    cr_expect_eq(tg_decoder_config_kinds(&c, "fixed", "tanh"), -1);
    cr_expect_str_eq(tg_last_error(), "pe must be learned, none, relative, rope or alibi");
    cr_expect_eq(tg_decoder_config_kinds(&c, "bogus", "bogus"), -1);
    cr_expect_str_eq(tg_last_error(), "pe must be learned, none, relative, rope or alibi");
    cr_expect_eq(tg_decoder_config_kinds(&c, "alibi", "relu"), -1);
    cr_expect_str_eq(tg_last_error(), "gelu must be tanh or erf");
    cr_expect(c.pos == TG_PE_ROPE && c.gelu == TG_DEC_GELU_ERF, "a refused pair changes nothing");
}
