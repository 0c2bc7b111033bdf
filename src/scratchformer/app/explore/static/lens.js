// scratchformer's attention explorer: each layer's prediction, layer by layer (the logit lens; the numbers
// are lens_view.py's). A table whose rows are the layers (after the embeddings, after each block) and whose
// columns are the positions: each cell names the token that layer would predict there, coloured by the
// probability the layer gives the token the model finally predicts; its tooltip lists the layer's top tokens.
// A classifier's table has its classes as columns. Loaded after figures.js (colours, labels), before explore.js.
"use strict";

function lensCell(text, prob, attrs) {
  const cell = el("td", { class: "lens-cell", text, ...attrs });
  cell.dataset.prob = String(prob);
  cell.style.backgroundColor = rgb(prob);
  cell.classList.toggle("light", prob > 0.55);  // dark text on the yellow end of the colour map
  return cell;
}

function lensRowLabel(name, onLayer) {
  const th = el("th", { scope: "row", class: "lens-row", text: name });
  const block = name.startsWith("layer ") ? Number(name.slice(6)) : null;
  if (block !== null && onLayer) {
    th.classList.add("pick");
    th.title = `show ${name}'s attention above`;
    th.addEventListener("click", () => onLayer(block));
  }
  return th;
}

function percent(p) {
  return `${(100 * p).toFixed(1)} %`;
}

function tokenLensTable(lens, onLayer) {
  const head = el("tr", {}, el("th", { class: "lens-corner", text: "reads →" }),
    ...lens.positions.map((t, i) => el("th", { class: "lens-pos", title: `position ${i}: ${JSON.stringify(t)}`,
      text: clipped(shown(t), 8) })));
  const body = lens.rows.map((name, r) => el("tr", { "data-row": name },
    lensRowLabel(name, onLayer),
    ...lens.positions.map((t, i) => {
      const top = lens.top[r][i];
      const final = lens.final[i].token;
      const title = [`${name}, position ${i} (reads ${JSON.stringify(t)})`,
        ...top.map((c) => `  ${JSON.stringify(c.token)} ${percent(c.prob)}`),
        `the model's prediction ${JSON.stringify(final)}: ${percent(lens.final_probs[r][i])} here`].join("\n");
      return lensCell(clipped(shown(top[0].token), 8), lens.final_probs[r][i],
        { title, "data-pos": String(i), "data-top": top[0].token });
    })));
  const foot = el("tr", { class: "lens-final" }, el("th", { scope: "row", text: "prediction" }),
    ...lens.final.map((f) => el("td", { class: "lens-pos", text: clipped(shown(f.token), 8), "data-token": f.token })));
  return el("table", { id: "lens-table", class: "lens-table" }, el("thead", {}, head), el("tbody", {}, ...body),
    el("tfoot", {}, foot));
}

function classLensTable(lens) {
  const head = el("tr", {}, el("th", { class: "lens-corner", text: "class →" }),
    ...lens.labels.map((label) => el("th", { class: "lens-pos", text: label })));
  const body = lens.rows.map((name, r) => el("tr", { "data-row": name }, lensRowLabel(name, null),
    ...lens.probs[r].map((p, k) => lensCell(percent(p), p, { title: `${name}: ${lens.labels[k]} ${percent(p)}`,
      "data-pos": String(k) }))));
  return el("table", { id: "lens-table", class: "lens-table classes" }, el("thead", {}, head), el("tbody", {}, ...body));
}

// Fill the lens card; onLayer(i) is called when the row of block i is clicked (to show that layer's attention).
function renderLens(lens, onLayer) {
  const card = $("lens-card");
  card.hidden = !lens;
  if (!lens) return;
  $("lens-title").textContent = lens.title;
  const box = $("lens");
  $("lens-legend").hidden = lens.kind === "none";
  if (lens.kind === "none") {
    $("lens-how").textContent = "";
    box.replaceChildren(el("p", { class: "hint", text: lens.note }));
    return;
  }
  $("lens-legend-what").textContent = lens.kind === "tokens" ? "the probability of the model's prediction"
    : "the probability of the class";
  const how = lens.kind === "tokens"
    ? "Each cell: the token that layer would predict next at that position (hover for its top tokens); its colour: "
      + "the probability the layer gives the token the model finally predicts (the bottom row)."
    : `${lens.note}. Each cell: a class's probability after that layer.`;
  $("lens-how").textContent = `${how} How a layer is read: ${lens.readout}.`;
  box.replaceChildren(lens.kind === "tokens" ? tokenLensTable(lens, onLayer) : classLensTable(lens));
}

// Outline the row of the layer whose attention is drawn.
function markLensLayer(layer) {
  for (const row of document.querySelectorAll("#lens-table tbody tr")) {
    row.classList.toggle("current", row.dataset.row === `layer ${layer}`);
  }
}
