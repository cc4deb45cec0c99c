// The run report in a real browser (tests/report_browser.sh runs it):
// headless Chromium from Debian, driven through CDP by puppeteer-core,
// opens report.html from file:// and checks what a reader would:
//   1. no console error, no page error, no request leaves the page (offline);
//   2. every section is there with data (settings rows, curve paths, the
//      lr chart, one token per window position, L x H small multiples, the
//      positions heatmap, samples);
//   3. hovering a token shades every token with the recorded weights of the
//      chosen layer and head (the JSON the page embeds, which
//      tg_report_add_decoder wrote from tg_decoder_attention_weights), for
//      two tokens and after choosing another layer and head; the weights
//      of a row sum to 1 and are 0 past the query (causal);
//   4. the log-scale toggle redraws the loss axis; the chart's hover
//      read-out names the step.
// Then saves screenshots. Then each further page (reverse's run, extrapolate's
// summary): no console error or request, every position plot of the data
// drawn and titled with its kind, a heatmap cell's hover read-out equal to
// the embedded value, where there is attention, hovering a token shades the
// recorded row (which sums to 1), a table of rows (a profiler's) shows every
// cell as written, and the title and samples are the data's (the last page
// is an lm run's copy with a profile.json and a crafted samples.jsonl).
// Usage: node report_browser.js REPORT.html SHOT_PREFIX [PAGE.html ...]
"use strict";
const path = require("path");
const fs = require("fs");
const puppeteer = require(process.env.PUPPETEER_DIR ? path.resolve(process.env.PUPPETEER_DIR, "puppeteer-core")
                                                    : "puppeteer-core");

const [report, shots, ...others] = process.argv.slice(2);
let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

/* Hover token i with layer l and head h chosen: the shading follows the
 * recorded weights; a row sums to 1 and, causal, is 0 past the query. */
async function hoverAndCompare(page, D, i, l, h, causal) {
  const H = D.attention.heads, T = D.attention.tokens.length;
  await page.select("#att-layer", String(l));
  await page.select("#att-head", String(h));
  await page.hover(`#att-text .tok[data-i="${i}"]`);
  const shown = await page.evaluate(() => [...document.querySelectorAll("#att-text .tok")].map((s) => +s.dataset.w));
  const row = D.attention.w[l * H + h][i];
  let worst = 0, sum = 0, beyond = 0;
  for (let j = 0; j < T; j++) {
    const want = j < row.length ? row[j] : 0;
    worst = Math.max(worst, Math.abs(shown[j] - want));
    if (j > i) beyond = Math.max(beyond, shown[j]);
  }
  for (const w of row) sum += w;
  const q = await page.$eval("#att-text .tok.query", (s) => +s.dataset.i);
  check(q === i && worst === 0, `hover token ${i}, layer ${l + 1} head ${h + 1}: the ${T} shaded weights are the recorded row (max diff ${worst})`);
  check(Math.abs(sum - 1) < 0.01 * (causal ? i + 1 : T) && (!causal || beyond === 0),
        `  row sums to ${sum.toFixed(3)}${causal ? ", zero past the query (causal)" : ""}`);
  const top = await page.$eval("#att-top", (e) => e.textContent);
  check(top.includes(`query ${i} `), `  read-out names query ${i}: "${top.slice(0, 70)}..."`);
  return shown;
}

/* A page opened from file://, with the console errors, page errors and
 * requests that leave the page collected as they come. */
async function openPage(browser, file) {
  const page = await browser.newPage();
  await page.setViewport({width: 1100, height: 900});
  const errors = [], requests = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) requests.push(r.url()); });
  await page.goto("file://" + path.resolve(file), {waitUntil: "load"});
  return {page, errors, requests};
}

