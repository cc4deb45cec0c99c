// Encodes a file with tiktoken's gpt2 encoding (npm tiktoken: the WASM build
// of its Rust core; or js-tiktoken, pure JavaScript) for bench/tokenizer_bench.sh
// and tools/gen_bpe_reference.sh.
//   node bench/tiktoken_ids.js ids  FILE [--special] [--ranks R.tiktoken]   ids, one per line, to stdout
//     (--ranks: a rank file with GPT-2's pattern and <|endoftext|> after the last rank, as
//     tgrad's tg_bpe_load_tiktoken reads it, instead of the gpt2 encoding)
//   node bench/tiktoken_ids.js time FILE REPEATS       "tiktoken MB/s" and "js-tiktoken MB/s"
// The packages come from tools/install-tokenizer-deps.sh (build/npm, or $TGRAD_NPM_DIR).
"use strict";
const fs = require("fs");
const path = require("path");
const dir = process.env.TGRAD_NPM_DIR || path.join(__dirname, "..", "build", "npm");
const { get_encoding, Tiktoken } = require(path.join(dir, "node_modules", "tiktoken"));

const [mode, file, ...rest] = process.argv.slice(2);
const arg = rest[0];
// tiktoken takes a JavaScript string: the file read as UTF-8 (valid UTF-8 is assumed).
const text = fs.readFileSync(file, "utf8");
const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
function rankEncoding(file) {
  const ranks = fs.readFileSync(file, "utf8");
  let last = -1;
  for (const line of ranks.split("\n")) if (line) last = Number(line.split(" ")[1]);
  return new Tiktoken(ranks, { "<|endoftext|>": last + 1 }, GPT2_PATTERN);
}
const r = rest.indexOf("--ranks");
const enc = r >= 0 ? rankEncoding(rest[r + 1]) : get_encoding("gpt2");
if (mode === "ids") {
  const ids = rest.includes("--special") ? enc.encode(text, "all") : enc.encode_ordinary(text);
  process.stdout.write(Array.from(ids).join("\n") + (ids.length ? "\n" : ""));
} else if (mode === "time") {
  const reps = Number(arg || 3);
  const bytes = Buffer.byteLength(text, "utf8");
  const best = (f) => {
    let t = Infinity;
    for (let r = 0; r < reps; r++) {
      const t0 = process.hrtime.bigint();
      f();
      t = Math.min(t, Number(process.hrtime.bigint() - t0) / 1e9);
    }
    return t;
  };
  const tw = best(() => enc.encode_ordinary(text));
  const { getEncoding } = require(path.join(dir, "node_modules", "js-tiktoken"));
  const js = getEncoding("gpt2");
  const tj = best(() => js.encode(text));
  console.log(`tiktoken ${(bytes / tw / 1e6).toFixed(2)}`);
  console.log(`js-tiktoken ${(bytes / tj / 1e6).toFixed(2)}`);
} else {
  console.error("usage: node bench/tiktoken_ids.js ids FILE [--special] | time FILE REPEATS");
  process.exit(2);
}
enc.free();
