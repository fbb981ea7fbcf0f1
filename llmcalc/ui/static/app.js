// llmcalc's page: a form per command (drawn from the server's schema of the command's own options), the answer
// the command line gives (its JSON report, or its one-line error next to the field it names), the state in the
// URL, and the command line of every view. No figure is computed here: each one shown is a field of the report.
"use strict";

const MODEL_FLAGS = ["--preset", "--config", "--hf-config", "--hf-model"];
const EXPLAINED = ["params", "kv", "flops", "memory", "latency"];
// What a view starts with when its command needs more than the defaults (written into its form, so visible in
// the URL and the command line).
const STARTS = {
  latency: {"--gpu": "h100-sxm"}, fit: {"--gpu": "h100-sxm"}, sweep: {"--gpu": "h100-sxm"},
  serve: {"--gpu": "h100-sxm", "--requests": "200"}, plan: {"--gpu": "h100-sxm", "--max-gpus": "8", "--rate": "5", "--slo-ttft": "2", "--slo-tpot": "0.05",
    "--requests": "200"},
  train: {"--gpu": "h100-sxm", "--gpus": "8", "--zero": "1", "--micro-batch": "1"}, compare: {args: "gqa mla"}, explain: {args: "kv"},
};
const FOLDED = ["Advanced", "Conventions", "Model"];

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "style") Object.assign(e.style, v);  // through the CSSOM: the page's policy refuses style attributes
    else e.setAttribute(k, v === true ? "" : v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
};

const page = {schema: null, commands: {}, view: "params", values: {}, answerSeq: 0, report: null, chart: null};

// --- numbers: exact ints kept exact (BigInt past 2^53), as the JSON has them ------------------------------------
function parseExact(text) {
  return JSON.parse(text, (key, value, context) => {
    if (typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)) {
      return BigInt(context.source);
    }
    return value;
  });
}
const isNum = (v) => typeof v === "number" || typeof v === "bigint";
const raw = (v) => (typeof v === "bigint" ? v.toString() : JSON.stringify(v));

function kindOf(path) {
  // A figure's unit from its field's name: a statistic (p50, mean) takes its parent's (ttft_s.p50 is seconds).
  const parts = path.split(".").filter((x) => !/^\d+$/.test(x));
  let key = parts.pop() || "";
  if (/^(p\d+|mean|median|min|max|std)$/.test(key) && parts.length) key = parts.pop();
  if (/per_s/.test(key)) return null;
  if (/bytes/.test(key)) return "bytes";
  if (/flops/.test(key) && !/^peak/.test(key)) return "flops";
  if (/(^|_)s$/.test(key)) return "s";
  return null;
}

function sig(x, digits = 4) {
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e-4 && a < 1e6) return Number(x.toPrecision(digits)).toLocaleString("en-US", {maximumFractionDigits: 8});
  return x.toExponential(digits - 1);
}

function scaled(x, base, units) {
  let i = 0;
  while (Math.abs(x) >= base && i < units.length - 1) { x /= base; i += 1; }
  return `${sig(x, 4)} ${units[i]}`;
}

