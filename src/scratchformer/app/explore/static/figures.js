// scratchformer's attention explorer: the colours, and the views as files to keep. An SVG is drawn from the
// numbers (each weight a rectangle that carries its value, each label text, so it scales and prints
// sharply); a PNG is that SVG painted on a canvas at twice its size. No libraries, nothing fetched: the
// same code runs in the served page and in a page exported to one file. explore.js uses these functions.
"use strict";

// viridis (matplotlib's default map), sampled at 9 points and interpolated linearly
const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];

function color(t) {
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - i;
  const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
  return [0, 1, 2].map((c) => Math.round(a[c] + f * (b[c] - a[c])));
}

function rgb(t) {
  const [r, g, b] = color(t);
  return `rgb(${r}, ${g}, ${b})`;
}

// Whitespace made visible: a token that is a space would otherwise be an empty box.
function shown(token) {
  if (token === "") return "∅";
  return token.replace(/ /g, "␣").replace(/\n/g, "⏎").replace(/\t/g, "⇥");
}

function largest(matrix) {
  let max = 0;
  for (const row of matrix) for (const v of row) max = Math.max(max, v);
  return max;
}

// One map as pixels, each weight's colour scaled to the map's largest weight (the overview's thumbnails).
function paint(canvas, matrix) {
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(canvas.width, canvas.height);
  const max = largest(matrix);
  matrix.forEach((row, i) => row.forEach((v, j) => {
    const [r, g, b] = color(max > 0 ? v / max : 0);
    image.data.set([r, g, b, 255], 4 * (i * canvas.width + j));
  }));
  ctx.putImageData(image, 0, 0);
}

// ------------------------------------------------------------------------------------------- SVG

const FIGURE_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif";
const LABEL_FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace";

function escapeXml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function clipped(label, n = 12) {
  const chars = [...label];
  return chars.length <= n ? label : `${chars.slice(0, n - 1).join("")}…`;
}

// Width of a text in pixels, roughly: monospace labels are 0.6 em a character, the sans titles about 0.56.
function textWidth(text, size, mono = true) {
  return [...String(text)].length * size * (mono ? 0.6 : 0.56);
}

function svgText(x, y, text, attrs = "") {
  return `<text x="${x}" y="${y}" ${attrs}>${escapeXml(text)}</text>`;
}

function svgDocument(width, height, body) {
  width = Math.ceil(width);
  height = Math.ceil(height);
  return {
    width, height,
    svg: `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" `
      + `font-family="${FIGURE_FONT}">\n<rect width="100%" height="100%" fill="white"/>\n${body.join("\n")}\n</svg>\n`,
  };
}

// The colour ramp under a figure: 0 at its left, `max` at its right.
function svgLegend(x, y, max) {
  const stops = VIRIDIS.map(([r, g, b], i) => `<stop offset="${(i / (VIRIDIS.length - 1)).toFixed(3)}" stop-color="rgb(${r}, ${g}, ${b})"/>`);
  return [
    `<defs><linearGradient id="ramp">${stops.join("")}</linearGradient></defs>`,
    svgText(x, y + 9, "0", `font-size="11" fill="#6b7280" font-family="${LABEL_FONT}"`),
    `<rect x="${x + 12}" y="${y}" width="180" height="10" rx="3" fill="url(#ramp)"/>`,
    svgText(x + 198, y + 9, max.toFixed(3), `font-size="11" fill="#6b7280" font-family="${LABEL_FONT}"`),
  ];
}

