/* The run report's page (src/viz/report.c embeds it): draws what the data
 * block <script id="tg-data"> holds, with no library and no network. Each
 * part of the data is optional; a section is drawn for each part present:
 *   settings   {name: "value"}                          the run's settings
 *   metrics    {step, loss, lr, val_step, val_loss}      arrays of numbers
 *   attention  {title, tokens: [text], layers, heads, pe, w}    w[l * heads + h][i]:
 *              the weights of query i over keys 0.. (a row; missing = 0)
 *   positions  [{kind: "heatmap", rows, cols, data, ...} | {kind: "lines", x, series, ...}]
 *   table      [{title, xlabel, ylabel, x, series: [{name, y}]}  a table and its chart
 *               | {title, columns: [name], rows: [[cell]]}]    a plain table (cells: text, numbers, null)
 *   samples    [{step, text}]
 * Everything is keyboard-usable: charts take the arrow keys, tokens take
 * Tab and the arrow keys, every control is a native <select> or <input>. */
"use strict";
const app = document.getElementById("app");
const D = (() => {
  try { return JSON.parse(document.getElementById("tg-data").textContent); }
  catch (e) { app.textContent = "This report's data cannot be read: " + e.message; throw e; }
})();
const SVGNS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) {
    if (k === "text") e.textContent = attrs[k];
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
    else e.setAttribute(k, attrs[k]);
  }
  for (const c of kids) if (c != null) e.append(c);
  return e;
}
function sv(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.append(e);
  return e;
}
function fmt(v) {
  if (v == null || !isFinite(v)) return "–";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-4 || a >= 1e6) ? v.toExponential(2) : +v.toPrecision(4) + "";
}

/* ---- colour maps (matplotlib's Blues: sequential, for weights >= 0; RdBu: diverging) ---- */
const BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
const RDBU = [[103, 0, 31], [214, 96, 77], [247, 247, 247], [67, 147, 195], [5, 48, 97]];
function cmap(stops, t) {
  if (!isFinite(t)) return [200, 200, 200];
  t = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
  return stops[i].map((a, k) => Math.round(a + f * (stops[i + 1][k] - a)));
}
const css = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;
/* A colour bar with its end values: the legend of every heatmap. */
function colorbar(stops, lo, hi, label) {
  const c = el("canvas", {width: 160, height: 12, "aria-hidden": "true"});
  const g = c.getContext("2d");
  for (let x = 0; x < 160; x++) { g.fillStyle = css(cmap(stops, x / 159)); g.fillRect(x, 0, 1, 12); }
  return el("div", {class: "cbar"}, el("span", {text: fmt(lo)}), c, el("span", {text: fmt(hi)}), el("span", {text: label || ""}));
}

/* ---- nice ticks ---- */
function ticks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n, p = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / p;
  const step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * p, out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}
function logTicks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
    for (const m of hi / lo < 100 ? [1, 2, 5] : [1]) { const v = m * Math.pow(10, e); if (v >= lo && v <= hi) out.push(v); }
  return out.length >= 2 ? out : [lo, hi];
}