function shown(key, v) {
  if (v === null || v === undefined) return {text: "—"};
  if (typeof v === "boolean") return {text: v ? "yes" : "no"};
  if (!isNum(v)) return {text: String(v)};
  const kind = kindOf(key);
  const n = Number(v);
  const exact = Number.isInteger(n) || typeof v === "bigint" ? v.toLocaleString("en-US") : sig(n, 5);
  if (kind === "bytes") {
    return {text: exact, unit: Math.abs(n) < 1000 ? "B" : `B · ${scaled(n, 1000, ["B", "kB", "MB", "GB", "TB", "PB"])} · `
      + scaled(n, 1024, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"])};
  }
  if (kind === "flops") {
    return {text: exact, unit: Math.abs(n) < 1000 ? "FLOP" : scaled(n, 1000, ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"])};
  }
  if (kind === "s") return {text: n < 1 ? `${sig(n * 1000, 4)} ms` : `${sig(n, 4)} s`};
  return {text: exact};
}

// --- the form -----------------------------------------------------------------------------------------------------
function optionId(flag) { return `opt${flag}`; }

function drawForm() {
  const command = page.commands[page.view];
  const args = $("arguments");
  args.replaceChildren();
  for (const a of command.arguments) {
    const id = "args";
    args.append(el("fieldset", {},
      el("legend", {text: a.many ? "Arguments" : "Argument"}),
      el("label", {for: id, text: `${a.metavar}${a.many ? " (several, space-separated)" : ""}: ${a.help}`}),
      el("input", {id, "data-arg": "1", autocomplete: "off", spellcheck: "false", "aria-describedby": "err-args"}),
      el("p", {class: "field-error", id: "err-args", role: "status"})));
  }
  const panels = new Map();
  for (const o of command.options) {
    if (MODEL_FLAGS.includes(o.flag)) continue;
    if (!panels.has(o.panel)) panels.set(o.panel, []);
    panels.get(o.panel).push(o);
  }
  const holder = $("options");
  holder.replaceChildren();
  for (const [panel, options] of panels) {
    // Each panel folds; the rarely changed ones start folded (opened again when the URL sets one of theirs).
    const set = el("details", {open: !FOLDED.includes(panel), "data-panel": panel},
      el("summary", {text: panel === "Model" ? "Model options" : panel}));
    for (const o of options) set.append(...control(o));
    holder.append(set);
  }
  for (const input of holder.querySelectorAll("input, select")) input.addEventListener("input", changed);
  for (const input of args.querySelectorAll("input")) input.addEventListener("input", changed);
}

function control(o) {
  const id = optionId(o.flag);
  const err = el("p", {class: "field-error", id: `err${o.flag}`, role: "status"});
  const title = `${o.flag}: ${o.help}`;
  if (o.is_flag && o.off) {
    const select = el("select", {id, "data-flag": o.flag, "aria-describedby": err.id},
      el("option", {value: "", text: `default (${o.default ? o.flag : o.off})`}),
      el("option", {value: o.flag, text: o.flag}), el("option", {value: o.off, text: o.off}));
    return [el("label", {for: id, text: `${o.flag} / ${o.off}: ${o.help}`}), select, err];
  }
  if (o.is_flag) {
    const box = el("input", {type: "checkbox", id, "data-flag": o.flag, "aria-describedby": err.id});
    return [el("label", {class: "check", for: id, title}, box, document.createTextNode(`${o.flag}: ${o.help}`)), err];
  }
  let input;
  if (o.choices) {
    input = el("select", {id, "data-flag": o.flag, "aria-describedby": err.id},
      el("option", {value: "", text: `default${o.default !== null ? ` (${o.default})` : ""}`}),
      ...o.choices.map((c) => el("option", {value: c, text: c})));
  } else {
    input = el("input", {id, "data-flag": o.flag, autocomplete: "off", spellcheck: "false",
      placeholder: o.default !== null && o.default !== false ? String(o.default) : (o.metavar || ""),
      list: o.flag === "--gpu" ? "gpu-list" : null, "aria-describedby": err.id});
  }
  return [el("label", {for: id, text: `${o.flag} ${o.metavar}: ${o.help}`}), input, err];
}

function readForm() {
  const values = {};
  for (const input of $("options").querySelectorAll("[data-flag]")) {
    const v = input.type === "checkbox" ? (input.checked ? "1" : "") : input.value.trim();
    if (v) values[input.dataset.flag] = v;
  }
  const arg = $("arguments").querySelector("input");
  if (arg && arg.value.trim()) values.args = arg.value.trim();
  return values;
}

function fillForm(values) {
  for (const input of $("options").querySelectorAll("[data-flag]")) {
    const v = values[input.dataset.flag];
    if (input.type === "checkbox") input.checked = Boolean(v);
    else input.value = v || "";
    if (v) input.closest("details").open = true;
  }
  const arg = $("arguments").querySelector("input");
  if (arg) arg.value = values.args || "";
}

function source() { return document.querySelector('input[name="source"]:checked').value; }

function showSource() {
  const s = source();
  $("preset-box").hidden = s !== "preset";
  $("hub-box").hidden = s !== "hub";
  $("file-box").hidden = s !== "file";
}

// --- the question: the command line, and the pasted file --------------------------------------------------------
function question() {
  const command = page.commands[page.view];
  const argv = [page.view];
  const values = readForm();
  if (values.args) argv.push(...values.args.split(/\s+/));
  const s = source();
  let file = null;
  if (s === "preset" && $("preset").value.trim()) argv.push("--preset", $("preset").value.trim());
  if (s === "hub" && $("hub").value.trim()) argv.push("--hf-model", $("hub").value.trim());
  if (s === "file" && $("file-text").value) {
    const name = $("file-name").value.trim() || "config.json";
    argv.push($("file-kind").value, name);
    file = {name, text: $("file-text").value};
  }
  const offered = new Map(command.options.map((o) => [o.flag, o]));
  for (const o of command.options) for (const f of [o.flag, o.off]) if (f) offered.set(f, o);
  for (const [flag, v] of Object.entries(values)) {
    if (flag === "args") continue;
    const o = offered.get(flag);
    if (!o) continue;
    if (o.is_flag && o.off) argv.push(v);
    else if (o.is_flag) argv.push(flag);
    else argv.push(flag, v);
  }
  return {argv, file};
}

// --- the URL: the view, the model and every value set ----------------------------------------------------------
function writeUrl() {
  const p = new URLSearchParams();
  p.set("view", page.view);
  const s = source();
  if (s === "preset") p.set("preset", $("preset").value.trim());
  if (s === "hub") p.set("hf-model", $("hub").value.trim());
  if (s === "file") {
    p.set("file-kind", $("file-kind").value);
    p.set("file-name", $("file-name").value);
    p.set("file-text", $("file-text").value);
  }
  for (const [k, v] of Object.entries(readForm())) p.set(k === "args" ? "args" : k.replace(/^--/, ""), v);
  history.replaceState(null, "", `?${p.toString()}`);
}

function readUrl() {
  const p = new URLSearchParams(location.search);
  const view = p.get("view");
  if (view && page.commands[view]) page.view = view;
  const pick = (value) => { document.querySelector(`input[name="source"][value="${value}"]`).checked = true; };
  if (p.has("hf-model")) { pick("hub"); $("hub").value = p.get("hf-model"); }
  else if (p.has("file-text")) {
    pick("file");
    $("file-kind").value = p.get("file-kind") === "--config" ? "--config" : "--hf-config";
    $("file-name").value = p.get("file-name") || "config.json";
    $("file-text").value = p.get("file-text");
  } else { pick("preset"); $("preset").value = p.has("preset") ? p.get("preset") : "llama3-8b"; }
  const values = {};
  for (const [k, v] of p) {
    if (["view", "preset", "hf-model", "file-kind", "file-name", "file-text"].includes(k)) continue;
    values[k === "args" ? "args" : `--${k}`] = v;
  }
  return p.has("view") ? values : {...(STARTS[page.view] || {})};
}

// --- asking the server -------------------------------------------------------------------------------------------
async function ask(q) {
  const response = await fetch("/api/answer", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify(q)});
  return parseExact(await response.text());
}

let timer = null;
function changed() {
  document.body.dataset.state = "busy";  // until the answer to the newest question is shown
  page.pending = true;
  clearTimeout(timer);
  timer = setTimeout(refresh, 250);
}

async function refresh() {
  clearTimeout(timer);
  page.pending = false;
  writeUrl();
  const q = question();
  $("command-line").value = shellJoin(["llmcalc", ...q.argv]);
  const seq = ++page.answerSeq;
  document.body.dataset.state = "busy";
  $("status").textContent = "…";
  let result;
  try {
    result = await ask(q);
  } catch (e) {
    if (seq === page.answerSeq && !page.pending) {
      $("status").textContent = "no answer from the server";
      document.body.dataset.state = "error";
    }
    return;
  }
  if (seq !== page.answerSeq || page.pending) return;  // a newer question is on its way
  $("status").textContent = "";
  for (const e of document.querySelectorAll(".field-error")) e.textContent = "";
  $("error").textContent = "";
  $("explain").hidden = true;
  if (result.error) {
    const target = fieldError(result.field);
    if (target) target.textContent = result.error;
    $("error").textContent = `error: ${result.error}`;
    $("view").replaceChildren();
    document.body.dataset.state = "error";
    return;
  }
  $("command-line").value = result.command_line;
  page.report = result.report;
  render(page.view, result.report);
  document.body.dataset.state = "answered";
}

function fieldError(flag) {
  if (!flag) return null;
  if (MODEL_FLAGS.includes(flag)) return $("err-model");
  return document.getElementById(`err${flag}`);
}

function shellJoin(words) {
  return words.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\"'\"'")}'`)).join(" ");
}

// --- the answer --------------------------------------------------------------------------------------------------
function render(command, report) {
  const view = $("view");
  view.replaceChildren();
  if (page.chart) { page.chart.destroy(); page.chart = null; }
  const parts = memoryParts(report);
  if (parts.length) view.append(memoryBar(report, parts));
  if (command === "sweep" && Array.isArray(report.rows) && report.rows.length) view.append(sweepChart(report));
  view.append(...figures(report, ""));
}

function figureButton(path, v) {
  const s = shown(path, v);
  const button = el("button", {type: "button", class: "figure", "data-path": path, "data-value": raw(v),
    title: `${path} = ${raw(v)} (click: its formula)`, text: s.text});
  button.addEventListener("click", () => explainFigure(path));
  return [button, s.unit ? el("span", {class: "unit", text: ` ${s.unit}`}) : null];
}

const STATS = ["mean", "p50", "p90", "p95", "p99", "min", "max", "std"];
const isStats = (v) => v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length
  && Object.keys(v).every((k) => STATS.includes(k));

function statsTable(obj, prefix) {
  // The distributions of a report (serve's ttft_s, tpot_s, …) in one table: a row each, a column per statistic.
  const rows = Object.entries(obj).filter(([, v]) => isStats(v));
  if (rows.length < 2) return null;
  const columns = STATS.filter((c) => rows.some(([, v]) => c in v));
  return el("div", {class: "scroll"}, el("table", {class: "stats"}, el("caption", {text: "distributions"}),
    el("thead", {}, el("tr", {}, el("th", {scope: "col", text: "figure"}), ...columns.map((c) => el("th", {scope: "col", text: c})))),
    el("tbody", {}, ...rows.map(([k, v]) => el("tr", {}, el("th", {scope: "row", text: k}),
      ...columns.map((c) => cell(prefix ? `${prefix}.${k}.${c}` : `${k}.${c}`, `${k}.${c}`, v[c])))))));
}

function figures(obj, prefix) {
  const out = [];
  const scalars = el("tbody");
  const notes = [];
  const stats = statsTable(obj || {}, prefix);
  for (const [k, v] of Object.entries(obj || {})) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (stats && isStats(v)) continue;
    if (k === "notes" && Array.isArray(v)) { notes.push(...v); continue; }
    if (v === null || typeof v !== "object") {
      if (k === "formula" && typeof v === "string") { out.push(el("p", {class: "formula", text: `formula: ${v}`})); continue; }
      const cell = el("td", {class: isNum(v) ? "num" : null}, ...(isNum(v) ? figureButton(path, v) : [shown(k, v).text]));
      scalars.append(el("tr", {}, el("th", {scope: "row", text: k}), cell));
    } else if (Array.isArray(v)) {
      if (v.length && v.every((x) => x && typeof x === "object" && !Array.isArray(x))) out.push(listTable(k, v, path));
      else if (v.length) scalars.append(el("tr", {}, el("th", {scope: "row", text: k}), el("td", {text: v.map((x) => (typeof x === "string" ? x : raw(x))).join(", ")})));
    } else {
      out.push(el("div", {class: "nested"}, el("h3", {text: k}), ...figures(v, path)));
    }
  }
  const table = el("table", {class: "figures"}, scalars);
  const parts = [stats, table, ...out].filter(Boolean);
  if (notes.length) parts.push(el("ul", {class: "notes"}, ...notes.map((n) => el("li", {text: n}))));
  return parts;
}

