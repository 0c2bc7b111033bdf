// scratchformer's attention explorer: asks the server for the numbers (/api/model, /api/explore) and
// draws them; in a page exported to one file (`explore --export`, the Export button) the numbers are inside
// the page instead and nothing is asked of a server. Plain JavaScript, no libraries (figures.js, loaded
// first, holds the colours and the SVG and PNG files). Text from the model (tokens, outputs) is only ever
// set as textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);

// The options a family's request may carry (see model_view.OPTIONS): label, input type, step, hint.
const OPTION_UI = {
  top_k: ["next-token candidates", "number", 1, ""],
  max_new_tokens: ["new tokens", "number", 1, "length of the sampled continuation"],
  temperature: ["temperature", "number", 0.05, "below 1: more predictable"],
  sample_top_k: ["sampling top-k", "number", 1, "empty: sample from every token"],
  seed: ["seed", "number", 1, "the same seed, the same sample"],
  beam: ["beam size", "number", 1, "1: greedy"],
  length_penalty: ["length penalty α", "number", 0.1, "the paper's 0.6"],
  target: ["target", "text", null, "optional: teacher-force this output instead of the translation"],
};

// By the family's output (the family registry's words).
const PLACEHOLDERS = {
  "next-token": "type a prompt; the page shows how each token attends to the ones before it",
  translation: "type a sentence to translate",
  classes: "type a text to classify",
};

const state = { info: null, result: null, view: 0, layer: 0, head: 0, kindChosen: false, request: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) node.append(child);
  return node;
}

function setStatus(message, isError = false) {
  const status = $("status");
  status.textContent = message;
  status.classList.toggle("error", isError);
}

// ------------------------------------------------------------------------------------------ model

async function loadModel() {
  const response = await fetch("/api/model");
  const info = await response.json();
  if (!response.ok) throw new Error(info.error || response.statusText);
  showModel(info);
  setStatus(`at most ${info.limits.max_chars} characters and ${info.limits.max_tokens} tokens`);
  $("text").focus();
}

function showModel(info) {
  state.info = info;
  const layers = Object.entries(info.layers).map(([stack, n]) => `${n} ${stack} layers`).join(" + ");
  $("model-summary").textContent = [
    info.name, info.family_name, layers, `${info.n_heads} heads`, `d_model ${info.d_model}`,
    `${info.parameters.toLocaleString("en")} parameters`, `step ${info.step}`,
  ].filter(Boolean).join(" · ");
  $("text-label").textContent = info.output === "next-token" ? "Prompt" : "Input";
  const text = $("text");
  text.placeholder = PLACEHOLDERS[info.output];
  text.maxLength = info.limits.max_chars;
  buildOptions(info.options);
}

function buildOptions(options) {
  const box = $("options");
  box.replaceChildren();
  for (const [name, value] of Object.entries(options)) {
    const [label, type, step, hint] = OPTION_UI[name] || [name, "text", null, ""];
    const input = el("input", { id: `opt-${name}`, name, type, title: hint });
    if (step !== null) input.step = step;
    if (value !== null) input.value = value;
    if (type === "text") input.placeholder = hint;
    box.append(el("label", { class: type === "text" ? "wide" : "" }, label, input));
  }
}

function readOptions() {
  const options = {};
  for (const name of Object.keys(state.info.options)) {
    const input = $(`opt-${name}`);
    const raw = input.value.trim();
    if (raw === "") options[name] = null;
    else if (input.type === "number") options[name] = Number(raw);
    else options[name] = input.value;
  }
  return options;
}

// --------------------------------------------------------------------------------------- explore

async function run(event) {
  event.preventDefault();
  const text = $("text").value;
  if (!text) {
    setStatus("type an input first", true);
    return;
  }
  const button = $("run");
  button.disabled = true;
  setStatus("running the model…");
  const started = performance.now();
  try {
    const request = { text, ...readOptions() };
    const response = await fetch("/api/explore", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
    });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    const previous = state.result && state.kindChosen ? state.result.attention[state.view].kind : null;
    state.result = data;
    state.request = request;
    $("export-html").disabled = false;
    render(data, previous);
    setStatus(`${data.tokens.length} tokens · ${Math.round(performance.now() - started)} ms`);
  } catch (err) {
    setStatus(err.message, true);
  } finally {
    button.disabled = false;
  }
}

function render(data, previousKind) {
  $("results").hidden = false;
  renderOutput(data);
  renderTokens(data.tokens, data.token_ids);
  // the kind of attention the user chose last, else the most telling: cross-attention for
  // translation, the only one for the other families
  const keep = data.attention.findIndex((v) => v.kind === previousKind);
  const cross = data.attention.findIndex((v) => v.kind === "decoder.cross_attn");
  state.view = keep >= 0 ? keep : Math.max(cross, 0);
  buildKinds();
  selectView(state.view, true);
  renderLens(data.lens, showLayer);
  markLens();
}