/* A page with positions (and maybe an encoder's attention): see the top. */
async function checkPositionsPage(browser, file) {
  const {page, errors, requests} = await openPage(browser, file);
  console.log(`-- ${file}`);
  check(errors.length === 0 && requests.length === 0, `no console errors, no network requests (${errors.concat(requests).join(" | ") || "none"})`);
  const D = await page.evaluate(() => JSON.parse(document.getElementById("tg-data").textContent));
  const P = D.positions || [];
  const drawn = await page.evaluate(() => document.querySelectorAll("#positions canvas.heat, #positions svg.chart").length);
  const titles = await page.evaluate(() => [...document.querySelectorAll("#positions h3")].map((e) => e.textContent));
  check(P.length >= 1 && drawn === P.length, `positions: ${drawn} plots drawn for ${P.length} in the data`);
  const kinds = /Fixed sinusoidal|Learned absolute|Relative positions|RoPE|ALiBi/;
  check(titles.length === P.length && titles.every((t) => kinds.test(t)), `every plot's title names its kind (${titles.map((t) => t.split(":")[0]).join("; ")})`);
  const heats = await page.$$("#positions canvas.heat");
  for (let k = 0, h = 0; k < P.length; k++) {
    if (P[k].kind !== "heatmap") continue;
    const p = P[k], c = heats[h++];
    await c.hover();
    const box = await c.boundingBox();
    const i = p.rows - 1, j = Math.floor(p.cols / 2);
    await page.mouse.move(box.x + (j + 0.5) * box.width / p.cols, box.y + (i + 0.5) * box.height / p.rows);
    const shown = await page.evaluate((el) => el.nextElementSibling.nextElementSibling.textContent, c);
    const want = await page.evaluate((v) => fmt(v), p.data[i * p.cols + j]);
    check(shown.endsWith(`: ${want}`), `  heatmap "${p.title.slice(0, 40)}...": cell (${i}, ${j}) reads "${shown}", the embedded ${want}`);
  }
  if (D.attention) {
    const T = D.attention.tokens.length, L = D.attention.layers, H = D.attention.heads;
    const tokens = await page.evaluate(() => document.querySelectorAll("#att-text .tok").length);
    check(tokens === T, `attention: ${tokens} tokens`);
    await hoverAndCompare(page, D, 0, 0, 0, false);
    await hoverAndCompare(page, D, T - 1, L - 1, H - 1, false);
  }
  /* Tables of rows (a profiler's) show every cell as written; the page's
   * title and samples are the data's (a crafted samples.jsonl line cannot
   * rewrite them). */
  for (const [k, Tb] of (Array.isArray(D.table) ? D.table : []).entries()) {
    if (!Tb.columns) continue;
    const id = "table" + (k ? k + 1 : "");
    const cells = await page.$$eval(`#${id} td`, (xs) => xs.map((x) => x.textContent));
    const want = await page.evaluate((rows) => rows.flat().map((v) => typeof v === "string" ? v : fmt(v)), Tb.rows);
    check(JSON.stringify(cells) === JSON.stringify(want), `table "${Tb.title}": ${cells.length} cells as written (${cells.join(" | ")})`);
  }
  const h1 = await page.$eval("h1", (e) => e.textContent), pre = await page.$$eval("#samples pre.sample", (xs) => xs.map((x) => x.textContent));
  check(h1 === (D.title || "Run report") && pre.length === (D.samples || []).length && pre.every((t, i) => t === D.samples[i].text),
        `title "${h1}" and ${pre.length} sample(s) as in the data`);
  check(errors.length === 0, `still no console errors after interaction (${errors.join(" | ") || "none"})`);
  await page.close();
}