const COMPACT = ["symbols"];  // objects shown in one cell as name = value (explain's symbols of a formula)

function flat(row, prefix = "", out = {}) {
  // A row's fields, objects within it flattened (ratios.kv_bytes_per_token) but for COMPACT ones; a list within
  // it stays one cell.
  for (const [k, v] of Object.entries(row)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v) && typeof v !== "bigint" && !COMPACT.includes(k)) flat(v, key, out);
    else out[key] = v;
  }
  return out;
}

function listTable(name, rows, path) {
  const flats = rows.map((r) => flat(r));
  const keys = [];
  for (const r of flats) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
  if (page.view === "compare" && name === "rows") return sideBySide(name, flats, keys, path);
  const head = el("tr", {}, ...keys.map((k) => el("th", {scope: "col", text: k})));
  const body = flats.map((r, i) => el("tr", {}, ...keys.map((k) => cell(`${path}.${i}.${k}`, k, r[k]))));
  return el("div", {class: "scroll"}, el("table", {}, el("caption", {text: name}), el("thead", {}, head), el("tbody", {}, ...body)));
}

function cell(path, key, v) {
  if (isNum(v)) return el("td", {class: "num"}, ...figureButton(path, v));
  if (v && typeof v === "object" && !Array.isArray(v)) {  // a COMPACT object: name = value, each a figure
    const td = el("td", {class: "formula"});
    Object.entries(v).forEach(([k, x], i) => {
      td.append(document.createTextNode(`${i ? ", " : ""}${k} = `));
      if (isNum(x)) td.append(figureButton(`${path}.${k}`, x)[0]); else td.append(document.createTextNode(shown(k, x).text));
    });
    return td;
  }
  const text = Array.isArray(v) ? v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(", ")
    : shown(key, v).text;
  return el("td", {text});
}