/* ---- line charts: SVG, legend above the plot (never over the data), hover/arrow-key read-out ---- */
function lineChart(parent, spec) {
  const W = spec.width || 900, H = spec.height || 300, L = 76, R = 16, T = 10, B = 44;
  const wrap = el("div", {class: "chartwrap"});
  const legend = el("div", {class: "legend"});
  spec.series.forEach((s, i) => legend.append(el("span", {style: `--c:${s.color || PALETTE[i % 10]}`, text: s.name})));
  const svg = sv("svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H, tabindex: 0, role: "img",
                         "aria-label": spec.label || spec.ylabel});
  const readout = el("div", {class: "readout", "aria-live": "polite"});
  wrap.append(legend, svg, readout);
  parent.append(wrap);
  const draw = () => {
    svg.textContent = "";
    const log = !!(spec.log && spec.log());
    let xs = [], ys = [];
    for (const s of spec.series) for (let i = 0; i < s.y.length; i++) {
      const y = s.y[i];
      if (y != null && isFinite(y) && (!log || y > 0)) { xs.push(s.x[i]); ys.push(y); }
    }
    if (!ys.length) { sv("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, svg).textContent = "no data"; return; }
    let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 = y0 + (Math.abs(y0) || 1) * 0.05; y0 = y0 - (Math.abs(y0) || 1) * 0.05; }
    if (spec.yzero && !log) y0 = Math.min(0, y0);
    const fy = log ? Math.log10 : (v) => v, ly0 = fy(y0), ly1 = fy(y1);
    const X = (v) => L + (v - x0) / (x1 - x0) * (W - L - R);
    const Y = (v) => T + (1 - (fy(v) - ly0) / (ly1 - ly0)) * (H - T - B);
    const grid = sv("g", {stroke: "#e6e9ee"}, svg);
    for (const t of ticks(x0, x1, 8)) {
      sv("line", {x1: X(t), x2: X(t), y1: T, y2: H - B}, grid);
      sv("text", {x: X(t), y: H - B + 16, "text-anchor": "middle"}, svg).textContent = fmt(t);
    }
    for (const t of log ? logTicks(y0, y1) : ticks(y0, y1, 5)) {
      sv("line", {x1: L, x2: W - R, y1: Y(t), y2: Y(t)}, grid);
      sv("text", {x: L - 6, y: Y(t) + 4, "text-anchor": "end"}, svg).textContent = fmt(t);
    }
    sv("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#9aa5b1"}, svg);
    sv("text", {x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle"}, svg).textContent = spec.xlabel;
    sv("text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${(T + H - B) / 2})`}, svg)
      .textContent = spec.ylabel + (log ? " (log scale)" : "");
    spec.series.forEach((s, si) => {
      const col = s.color || PALETTE[si % 10];
      let d = "", pen = false;
      for (let i = 0; i < s.y.length; i++) {
        const y = s.y[i], ok = y != null && isFinite(y) && (!log || y > 0);
        if (ok) d += (pen ? "L" : "M") + X(s.x[i]).toFixed(1) + " " + Y(y).toFixed(1);
        pen = ok;
      }
      sv("path", {d, fill: "none", stroke: col, "stroke-width": s.width || 1.6}, svg);
      if (s.points) for (let i = 0; i < s.y.length; i++)
        if (s.y[i] != null && isFinite(s.y[i]) && (!log || s.y[i] > 0))
          sv("circle", {cx: X(s.x[i]), cy: Y(s.y[i]), r: 3, fill: col}, svg);
    });
    const cursor = sv("line", {y1: T, y2: H - B, stroke: "#555", "stroke-dasharray": "3 3", visibility: "hidden"}, svg);
    /* The read-out names the x and each series' value at (or nearest before) it. */
    const allx = [...new Set(xs)].sort((a, b) => a - b);
    const show = (k) => {
      k = Math.max(0, Math.min(allx.length - 1, k));
      svg.dataset.k = k;
      const x = allx[k];
      cursor.setAttribute("x1", X(x)); cursor.setAttribute("x2", X(x)); cursor.setAttribute("visibility", "visible");
      const parts = spec.series.map((s) => {
        let best = -1;
        for (let i = 0; i < s.x.length; i++) if (s.x[i] <= x && s.y[i] != null && isFinite(s.y[i])) best = i;
        return best < 0 ? null : `${s.name} ${fmt(s.y[best])}${s.x[best] !== x ? ` (at ${fmt(s.x[best])})` : ""}`;
      }).filter((p) => p);
      readout.textContent = `${spec.xlabel} ${fmt(x)}: ${parts.join(", ")}`;
    };
    svg.onmousemove = (ev) => {
      const r = svg.getBoundingClientRect(), vx = (ev.clientX - r.left) * W / r.width;
      const x = x0 + (vx - L) / (W - L - R) * (x1 - x0);
      let k = 0;
      for (let i = 0; i < allx.length; i++) if (Math.abs(allx[i] - x) < Math.abs(allx[k] - x)) k = i;
      show(k);
    };
    svg.onkeydown = (ev) => {
      const k = +(svg.dataset.k || allx.length - 1);
      if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
        show(k + (ev.key === "ArrowRight" ? 1 : -1) * (ev.shiftKey ? 10 : 1));
        ev.preventDefault();
      }
    };
    svg.onfocus = () => show(+(svg.dataset.k || allx.length - 1));
  };
  draw();
  return draw;
}

/* ---- heatmaps on a canvas, with axis labels and a colour bar ---- */
function heatmap(parent, p) {
  let lo = Infinity, hi = -Infinity;
  for (const v of p.data) if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const diverging = p.diverging ?? lo < 0;
  if (diverging) { const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1; lo = -m; hi = m; }
  const stops = diverging ? RDBU : BLUES;
  const c = el("canvas", {width: p.cols, height: p.rows, class: "heat", role: "img", "aria-label": p.title});
  const scale = Math.max(1, Math.min(8, Math.floor(640 / Math.max(p.cols, p.rows))));
  c.style.width = p.cols * scale + "px"; c.style.height = p.rows * scale + "px";
  const g = c.getContext("2d"), img = g.createImageData(p.cols, p.rows);
  for (let i = 0; i < p.rows * p.cols; i++) {
    const col = cmap(stops, (p.data[i] - lo) / (hi - lo || 1));
    img.data.set([col[0], col[1], col[2], 255], 4 * i);
  }
  g.putImageData(img, 0, 0);
  const readout = el("div", {class: "readout"});
  c.onmousemove = (ev) => {
    const r = c.getBoundingClientRect();
    const j = Math.floor((ev.clientX - r.left) / r.width * p.cols), i = Math.floor((ev.clientY - r.top) / r.height * p.rows);
    if (i >= 0 && j >= 0 && i < p.rows && j < p.cols) readout.textContent = `${p.ylabel} ${i}, ${p.xlabel} ${j}: ${fmt(p.data[i * p.cols + j])}`;
  };
  parent.append(el("h3", {text: p.title}),
                el("div", {class: "sub", text: `rows: ${p.ylabel} (0 at the top), columns: ${p.xlabel}`}),
                c, colorbar(stops, lo, hi, p.label || ""), readout);
}

/* ---- sections ---- */
const sections = [];
function section(id, title) {
  const s = el("section", {id}, el("h2", {text: title}));
  app.append(s);
  sections.push([id, title]);
  return s;
}

function drawSettings(S) {
  const s = section("settings", "Settings");
  const box = el("div", {class: "settings"});
  /* Numbers as their shortest form ("0.0002", not the checkpoint's %.17g). */
  const num = (v) => (/^-?\d+(\.\d+)?(e[-+]?\d+)?$/i.test(v) ? String(+v) : String(v));
  for (const k of Object.keys(S)) box.append(el("div", {}, el("b", {text: k}), " ", num(S[k])));
  s.append(box);
}

function drawMetrics(M) {
  const s = section("curves", "Loss and learning rate");
  const logBox = el("input", {type: "checkbox", id: "logscale"});
  s.append(el("div", {class: "controls"}, el("label", {}, logBox, " logarithmic loss axis")));
  const series = [{name: "train loss", x: M.step, y: M.loss, width: 1.2}];
  if (M.val_step && M.val_step.length) series.push({name: "validation loss", x: M.val_step, y: M.val_loss, points: true, width: 2});
  const redraw = lineChart(s, {series, xlabel: "step", ylabel: "cross-entropy (nats)", log: () => logBox.checked, height: 320});
  logBox.addEventListener("change", redraw);
  if (M.lr && M.lr.length)
    lineChart(s, {series: [{name: "learning rate", x: M.step, y: M.lr, color: "#2ca02c"}], xlabel: "step", ylabel: "learning rate", height: 170, yzero: true});
}

/* A token as readable text: newline as ↵ (and a line break), tab as →,
 * other control bytes as <0x..>; the rest as it is. */
function tokenNode(t) {
  const span = el("span", {class: "tok", tabindex: 0});
  const vis = t === "\n" ? "↵" : t === "\t" ? "→" : /^[\x00-\x1f\x7f]$/.test(t) ? `<0x${t.charCodeAt(0).toString(16).padStart(2, "0")}>` : null;
  if (vis) span.append(el("span", {class: "ctl", text: vis}));
  else span.textContent = t;
  return span;
}
function show(t) { return t === "\n" ? "↵" : t === " " ? "␣" : t; }

function drawAttention(A) {
  const s = section("attention", A.title || `Attention over one validation window (${A.pe} positions)`);
  s.append(el("p", {class: "sub", text: "Hover, tap or focus (Tab, then ←/→) a token: the tokens it attends to are shaded by their weight in the chosen layer and head, the strongest listed below. Click a small multiple to choose its layer and head."}));
  const L = A.layers, H = A.heads, T = A.tokens.length;
  const lsel = el("select", {id: "att-layer", "aria-label": "layer"}), hsel = el("select", {id: "att-head", "aria-label": "head"});
  for (let l = 0; l < L; l++) lsel.append(el("option", {value: l, text: `layer ${l + 1}`}));
  for (let h = 0; h < H; h++) hsel.append(el("option", {value: h, text: `head ${h + 1}`}));
  s.append(el("div", {class: "controls"}, el("label", {}, "Layer ", lsel), el("label", {}, "Head ", hsel), colorbar(BLUES, 0, 1, "attention weight")));
  const text = el("div", {class: "text", id: "att-text"});
  const spans = A.tokens.map((t, i) => {
    const sp = tokenNode(t);
    sp.dataset.i = i;
    text.append(sp);
    if (t === "\n") text.append("\n");
    return sp;
  });
  const top = el("div", {class: "top readout", id: "att-top", "aria-live": "polite"});
  s.append(text, top);
  let q = T - 1;
  const weight = (l, h, i, j) => { const row = A.w[l * H + h][i]; return j < row.length ? row[j] : 0; };
  const minis = el("div", {class: "minis", style: `grid-template-columns: repeat(${H}, 140px)`});
  const canv = [];
  function paint() {
    const l = +lsel.value, h = +hsel.value;
    spans.forEach((sp, j) => {
      const w = weight(l, h, q, j);
      sp.dataset.w = w;
      sp.style.background = j === q ? "" : css(cmap(BLUES, w));
      sp.style.color = w > 0.55 ? "#fff" : "";
      sp.classList.toggle("query", j === q);
      sp.title = `position ${j}: weight ${fmt(w)}`;
    });
    const order = A.w[l * H + h][q].map((w, j) => [w, j]).sort((a, b) => b[0] - a[0]).slice(0, 8);
    top.textContent = `layer ${l + 1}, head ${h + 1}: query ${q} "${show(A.tokens[q])}" attends to ` +
      order.map(([w, j]) => `${j} "${show(A.tokens[j])}" ${w.toFixed(3)}`).join(", ");
    canv.forEach((c, k) => c.classList.toggle("sel", k === l * H + h));
  }
  spans.forEach((sp, i) => {
    const pick = () => { q = i; paint(); };
    sp.addEventListener("mouseenter", pick);
    sp.addEventListener("focus", pick);
    sp.addEventListener("click", pick);
    sp.addEventListener("keydown", (ev) => {
      const d = ev.key === "ArrowRight" ? 1 : ev.key === "ArrowLeft" ? -1 : 0;
      if (d && spans[i + d]) { spans[i + d].focus(); ev.preventDefault(); }
    });
  });
  lsel.addEventListener("change", paint);
  hsel.addEventListener("change", paint);
  s.append(el("h3", {text: `All heads (rows: layers 1..${L}; each panel: query down, key across)`}), minis);
  for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) {
    const c = el("canvas", {width: T, height: T, class: "mini", tabindex: 0, role: "button", "aria-label": `layer ${l + 1} head ${h + 1}`});
    const g = c.getContext("2d"), img = g.createImageData(T, T);
    let mx = 0;
    for (const row of A.w[l * H + h]) for (const v of row) mx = Math.max(mx, v);
    for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) {
      const col = cmap(BLUES, weight(l, h, i, j) / (mx || 1));
      img.data.set([col[0], col[1], col[2], 255], 4 * (i * T + j));
    }
    g.putImageData(img, 0, 0);
    const choose = () => { lsel.value = l; hsel.value = h; paint(); };
    c.addEventListener("click", choose);
    c.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { choose(); ev.preventDefault(); } });
    canv.push(c);
    minis.append(el("div", {class: "mini-cell"}, c, el("div", {text: `layer ${l + 1}, head ${h + 1}`})));
  }
  s.append(el("div", {class: "sub", text: "Each small multiple is scaled to its own largest weight."}));
  paint();
}

