// The chat page of `scratchformer serve`: a conversation with the model through the server's own OpenAI API
// (/v1/chat/completions, streamed), or, for a model without a chat template, a text it continues (/v1/completions).
// Nothing is loaded from another host; every text from the model or the user is set as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { model: null, chat: true, messages: [], controller: null };

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function errorText(response) {
  try {
    const body = await response.json();
    return body.error && body.error.message ? body.error.message : `HTTP ${response.status}`;
  } catch (_) {
    return `HTTP ${response.status}`;
  }
}

async function loadModel() {
  const response = await fetch("/v1/models", { headers: headers() });
  if (!response.ok) {
    setStatus(`${await errorText(response)} (set the API key in the settings, then reload)`, true);
    return;
  }
  const card = (await response.json()).data[0];
  state.model = card.id;
  state.chat = card.chat;
  $("model-summary").textContent = `${card.id} · ${card.context_window} tokens of context · ` +
    (card.chat ? `chat (${card.template} template)` : "no chat template: the model continues your text");
  $("system-label").hidden = !card.chat;
  $("input").placeholder = card.chat ? $("input").placeholder : "Write the start of a text for the model to continue";
  render();
}

// One message: a bubble whose text is in a .reply span (a completion's prompt before it, in a .prompt span).
function bubble(kind, text, prompt = null) {
  const node = document.createElement("div");
  node.className = `message ${kind}`;
  if (prompt !== null) {
    node.append(Object.assign(document.createElement("span"), { className: "prompt", textContent: prompt }));
  }
  node.append(Object.assign(document.createElement("span"), { className: "reply", textContent: text }));
  return node;
}

function render() {
  const box = $("conversation");
  box.replaceChildren();
  if (!state.messages.length) {
    const hint = state.chat ? "No messages yet." : "No text yet.";
    box.append(Object.assign(document.createElement("p"), { className: "empty", textContent: hint }));
  }
  for (const m of state.messages) {
    const node = state.chat ? bubble(m.role, m.content) : bubble("text", m.content, m.prompt);
    if (m.finish !== undefined) node.dataset.finish = m.finish;
    if (m.meta) showMeta(node, [m.meta]);
    box.append(node);
  }
}

function settings() {
  const body = { model: state.model, stream: true, stream_options: { include_usage: true } };
  const number = (id) => ($(id).value.trim() === "" ? null : Number($(id).value));
  for (const key of ["temperature", "top_p", "max_tokens", "seed"]) {
    const value = number(key);
    if (value !== null) body[key] = value;
  }
  const stops = $("stop_texts").value.split("\n").filter((s) => s.length);
  if (stops.length) body.stop = stops;
  return body;
}

// Reads a stream of server-sent events, calling onData with each event's JSON (until "[DONE]").
async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

function showMeta(node, parts) {
  let meta = node.querySelector(".meta");
  if (!meta) {
    meta = Object.assign(document.createElement("span"), { className: "meta" });
    node.append(meta);
  }
  meta.textContent = parts.filter(Boolean).join(" · ");
  return meta.textContent;
}

async function send(text) {
  const body = settings();
  let reply;
  if (state.chat) {
    const system = $("system").value.trim();
    body.messages = [...(system ? [{ role: "system", content: system }] : []), ...state.messages,
                     { role: "user", content: text }];
    state.messages.push({ role: "user", content: text });
    reply = { role: "assistant", content: "" };
  } else {
    body.prompt = text;
    reply = { prompt: text, content: "" };
  }
  state.messages.push(reply);
  render();
  const node = $("conversation").lastElementChild;
  const target = node.querySelector(".reply");
  node.classList.add("streaming");
  const started = performance.now();
  const info = { finish: null, tokens: null, warning: null };
  state.controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  setStatus("answering…");
  try {
    const url = state.chat ? "/v1/chat/completions" : "/v1/completions";
    const response = await fetch(url, { method: "POST", headers: headers(), body: JSON.stringify(body),
                                        signal: state.controller.signal });
    if (!response.ok) throw new Error(await errorText(response));
    await readEvents(response, (data) => {
      if (data.error) throw new Error(data.error.message);
      if (data.warning) info.warning = data.warning;
      if (data.usage) info.tokens = data.usage.completion_tokens;
      const choice = data.choices && data.choices[0];
      if (!choice) return;
      const piece = state.chat ? (choice.delta.content || "") : choice.text;
      if (piece) {
        reply.content += piece;
        target.textContent = reply.content;
        $("conversation").scrollTop = $("conversation").scrollHeight;
      }
      if (choice.finish_reason) info.finish = choice.finish_reason;
    });
    const seconds = (performance.now() - started) / 1000;
    reply.finish = node.dataset.finish = info.finish || "";
    reply.meta = showMeta(node, [info.tokens !== null && `${info.tokens} token${info.tokens === 1 ? "" : "s"} in ${seconds.toFixed(1)} s`,
                                 info.finish === "length" ? "stopped at max tokens" : "",
                                 reply.content ? "" : "an empty answer: the model ended at once", info.warning]);
    setStatus("");
  } catch (err) {
    const stopped = err.name === "AbortError";
    node.dataset.finish = stopped ? "stopped" : "error";
    if (!reply.content) {  // nothing came back: the message goes back into the box, to send again
      state.messages.splice(state.messages.length - (state.chat ? 2 : 1));
      $("input").value = text;
      render();
    } else if (stopped) {
      reply.finish = "stopped";
      reply.meta = showMeta(node, ["stopped"]);
    }
    setStatus(stopped ? "stopped" : err.message, !stopped);
  } finally {
    node.classList.remove("streaming");
    state.controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
  }
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("input").value;
  if (!text.trim() || state.controller || !state.model) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => state.controller && state.controller.abort());
$("clear").addEventListener("click", () => {
  if (state.controller) state.controller.abort();
  state.messages = [];
  render();
  setStatus("");
});
$("api_key").addEventListener("change", () => loadModel().catch((err) => setStatus(err.message, true)));
loadModel().catch((err) => setStatus(err.message, true));