function tokenChips(tokens, ids, cls = "") {
  return tokens.map((t, i) => el("span", { class: `token ${cls}`, title: `position ${i}, id ${ids[i]}: ${JSON.stringify(t)}`,
    text: shown(t) }));
}

function renderTokens(tokens, ids) {
  $("tokens").replaceChildren(...tokenChips(tokens, ids));
  $("token-count").textContent = `${tokens.length} tokens`;
}

function bars(rows, cls) {
  // rows: [{label, prob}], drawn as horizontal bars with the probability in per cent
  const list = el("ol", { class: `bars ${cls}` });
  const best = Math.max(...rows.map((r) => r.prob));
  for (const row of rows) {
    const bar = el("span", { class: "bar" });
    bar.style.width = `${(100 * row.prob).toFixed(2)}%`;
    list.append(el("li", { "data-prob": String(row.prob), class: row.prob === best ? "best" : "" },
      el("span", { class: "token", text: shown(row.label) }),
      el("span", { class: "track" }, bar),
      el("span", { class: "pct", text: `${(100 * row.prob).toFixed(1)} %` })));
  }
  return list;
}

function renderOutput(data) {
  const out = $("output");
  out.replaceChildren();
  if (data.output === "next-token") {
    $("output-title").textContent = "Next token and a sampled continuation";
    const o = data.options;
    const settings = [`temperature ${o.temperature}`, o.sample_top_k ? `top-k ${o.sample_top_k}` : null,
      `seed ${o.seed}`].filter(Boolean).join(", ");
    out.append(
      el("div", { class: "two-columns" },
        el("div", {},
          el("h3", { text: `The ${data.next_tokens.length} most likely next tokens` }),
          bars(data.next_tokens.map((t) => ({ label: t.token, prob: t.prob })), "next-tokens")),
        el("div", {},
          el("h3", { text: `Continuation (${data.continuation.tokens.length} tokens sampled, ${settings})` }),
          el("p", { class: "continuation" },
            el("span", { class: "prompt", text: data.input }),
            el("span", { id: "continuation", class: "generated", text: data.continuation.text })))));
  } else if (data.output === "translation") {
    const given = data.target !== undefined;
    const t = given ? data.target : data.translation;
    $("output-title").textContent = given ? "Teacher-forced target"
      : (state.info.output_name || "Output");
    const how = given ? "the decoder reads the target you gave"
      : `beam search: beam ${t.beam}, length penalty α ${t.length_penalty}`;
    out.append(el("p", { id: "translation", class: "translation", text: t.text || "(empty)" }),
      el("p", { class: "hint", text: how }),
      el("div", { class: "tokens" }, ...tokenChips(t.tokens, t.token_ids, "out")));
    if (data.truncated_target) out.append(el("p", { class: "hint", text: "the output is cut to the token cap in the attention maps" }));
  } else {
    $("output-title").textContent = "Class probabilities";
    if (data.classes) out.append(bars(data.classes.map((c) => ({ label: c.label, prob: c.prob })), "classes"));
    else out.append(el("p", { class: "hint", text: data.note }));
  }
}

// -------------------------------------------------------------------------------------- attention

function buildKinds() {
  const tabs = $("kinds");
  tabs.replaceChildren();
  state.result.attention.forEach((view, i) => {
    const tab = el("button", { type: "button", role: "tab", text: view.title, "data-kind": view.kind });
    tab.addEventListener("click", () => { state.kindChosen = true; selectView(i, true); });
    tabs.append(tab);
  });
}

function fillSelect(select, n, word, value) {
  select.replaceChildren(...Array.from({ length: n }, (_, i) => el("option", { value: String(i), text: `${word} ${i}` })));
  select.value = String(value);
}

function selectView(index, rebuild) {
  state.view = index;
  const view = state.result.attention[index];
  const nLayers = view.weights.length;
  const nHeads = view.weights[0].length;
  state.layer = Math.min(state.layer, nLayers - 1);
  state.head = Math.min(state.head, nHeads - 1);
  [...$("kinds").children].forEach((tab, i) => tab.setAttribute("aria-selected", String(i === index)));
  fillSelect($("layer"), nLayers, "layer", state.layer);
  fillSelect($("head"), nHeads, "head", state.head);
  if (rebuild) drawOverview(view);
  drawHeatmap();
}