(async () => {
  const profile = fs.mkdtempSync(path.join(require("os").tmpdir(), "tgrad-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           `--user-data-dir=${profile}`],
  });
  try {
    const {page, errors, requests} = await openPage(browser, report);
    check(errors.length === 0, `no console errors (${errors.join(" | ") || "none"})`);
    check(requests.length === 0, `no network requests (${requests.join(" ") || "none"})`);

    const D = await page.evaluate(() => JSON.parse(document.getElementById("tg-data").textContent));
    const L = D.attention.layers, H = D.attention.heads, T = D.attention.tokens.length;
    const counts = await page.evaluate(() => ({
      settings: document.querySelectorAll("#settings .settings div").length,
      curves: [...document.querySelectorAll("#curves svg.chart")].map((s) => s.querySelectorAll("path").length),
      tokens: document.querySelectorAll("#att-text .tok").length,
      minis: document.querySelectorAll("#attention canvas.mini").length,
      heat: document.querySelectorAll("#positions canvas.heat, #positions svg.chart").length,
      samples: document.querySelectorAll("#samples pre.sample").length,
      nav: document.querySelectorAll("nav a").length,
    }));
    check(counts.settings > 5, `settings: ${counts.settings} rows`);
    check(counts.curves.length === 2 && counts.curves[0] >= 2 && counts.curves[1] >= 1,
          `curves: loss chart with train and validation lines, lr chart below (${JSON.stringify(counts.curves)})`);
    check(D.metrics.step.length > 10 && D.metrics.val_step.length >= 2, `metrics: ${D.metrics.step.length} steps, ${D.metrics.val_step.length} evaluations`);
    check(counts.tokens === T && T > 8, `attention text: ${counts.tokens} tokens (window of ${T})`);
    check(counts.minis === L * H, `all heads: ${counts.minis} small multiples (${L} layers x ${H} heads)`);
    check(counts.heat >= 1, `positions: ${counts.heat} figure(s)`);
    check(counts.samples >= 1, `samples: ${counts.samples}`);
    check(counts.nav >= 5, `navigation: ${counts.nav} sections`);

    const a = await hoverAndCompare(page, D, Math.floor(T / 2), 0, 0, true);
    const b = await hoverAndCompare(page, D, T - 1, L - 1, H - 1, true);
    check(a.join() !== b.join(), "hovering another token (another layer/head) changes the highlighted weights");
    const bg = await page.$eval(`#att-text .tok[data-i="0"]`, (s) => s.style.background);
    check(bg.startsWith("rgb"), `token 0 is shaded (${bg})`);

    /* Curves: hover read-out and the log toggle. */
    const chart = await page.$("#curves svg.chart");
    await chart.hover(); /* scrolls it into view, the pointer at its centre */
    const box = await chart.boundingBox();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
    const readout = await page.$eval("#curves .readout", (e) => e.textContent);
    check(/^step \d+: train loss/.test(readout), `loss read-out: "${readout}"`);
    const before = await page.$eval("#curves svg.chart", (s) => s.innerHTML.length);
    await page.click("#logscale");
    const label = await page.$eval("#curves svg.chart", (s) => s.textContent);
    check(label.includes("(log scale)") && before > 0, "log-scale toggle redraws the loss axis");
    await page.click("#logscale");
    check(errors.length === 0, `still no console errors after interaction (${errors.join(" | ") || "none"})`);

    if (shots) {
      await page.hover(`#att-text .tok[data-i="${Math.max(0, T - 4)}"]`);
      const att = await page.$("#attention");
      await att.screenshot({path: `${shots}_attention.png`});
      await page.select("#att-layer", "0");
      await page.select("#att-head", "0");
      const cur = await page.$("#curves");
      await chart.hover();
      const box2 = await chart.boundingBox();
      await page.mouse.move(box2.x + box2.width * 0.7, box2.y + box2.height / 2);
      await cur.screenshot({path: `${shots}_curves.png`});
      await page.screenshot({path: `${shots}_page.png`, fullPage: true});
      console.log(`screenshots: ${shots}_attention.png ${shots}_curves.png ${shots}_page.png`);
    }
    for (const f of others) await checkPositionsPage(browser, f);
  } finally {
    await browser.close();
    fs.rmSync(profile, {recursive: true, force: true});
  }
  console.log(failures ? `report_browser: ${failures} check(s) failed` : "report_browser: all checks passed");
  process.exit(failures ? 1 : 0);
})().catch((e) => { console.error("report_browser:", e); process.exit(1); });