function drawPositions(P) {
  const s = section("positions", "Positional encodings in use");
  for (const p of P) {
    if (p.kind === "heatmap") heatmap(s, p);
    else if (p.kind === "lines") {
      s.append(el("h3", {text: p.title}));
      lineChart(s, {series: p.series.map((q) => ({name: q.name, x: p.x, y: q.y})), xlabel: p.xlabel, ylabel: p.ylabel, height: 260});
    }
  }
}

function drawTable(Tb, k) {
  const s = section("table" + (k ? k + 1 : ""), Tb.title);
  if (Tb.columns) { /* rows of cells, no chart (a profiler's table) */
    const tbl = el("table", {}, el("tr", {}, ...Tb.columns.map((c) => el("th", {text: c}))));
    for (const row of Tb.rows) {
      tbl.append(el("tr", {}, ...row.map((v) => typeof v === "string" ? el("td", {text: v}) : el("td", {class: "num", text: fmt(v)}))));
    }
    s.append(tbl);
    return;
  }
  const tbl = el("table", {}), head = el("tr", {}, el("th", {text: Tb.xlabel}));
  Tb.series.forEach((q) => head.append(el("th", {text: q.name})));
  tbl.append(head);
  Tb.x.forEach((x, i) => {
    const tr = el("tr", {}, el("td", {class: "num", text: fmt(x)}));
    Tb.series.forEach((q) => tr.append(el("td", {class: "num", text: q.y[i] == null ? "–" : fmt(q.y[i])})));
    tbl.append(tr);
  });
  s.append(tbl);
  lineChart(s, {series: Tb.series.map((q) => ({name: q.name, x: Tb.x, y: q.y, points: true})), xlabel: Tb.xlabel, ylabel: Tb.ylabel, height: 300, yzero: true});
}

function drawSamples(S) {
  const s = section("samples", "Samples");
  for (const x of S) s.append(el("h3", {text: `step ${x.step}`}), el("pre", {class: "sample", text: x.text}));
}

/* ---- the page ---- */
app.append(el("h1", {text: D.title || "Run report"}));
if (D.subtitle) app.append(el("p", {class: "sub", text: D.subtitle}));
const nav = el("nav", {class: "nav"});
app.append(nav);
if (D.settings) drawSettings(D.settings);
if (D.metrics) drawMetrics(D.metrics);
if (D.table) (Array.isArray(D.table) ? D.table : [D.table]).forEach(drawTable);
if (D.attention) drawAttention(D.attention);
if (D.positions && D.positions.length) drawPositions(D.positions);
if (D.samples && D.samples.length) drawSamples(D.samples);
for (const [id, title] of sections) nav.append(el("a", {href: "#" + id, text: title}));