// One map (a view's layer and head) as the page draws it: cells sized to the number of tokens, labels on
// every k-th row and column when the cells are too small for a line of text. Returns {svg, width, height}.
function heatmapFigure(view, layer, head, caption) {
  const matrix = view.weights[layer][head];
  const T = view.queries.length;
  const S = view.keys.length;
  const cell = Math.max(6, Math.min(30, Math.floor(560 / Math.max(T, S))));
  const every = Math.ceil(11 / cell);
  const step = cell + 1;
  const rows = view.queries.map((t, i) => (i % every === 0 ? clipped(shown(t)) : ""));
  const cols = view.keys.map((t, j) => (j % every === 0 ? clipped(shown(t)) : ""));
  const rowWidth = Math.max(...rows.map((t) => textWidth(t, 11)), 30);
  const colHeight = Math.max(...cols.map((t) => textWidth(t, 11)), 20);
  const pad = 14;
  const gridX = pad + rowWidth + 8;
  const gridY = pad + 44 + colHeight + 8;
  const max = largest(matrix);
  const scale = max > 0 ? max : 1;
  const labelStyle = `font-size="11" fill="#3b4250" font-family="${LABEL_FONT}"`;
  const axes = view.kind.endsWith("cross_attn") ? "target tokens (queries) ↓ · columns: source tokens (keys) →"
    : "queries ↓ · columns: keys →";
  const body = [svgText(pad, pad + 13, caption, 'font-size="13" fill="#1f2430"'),
    svgText(pad, pad + 33, `rows: ${axes}`, 'font-size="11" fill="#6b7280"')];
  rows.forEach((t, i) => body.push(svgText(gridX - 6, gridY + i * step + cell / 2, t,
    `${labelStyle} text-anchor="end" dominant-baseline="central"`)));
  cols.forEach((t, j) => {
    const x = gridX + j * step + cell / 2;
    body.push(svgText(0, 0, t, `${labelStyle} dominant-baseline="central" transform="translate(${x} ${gridY - 6}) rotate(-90)"`));
  });
  matrix.forEach((row, i) => row.forEach((v, j) => body.push(`<rect x="${gridX + j * step}" y="${gridY + i * step}" `
    + `width="${cell}" height="${cell}" fill="${rgb(v / scale)}" data-q="${i}" data-k="${j}" data-value="${v}"/>`)));
  const legendY = gridY + T * step + 12;
  body.push(...svgLegend(gridX, legendY, max));
  const width = Math.max(gridX + S * step + pad, textWidth(caption, 13, false) + 2 * pad, gridX + 240,
    textWidth(`rows: ${axes}`, 11, false) + 2 * pad);
  return svgDocument(width, legendY + 10 + pad, body);
}

// Every layer and head of a view, one small picture each (the page's overview), each map's colours scaled to
// its own largest weight.
function overviewFigure(view, caption) {
  const nHeads = view.weights[0].length;
  const thumb = Math.max(24, Math.min(72, Math.floor(900 / nHeads)));
  const pad = 14;
  const left = pad + 52;
  const top = pad + 26 + 16;
  const body = [svgText(pad, pad + 13, caption, 'font-size="13" fill="#1f2430"')];
  for (let h = 0; h < nHeads; h++) {
    body.push(svgText(left + h * (thumb + 6) + thumb / 2, top - 5, nHeads > 6 ? String(h) : `head ${h}`,
      'font-size="11" fill="#6b7280" text-anchor="middle"'));
  }
  view.weights.forEach((heads, l) => {
    const y = top + l * (thumb + 6);
    body.push(svgText(pad, y + thumb / 2, `layer ${l}`, 'font-size="11" fill="#6b7280" dominant-baseline="central"'));
    heads.forEach((matrix, h) => {
      const canvas = document.createElement("canvas");
      canvas.width = matrix[0].length;
      canvas.height = matrix.length;
      paint(canvas, matrix);
      body.push(`<image x="${left + h * (thumb + 6)}" y="${y}" width="${thumb}" height="${thumb}" `
        + 'preserveAspectRatio="none" image-rendering="optimizeSpeed" style="image-rendering: pixelated" '
        + `data-layer="${l}" data-head="${h}" href="${canvas.toDataURL("image/png")}"/>`);
    });
  });
  const width = Math.max(left + nHeads * (thumb + 6) + pad, textWidth(caption, 13, false) + 2 * pad);
  return svgDocument(width, top + view.weights.length * (thumb + 6) + pad, body);
}

// ------------------------------------------------------------------------------------ saving files

async function pngOf(figure, scale = 2) {
  const image = new Image();
  image.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(figure.svg)}`;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = figure.width * scale;
  canvas.height = figure.height * scale;
  canvas.getContext("2d").drawImage(image, 0, 0, canvas.width, canvas.height);
  return new Promise((resolve, reject) => canvas.toBlob(
    (blob) => (blob ? resolve(blob) : reject(new Error("the browser could not make the PNG"))), "image/png"));
}

function download(blob, name) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
}

// Save a figure as "svg" or "png" under `name` (without its extension).
async function saveFigure(figure, format, name) {
  if (format === "svg") download(new Blob([figure.svg], { type: "image/svg+xml" }), `${name}.svg`);
  else download(await pngOf(figure), `${name}.png`);
}