function drawHeatmap() {
  const view = state.result.attention[state.view];
  const matrix = view.weights[state.layer][state.head];
  const T = view.queries.length;
  const S = view.keys.length;
  const box = $("heatmap");
  // Cells as large as fit about 560 pixels, between 6 and 30; labels on every k-th row and column
  // when the cells are too small for a line of text.
  const cell = Math.max(6, Math.min(30, Math.floor(560 / Math.max(T, S))));
  const every = Math.ceil(11 / cell);
  box.style.setProperty("--cell", `${cell}px`);
  box.style.gridTemplateColumns = `auto repeat(${S}, ${cell}px)`;
  box.dataset.kind = view.kind;
  box.dataset.layer = String(state.layer);
  box.dataset.head = String(state.head);
  const max = largest(matrix);
  const scale = max > 0 ? max : 1;

  const nodes = [el("div", { class: "corner", text: view.kind.endsWith("cross_attn") ? "target ↓ · source →" : "query ↓ · key →" })];
  view.keys.forEach((k, j) => nodes.push(el("div", { class: "col-label", "data-k": String(j), title: k,
    text: j % every === 0 ? shown(k) : "" })));
  matrix.forEach((row, i) => {
    nodes.push(el("div", { class: "row-label", "data-q": String(i), title: view.queries[i],
      text: i % every === 0 ? shown(view.queries[i]) : "" }));
    row.forEach((v, j) => {
      const c = el("div", { class: "cell", "data-q": String(i), "data-k": String(j), "data-value": String(v) });
      c.style.backgroundColor = rgb(v / scale);
      nodes.push(c);
    });
  });
  box.replaceChildren(...nodes);
  $("legend-max").textContent = max.toFixed(3);
  $("heatmap-caption").textContent = `${view.title}, layer ${state.layer}, head ${state.head}: ${T} queries × ${S} keys`
    + " (colour: 0 to this map's largest weight)";
  for (const thumb of $("overview").querySelectorAll("canvas")) {
    thumb.classList.toggle("selected", thumb.dataset.layer === box.dataset.layer && thumb.dataset.head === box.dataset.head);
  }
  markLens();
}

// ------------------------------------------------------------------------------- layer by layer

// The stack the lens reads (an encoder-decoder's decoder; a one-stack model's own), as the page's data says.
function lensStack() {
  return state.result.lens_stack;
}

// The lens's row of the layer drawn above, when the drawn attention is of the stack the lens reads.
function markLens() {
  const view = state.result.attention[state.view];
  markLensLayer(view.kind.startsWith(lensStack()) ? state.layer : -1);
}

// A click on the lens's row of block `layer`: draw that layer's attention (of the stack the lens reads).
function showLayer(layer) {
  const views = state.result.attention;
  let index = state.view;
  if (!views[index].kind.startsWith(lensStack())) {
    const cross = views.findIndex((v) => v.kind === "decoder.cross_attn");
    index = cross >= 0 ? cross : views.findIndex((v) => v.kind.startsWith(lensStack()));
  }
  const changed = index !== state.view;
  state.layer = layer;
  selectView(index, changed);
  $("attention-card").scrollIntoView({ block: "start" });
}

function drawOverview(view) {
  const box = $("overview");
  const nHeads = view.weights[0].length;
  box.style.gridTemplateColumns = `max-content repeat(${nHeads}, minmax(0, 72px))`;
  // with many heads, only their numbers fit above the thumbnails; the corner says what they count
  const many = nHeads > 6;
  const nodes = [el("span", { class: "ov-layer", text: many ? "head →" : "" })];
  for (let h = 0; h < nHeads; h++) nodes.push(el("span", { class: "ov-head", text: many ? String(h) : `head ${h}` }));
  view.weights.forEach((heads, l) => {
    nodes.push(el("span", { class: "ov-layer", text: `layer ${l}` }));
    heads.forEach((matrix, h) => {
      const canvas = el("canvas", { width: matrix[0].length, height: matrix.length, title: `layer ${l}, head ${h}`,
        "data-layer": String(l), "data-head": String(h) });
      paint(canvas, matrix);
      canvas.addEventListener("click", () => {
        state.layer = l;
        state.head = h;
        $("layer").value = String(l);
        $("head").value = String(h);
        drawHeatmap();
      });
      nodes.push(canvas);
    });
  });
  box.replaceChildren(...nodes);
}

// ---------------------------------------------------------------------------------------- tooltip

function hover(event) {
  const tip = $("tooltip");
  const target = event.target;
  for (const old of document.querySelectorAll(".heatmap .lit")) old.classList.remove("lit");
  if (!target.classList || !target.classList.contains("cell")) {
    tip.hidden = true;
    return;
  }
  const view = state.result.attention[state.view];
  const q = Number(target.dataset.q);
  const k = Number(target.dataset.k);
  const value = Number(target.dataset.value);
  for (const label of document.querySelectorAll(`.heatmap .row-label[data-q="${q}"], .heatmap .col-label[data-k="${k}"]`)) {
    label.classList.add("lit");
  }
  tip.replaceChildren(
    el("div", {}, el("span", { class: "dim", text: `query ${q} ` }), el("b", { text: shown(view.queries[q]) }),
      el("span", { class: "dim", text: ` → key ${k} ` }), el("b", { text: shown(view.keys[k]) })),
    el("div", { class: "value", text: `${value.toFixed(4)}  (${(100 * value).toFixed(1)} %)` }));
  tip.hidden = false;
  const x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  tip.style.left = `${x}px`;
  tip.style.top = `${event.clientY + 16}px`;
}