function sideBySide(name, flats, keys, path) {
  // compare's variants as columns, each figure a row: the variants side by side.
  const head = el("tr", {}, el("th", {scope: "col", text: "figure"}),
    ...flats.map((r) => el("th", {scope: "col", text: String(r.name ?? "")})));
  const body = keys.filter((k) => k !== "name").map((k) => el("tr", {}, el("th", {scope: "row", text: k}),
    ...flats.map((r, i) => cell(`${path}.${i}.${k}`, k, r[k]))));
  return el("div", {class: "scroll"}, el("table", {}, el("caption", {text: name}), el("thead", {}, head),
    el("tbody", {}, ...body)));
}

function memoryParts(report) {
  // What fills the memory: memory's breakdown, or fit's weights, activations and KV cache.
  if (!report || typeof report !== "object") return [];
  const parts = Array.isArray(report.breakdown) ? report.breakdown
    : isNum(report.usable_bytes) && isNum(report.weights_bytes)
      ? [["weights", "weights_bytes"], ["activations", "activation_bytes"], ["kv_cache", "kv_bytes"]]
        .filter(([, k]) => isNum(report[k])).map(([component, k]) => ({component, bytes: report[k]}))
      : [];
  return parts.filter((b) => isNum(b.bytes) && Number(b.bytes) > 0);
}