// ---------------------------------------------------------------------------------- files to keep

// Save the drawn map ("heatmap") or every layer and head ("overview") as an SVG or PNG file.
async function save(which, format) {
  if (!state.result) return;
  const view = state.result.attention[state.view];
  const input = `“${clipped(state.result.input, 60)}”`;
  try {
    if (which === "heatmap") {
      const caption = `${view.title}, layer ${state.layer}, head ${state.head}: ${input}`;
      await saveFigure(heatmapFigure(view, state.layer, state.head, caption), format,
        `${view.kind}-layer${state.layer}-head${state.head}`);
    } else {
      await saveFigure(overviewFigure(view, `${view.title}, every layer and head: ${input}`), format, `${view.kind}-all`);
    }
  } catch (err) {
    setStatus(`cannot save the ${format.toUpperCase()}: ${err.message}`, true);
  }
}

// The page as one file, the numbers of the input shown inside it: the server writes it (/api/export), the
// same file `scratchformer explore --export` writes, and opens it on the view drawn now.
async function exportHtml() {
  const button = $("export-html");
  button.disabled = true;
  setStatus("writing the page…");
  try {
    const view = { kind: state.result.attention[state.view].kind, layer: state.layer, head: state.head };
    const response = await fetch("/api/export", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...state.request, view }),
    });
    if (!response.ok) throw new Error((await response.json()).error || response.statusText);
    download(await response.blob(), "attention-view.html");
    setStatus("saved attention-view.html: it opens in a browser from the disk, offline");
  } catch (err) {
    setStatus(`cannot export: ${err.message}`, true);
  } finally {
    button.disabled = false;
  }
}

// ------------------------------------------------------------------------------------ a saved page

// A page exported to one file: its inputs' numbers are in the JSON block "explore-data"; the input and
// options are shown as they were run, and the views work as in the served page.
function startOffline(saved) {
  document.body.classList.add("offline");
  showModel(saved.info);
  $("text").readOnly = true;
  for (const input of $("options").querySelectorAll("input")) {
    input.disabled = true;
    input.placeholder = "not set";
  }
  const picker = $("inputs");
  if (saved.results.length > 1) {
    picker.replaceChildren(...saved.results.map((r, i) => el("option", { value: String(i),
      text: `input ${i + 1} of ${saved.results.length}: ${clipped(r.input, 80)}` })));
    picker.hidden = false;
    picker.addEventListener("change", () => showSaved(saved.results[Number(picker.value)]));
  }
  const first = saved.initial || {};
  state.layer = first.layer ?? 0;
  state.head = first.head ?? 0;
  state.kindChosen = Boolean(first.kind);
  showSaved(saved.results[0], first.kind || null);
  const n = saved.results.length;
  setStatus(`a saved page: ${n} input${n > 1 ? "s" : ""}, every number inside this file; it asks no server`);
}

function showSaved(result, kind = null) {
  $("text").value = result.input;
  for (const [name, value] of Object.entries(result.options)) {
    const input = $(`opt-${name}`);
    if (input) input.value = value === null ? "" : String(value);
  }
  const previous = kind || (state.result && state.kindChosen ? state.result.attention[state.view].kind : null);
  state.result = result;
  render(result, previous);
}

// ------------------------------------------------------------------------------------------- start

document.addEventListener("DOMContentLoaded", () => {
  const saved = $("explore-data");
  $("form").addEventListener("submit", saved ? (event) => event.preventDefault() : run);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      if (!saved) $("form").requestSubmit();
    }
  });
  $("export-html").addEventListener("click", exportHtml);
  for (const format of ["svg", "png"]) {
    $(`save-${format}`).addEventListener("click", () => save("heatmap", format));
    $(`save-overview-${format}`).addEventListener("click", () => save("overview", format));
  }
  $("layer").addEventListener("change", (e) => { state.layer = Number(e.target.value); drawHeatmap(); });
  $("head").addEventListener("change", (e) => { state.head = Number(e.target.value); drawHeatmap(); });
  $("heatmap").addEventListener("mousemove", hover);
  $("heatmap").addEventListener("mouseleave", () => {
    $("tooltip").hidden = true;
    for (const old of document.querySelectorAll(".heatmap .lit")) old.classList.remove("lit");
  });
  if (saved) startOffline(JSON.parse(saved.textContent));
  else loadModel().catch((err) => setStatus(`cannot load the model: ${err.message}`, true));
});