function memoryBar(report, parts) {
  const capacity = report.usable_bytes ?? report.capacity_bytes ?? null;
  const total = parts.reduce((a, b) => a + Number(b.bytes), 0);
  const scale = Math.max(total, capacity ? Number(capacity) : 0) || 1;
  const colours = ["--seg1", "--seg2", "--seg3", "--seg4", "--seg5", "--seg6"];
  const bar = el("div", {class: "bar", role: "img",
    "aria-label": `What fills the GPU: ${parts.map((p) => `${p.component} ${shown("bytes", p.bytes).unit}`).join("; ")}`});
  const legend = el("ul", {class: "legend"});
  parts.forEach((p, i) => {
    const colour = `var(${colours[i % colours.length]})`;
    bar.append(el("div", {style: {width: `${(100 * Number(p.bytes)) / scale}%`, background: colour},
      title: `${p.component}: ${shown("bytes", p.bytes).unit}`}));
    legend.append(el("li", {}, el("span", {style: {background: colour}}),
      document.createTextNode(`${p.component} ${scaled(Number(p.bytes), 1000, ["B", "kB", "MB", "GB", "TB"])}`)));
  });
  const caption = capacity
    ? `of ${scaled(Number(capacity), 1000, ["B", "kB", "MB", "GB", "TB"])} usable per GPU`
    : "no GPU given: the bar is the total";
  return el("figure", {}, bar, legend, el("figcaption", {class: "notes", text: `What fills the memory, ${caption}`}));
}

function sweepChart(report) {
  const rows = report.rows;
  const metrics = Object.keys(rows[0]).filter((k) => rows.some((r) => isNum(r[k])) && !["batch", "seq"].includes(k));
  const select = el("select", {id: "metric"}, ...metrics.map((m) => el("option", {value: m, text: m})));
  const holder = el("div", {id: "chart"});
  const controls = el("div", {class: "chart-controls"}, el("label", {for: "metric", text: "Plotted figure"}), select);
  const draw = () => {
    if (page.chart) page.chart.destroy();
    const metric = select.value;
    const seqs = [...new Set(rows.map((r) => Number(r.seq)))].sort((a, b) => a - b);
    const groups = [...new Set(rows.map((r) => `${r.model} · batch ${r.batch}`))];
    const data = [seqs, ...groups.map((g) => seqs.map((s) => {
      const r = rows.find((x) => `${x.model} · batch ${x.batch}` === g && Number(x.seq) === s);
      return r && isNum(r[metric]) ? Number(r[metric]) : null;
    }))];
    const colours = ["#0969da", "#1a7f37", "#bf8700", "#8250df", "#cf222e", "#57606a"];
    const width = Math.max(320, Math.min(900, holder.clientWidth || 700));
    page.chart = new uPlot({width, height: 320, scales: {x: {time: false, distr: 3}},
      axes: [{label: "tokens per sequence (seq)"}, {label: metric, size: 80}],
      series: [{label: "seq"}, ...groups.map((g, i) => ({label: g, stroke: colours[i % colours.length], width: 2}))]},
    data, holder);
  };
  select.addEventListener("change", draw);
  const wrap = el("figure", {}, controls, holder);
  requestAnimationFrame(() => { if (typeof uPlot !== "undefined") draw(); });
  return wrap;
}

// --- a figure's formula ----------------------------------------------------------------------------------------
async function explainFigure(path) {
  const aside = $("explain");
  aside.hidden = false;
  aside.replaceChildren(el("p", {text: `${path}: …`}));
  const field = path;
  let body = null;
  if (EXPLAINED.includes(page.view)) {
    const q = question();
    const explainOptions = new Set(page.commands.explain.options.flatMap((o) => [o.flag, o.off]).filter(Boolean));
    const argv = ["explain", page.view];
    const words = q.argv.slice(1);
    const command = page.commands[page.view];
    const takesValue = new Set(command.options.filter((o) => !o.is_flag).map((o) => o.flag));
    for (let i = 0; i < words.length; i += 1) {
      const w = words[i];
      if (!w.startsWith("--")) continue;
      const keep = explainOptions.has(w);
      if (takesValue.has(w)) { if (keep) argv.push(w, words[i + 1]); i += 1; } else if (keep) argv.push(w);
    }
    const result = await ask({argv, file: q.file});
    if (result.report) {
      const r = result.report;
      const total = r.totals.find((t) => t.source === `llmcalc ${page.view}: ${field}`);
      const rows = (total ? [total] : []).concat(r.steps);
      body = [el("p", {}, el("strong", {text: total ? `${field} = ` : `${field}: no single formula; the terms of ${page.view}'s figures`}),
        total ? el("code", {text: `${total.formula} = ${total.substituted} = ${raw(total.value)}`}) : null),
      el("div", {class: "scroll"}, el("table", {}, el("thead", {}, el("tr", {}, ...["term", "formula", "arithmetic", "value"].map((h) => el("th", {text: h})))),
        el("tbody", {}, ...rows.map((s) => el("tr", {}, el("td", {text: s.component}), el("td", {class: "formula", text: s.formula}),
          el("td", {class: "formula", text: s.substituted}), el("td", {class: "num", text: `${raw(s.value)} ${s.unit || ""}`})))))),
      el("dl", {}, ...Object.entries(r.legend || {}).flatMap(([k, v]) => [el("dt", {class: "formula", text: k}), el("dd", {text: v})])),
      el("p", {class: "notes", text: `llmcalc ${shellJoin(argv)}`})];
    } else if (result.error) {
      body = [el("p", {class: "error", text: result.error})];
    }
  }
  if (!body) {
    const formula = page.report && typeof page.report.formula === "string" ? page.report.formula : null;
    body = [el("p", {}, el("strong", {text: `${field}: `}), el("span", {class: "formula",
      text: formula ? `the report's formula: ${formula}` : "this view has no formula; see docs/ for its derivation"}))];
  }
  const close = el("button", {type: "button", text: "Close"});
  close.addEventListener("click", () => { aside.hidden = true; });
  aside.replaceChildren(...body, close);
}

// --- start -------------------------------------------------------------------------------------------------------
function drawTabs() {
  const nav = $("views");
  nav.replaceChildren(...page.schema.commands.map((c) => {
    const b = el("button", {type: "button", role: "tab", id: `tab-${c.name}`, "aria-selected": String(c.name === page.view),
      title: c.help, text: c.name});
    b.addEventListener("click", () => switchView(c.name));
    return b;
  }));
}

function switchView(name) {
  const kept = readForm();
  page.view = name;
  drawTabs();
  drawForm();
  const offered = new Set(page.commands[name].options.map((o) => o.flag));
  const values = {...(STARTS[name] || {})};
  for (const [k, v] of Object.entries(kept)) if (offered.has(k)) values[k] = v;
  fillForm(values);
  refresh();
}

async function fillLists() {
  const [presets, gpus] = await Promise.all([ask({argv: ["presets"]}), ask({argv: ["gpus"]})]);
  $("preset-list").replaceChildren(...(presets.report || []).map((p) => el("option", {value: p.name, text: `${p.name} (${p.attention})`})));
  const list = el("datalist", {id: "gpu-list"}, ...(gpus.report || []).map((g) => el("option", {value: g.name, text: g.description})));
  document.body.append(list);
}

async function start() {
  const response = await fetch("/api/schema");
  page.schema = parseExact(await response.text());
  for (const c of page.schema.commands) page.commands[c.name] = c;
  const values = readUrl();
  drawTabs();
  drawForm();
  fillForm(values);
  showSource();
  for (const r of document.querySelectorAll('input[name="source"]')) r.addEventListener("change", () => { showSource(); changed(); });
  for (const id of ["preset", "hub", "file-text", "file-name", "file-kind"]) $(id).addEventListener("input", changed);
  $("file-pick").addEventListener("change", async () => {
    const f = $("file-pick").files[0];
    if (!f) return;
    if (f.size > 1 << 20) { $("err-model").textContent = `${f.name}: ${f.size.toLocaleString("en-US")} bytes, more than 1 MiB`; return; }
    $("file-text").value = await f.text();
    $("file-name").value = f.name;
    $("file-kind").value = /\.ya?ml$/i.test(f.name) ? "--config" : "--hf-config";
    changed();
  });
  $("copy").addEventListener("click", async () => {
    try { await navigator.clipboard.writeText($("command-line").value); $("status").textContent = "copied"; }
    catch (e) { $("command-line").select(); $("status").textContent = "selected: copy it with Ctrl-C"; }
  });
  await refresh();
  fillLists();  // after the first answer: the pickers' lists (every preset read) wait for it, not it for them
}

start();
