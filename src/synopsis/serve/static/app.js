// The synopsis web page: plain JavaScript against the JSON API (/v1), no build step, no network beyond it.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const OPTION_NAMES = ["num_beams", "min_length", "max_length", "no_repeat_ngram_size", "length_penalty", "k"];
  const state = { models: [], results: [], lastDocument: null, sections: null, stats: null };

  function showError(message) {
    const box = $("error");
    box.textContent = message;
    box.hidden = false;
  }

  function clearError() {
    const box = $("error");
    box.textContent = "";
    box.hidden = true;
  }

  // With `synopsis serve --auth-token-file`, /v1 needs "Authorization: Bearer <token>". The page asks for
  // the token on the first 401 and keeps it for this tab only (sessionStorage), asking again if it is wrong.
  const TOKEN_KEY = "synopsis-api-token";

  function authHeaders() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }

  async function send(path, body) {
    const init = () => ({
      method: body === undefined ? "GET" : "POST",
      headers: Object.assign(body === undefined ? {} : { "Content-Type": "application/json" }, authHeaders()),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let response;
    try {
      response = await fetch(path, init());
      if (response.status === 401) {
        const token = window.prompt("This server needs an API token:");
        if (token) {
          sessionStorage.setItem(TOKEN_KEY, token.trim());
          response = await fetch(path, init());
        }
      }
    } catch (err) {
      throw new Error("Could not reach the server: " + err.message);
    }
    return response;
  }

  async function failure(response) {
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    const message = data && data.error ? data.error.message : "HTTP " + response.status;
    return new Error(message + " (" + response.status + ")");
  }

  // The API answers errors as {"error": {"code", "message", "field"}}; anything else is reported plainly.
  async function callApi(path, body) {
    const response = await send(path, body);
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  // "stream": true answers NDJSON, one event per line; onEvent sees each as soon as its line is complete.
  async function streamApi(path, body, onEvent) {
    const response = await send(path, body);
    if (!response.ok) throw await failure(response);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) onEvent(JSON.parse(line));
      }
      if (done) break;
    }
  }

  function selectedModel() {
    return state.models.find((m) => m.name === $("model").value) || null;
  }

  function updateModelInfo() {
    const model = selectedModel();
    if (!model) {
      $("model-info").textContent = "";
      return;
    }
    const uses = model.instructions ? "uses instructions" : "ignores instructions (one plain summary each time)";
    const runs = model.device ? " It runs on " + model.device + " (" + model.dtype + ")." : "";
    $("model-info").textContent = model.description + ". This model " + uses + "." + runs;
    document.querySelectorAll("[data-option]").forEach((field) => {
      field.hidden = !model.options.includes(field.dataset.option);
    });
    $("options").hidden = model.options.length === 0;
  }

  async function loadModels() {
    try {
      const data = await callApi("/v1/models");
      state.models = data.models;
      const select = $("model");
      select.replaceChildren();
      for (const model of data.models) {
        const option = document.createElement("option");
        option.value = model.name;
        // "lead-3", "default", or "bart (seq2seq)": the method only where the name does not say it
        option.textContent = model.name === model.method ? model.name : model.name + " (" + model.method + ")";
        select.appendChild(option);
      }
      if (data.default) select.value = data.default;
      updateModelInfo();
    } catch (err) {
      showError("Could not load the models: " + err.message);
    }
  }

  // Where the server's models compute (synopsis serve --device), from /health (open without a token).
  async function loadDevice() {
    try {
      const response = await fetch("/health");
      if (!response.ok) return;
      const data = await response.json();
      $("device").textContent = "Models compute on " + data.device;
    } catch (err) {
      $("device").textContent = "";
    }
  }

  function options() {
    const model = selectedModel();
    const out = {};
    for (const name of OPTION_NAMES) {
      const input = $("opt-" + name);
      if (!model || !model.options.includes(name) || input.value.trim() === "") continue;
      out[name] = Number(input.value);
    }
    return out;
  }

  function renderOutline(sections, stats) {
    const container = $("outline");
    container.replaceChildren();
    if (stats) {
      const p = document.createElement("p");
      p.className = "hint";
      p.textContent = "Read as " + stats.format + ": " + plural(stats.sections, "section") + ", " +
        plural(stats.sentences, "sentence") + ", " + plural(stats.words, "word") + ".";
      container.appendChild(p);
    }
    const tree = document.createElement("ul");
    tree.className = "tree";
    tree.appendChild(outlineNode(sections));
    container.appendChild(tree);
  }

  function outlineNode(node) {
    const item = document.createElement("li");
    const label = document.createElement("span");
    label.className = "heading";
    let heading = node.heading;
    if (node.depth === 0) heading = heading || "Document";
    else if (!heading) heading = "(untitled section)";
    label.textContent = (node.number ? node.number + " " : "") + heading;
    const count = document.createElement("span");
    count.className = "count";
    count.textContent = node.depth === 0
      ? plural(node.total_sentences, "sentence") + " in all" +
        (node.sentences ? ", " + node.sentences + " before the first heading" : "")
      : plural(node.sentences, "sentence") +
        (node.children.length ? " (" + node.total_sentences + " with subsections)" : "");
    item.append(label, " ", count);
    if (node.children.length) {
      const list = document.createElement("ul");
      for (const child of node.children) list.appendChild(outlineNode(child));
      item.appendChild(list);
    }
    return item;
  }

  function renderQuestionOutline(outline) {
    // Sent when a summary is a question-summary hierarchy; plain summaries leave the explanation.
    if (outline === null || outline === undefined) return;
    const container = $("qs-outline");
    const pre = document.createElement("pre");
    pre.textContent = outline.text;
    container.replaceChildren(pre);
  }

  function renderResults() {
    const list = $("summaries");
    list.replaceChildren();
    state.results.forEach((result, index) => {
      const item = document.createElement("li");
      item.className = "result";
      const head = document.createElement("div");
      head.className = "result-head";
      const title = document.createElement("span");
      title.className = "instruction";
      title.textContent = result.instruction ? result.instruction : "Summary (no instruction)";
      const meta = document.createElement("span");
      meta.className = "meta";
      meta.textContent = result.model + " · " + formatMs(result.summary_ms) + " model · " +
        (result.total_ms === null ? "..." : formatMs(result.total_ms) + " request");
      head.append(title, meta);
      const text = document.createElement("p");
      text.className = "summary";
      text.setAttribute("data-testid", "summary");
      text.textContent = result.summary;
      item.appendChild(head);
      if (result.method) {  // the method that wrote it (the default's is the bundled model or salient)
        const by = document.createElement("p");
        by.className = "written-by";
        by.setAttribute("data-testid", "written-by");
        by.textContent = "written by: " + result.method;
        item.appendChild(by);
      }
      if (result.title && !result.structured) {  // by document: headed by what the document is called
        const named = document.createElement("p");
        named.className = "summary-title";
        named.setAttribute("data-testid", "summary-title");
        named.textContent = 'Summary of "' + result.title + '"';  // as the CLI prints it
        item.appendChild(named);
      }
      if (result.note) {  // e.g. why the default's summary is extractive: read before the summary
        const note = document.createElement("p");
        note.className = "summary-note";
        note.setAttribute("data-testid", "summary-note");
        note.textContent = result.note;
        item.appendChild(note);
      }
      item.appendChild(text);
      for (const warning of result.warnings) {
        const note = document.createElement("p");
        note.className = "hint";
        note.textContent = warning;
        item.appendChild(note);
      }
      item.setAttribute("aria-label", "Summary " + (index + 1));
      list.appendChild(item);
    });
    const empty = state.results.length === 0;
    $("no-summaries").hidden = !empty;
    $("download").disabled = empty;
    $("clear").disabled = empty;
  }

  // A summary by section: each section's heading and summary sentences; clicking a sentence marks its
  // sources (character offsets into the submitted text) in the document view.
  function renderSectionSummaries(structured, text) {
    const box = $("section-outline");
    const list = $("section-summaries");
    list.replaceChildren();
    box.hidden = !structured;
    $("document-panel").hidden = !structured;
    if (!structured) return;
    showDocument(text, []);
    // the root's own text (before the first heading) is the preface; skipped sections keep their place.
    // A heading without a summary of its own waits for one below it: none is shown over nothing.
    const stack = structured.sections.slice().reverse();
    if (structured.preface) stack.push(structured.preface);
    let waiting = [];  // [depth, block] of the headings over no summary yet
    while (stack.length) {
      const node = stack.pop();
      if (node.skipped) continue;
      const children = node.sections || [];
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
      waiting = waiting.filter(([depth]) => depth < node.path.length);
      const block = document.createElement("div");
      block.className = "section-block";
      block.style.marginLeft = Math.max(0, node.path.length - 1) + "rem";
      const heading = document.createElement("div");
      heading.className = "section-heading";
      heading.textContent = sectionHeading(node);
      block.appendChild(heading);
      if (node.summary.length) {
        const sentences = document.createElement("ul");
        sentences.className = "section-summary";
        sentences.setAttribute("data-testid", "section-summary");
        for (const sentence of node.summary) sentences.appendChild(sentenceItem(sentence, text));
        block.appendChild(sentences);
        for (const [, over] of waiting) list.appendChild(over);
        waiting = [];
        list.appendChild(block);
      } else {
        waiting.push([node.path.length, block]);
      }
    }
    if (!structured.summary) return;  // still streaming: the document summary comes with the summary event
    const whole = document.createElement("div");
    whole.className = "section-block";
    const heading = document.createElement("div");
    heading.className = "section-heading";
    // headed by what the document is called (its title, not one of the summary's sentences)
    heading.textContent = structured.title ? "Document summary: " + structured.title : "Document summary";
    const sentences = document.createElement("ul");
    sentences.className = "section-summary document-summary";
    for (const sentence of structured.summary) sentences.appendChild(sentenceItem(sentence, text));
    whole.append(heading, sentences);
    list.appendChild(whole);
  }

  // A section without a heading: the preface (the text before the first heading) is the document's opening;
  // any other is named by its place ("Section 2.1").
  function sectionHeading(node) {
    if (node.heading) return node.heading;
    if (!node.path.length) return "Opening";
    return "Section " + node.path.map((i) => i + 1).join(".");
  }

  function sentenceItem(sentence, text) {
    const item = document.createElement("li");
    item.className = "summary-sentence";
    item.setAttribute("data-testid", "summary-sentence");
    item.tabIndex = 0;
    item.textContent = sentence.text;
    item.title = "Support " + (sentence.support === null ? "-" : sentence.support.toFixed(2)) + "; " +
      plural(sentence.sources.length, "source");
    const select = () => {
      document.querySelectorAll(".summary-sentence.selected").forEach((el) => el.classList.remove("selected"));
      item.classList.add("selected");
      showDocument(text, sentence.sources);
    };
    item.addEventListener("click", select);
    item.addEventListener("keydown", (event) => { if (event.key === "Enter") select(); });
    return item;
  }

  // The API's offsets count code points (Python's string indices); a JavaScript string counts UTF-16 units, in
  // which a character beyond U+FFFF (an emoji, 𝐀) takes two. units[i] is code point i's first unit; built
  // once per text (a surrogate without its pair counts one, as in Python).
  const unitsOf = { text: null, units: null };

  function codeUnits(text) {
    if (unitsOf.text === text) return unitsOf.units;
    const units = new Uint32Array(text.length + 1);
    let n = 0;
    for (let i = 0; i < text.length; i++) {
      units[n++] = i;
      const c = text.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
        const next = text.charCodeAt(i + 1);
        if (next >= 0xdc00 && next <= 0xdfff) i++;
      }
    }
    units[n] = text.length;
    unitsOf.text = text;
    unitsOf.units = units.subarray(0, n + 1);
    return unitsOf.units;
  }

  function showDocument(text, sources) {
    const view = $("document-view");
    view.replaceChildren();
    const units = codeUnits(text);
    const unit = (offset) => units[Math.min(offset, units.length - 1)];
    const spans = sources.filter((s) => s.start !== null && s.end !== null).sort((a, b) => a.start - b.start);
    let at = 0;
    for (const span of spans) {
      const start = unit(span.start);
      if (start < at) continue;
      view.appendChild(document.createTextNode(text.slice(at, start)));
      const mark = document.createElement("mark");
      mark.setAttribute("data-testid", "source-highlight");
      mark.textContent = text.slice(start, unit(span.end));
      view.appendChild(mark);
      at = unit(span.end);
    }
    view.appendChild(document.createTextNode(text.slice(at)));
    // Sources without offsets (Document JSON input) are listed, marked alike, after the text.
    for (const source of sources.filter((s) => s.start === null || s.end === null)) {
      const mark = document.createElement("mark");
      mark.setAttribute("data-testid", "source-highlight");
      mark.textContent = source.text;
      view.append(document.createTextNode("\n"), mark);
    }
    // The document view scrolls to the first source; the page stays where the reader clicked unless the
    // view is not yet beside it (near the top the form is above it): then the page moves as little as it can.
    const first = view.querySelector("mark");
    if (!first) return;
    view.scrollTop = Math.max(0, first.offsetTop - view.clientHeight / 3);
    const box = first.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) first.scrollIntoView({ block: "nearest" });
  }

  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  function formatMs(ms) {
    return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : Math.round(ms) + " ms";
  }

  async function summarize(event) {
    event.preventDefault();
    clearError();
    const documentText = $("document").value;
    const instruction = $("instruction").value.trim();
    const body = {
      document: documentText,
      format: $("format").value,
      model: $("model").value || "default",
    };
    if (instruction) body.instructions = [instruction];
    if ($("by-section").checked) body.by = "section";
    const opts = options();
    if (Object.keys(opts).length) body.options = opts;
    const button = $("submit");
    button.disabled = true;
    $("status").textContent = "Summarizing...";
    body.stream = true;
    const arrived = [];  // this request's results, shown as their events arrive
    const streamed = [];  // by section: the current summary's sections so far
    try {
      await streamApi("/v1/summarize", body, (event) => {
        if (event.event === "parsed") {
          renderOutline(event.sections, event.document);
        } else if (event.event === "section") {
          // By section: each section's summary as soon as it is done, in document order; the whole
          // tree and the document summary replace them when the request's summary arrives.
          streamed.push({ ...event.section, sections: [] });
          renderSectionSummaries({ sections: streamed, summary: null }, documentText);
        } else if (event.event === "summary") {
          const result = {
            model: body.model,
            instruction: event.instruction,
            summary: event.summary,
            summary_ms: event.ms,
            total_ms: null,
            options: opts,
            warnings: [],
            note: event.structured ? event.structured.note : null,
            method: event.method || (event.structured && event.structured.method) || null,
            title: event.structured ? event.structured.title : null,
            // by document the same schema has no sections: the outline of section summaries is by section only
            structured: event.by === "section" ? event.structured : null,
          };
          arrived.push(result);
          state.results.push(result);
          renderResults();
          if (result.structured) renderSectionSummaries(result.structured, documentText);
          streamed.length = 0;
        } else if (event.event === "done") {
          const data = event.response;
          arrived.forEach((result, k) => {
            const answered = (data.summaries || [])[k];
            if (!result.method && answered) {
              result.method = answered.method || (answered.structured && answered.structured.method) || null;
            }
            result.model = data.model;
            result.total_ms = data.timing_ms.total;
            result.warnings = data.warnings;
          });
          state.lastDocument = documentText;
          state.sections = data.sections;
          state.stats = data.document;
          renderResults();
          const last = arrived.length ? arrived[arrived.length - 1].structured : null;
          renderSectionSummaries(last, documentText);
          renderOutline(data.sections, data.document);
          renderQuestionOutline(data.outline);
          $("status").textContent = "Done: " + formatMs(data.timing_ms.total) + ".";
          $("instruction").value = "";
          $("instruction").focus();
        } else if (event.event === "error") {
          throw new Error(event.error.message + " (" + event.status + ")");
        }
      });
    } catch (err) {
      $("status").textContent = "";
      showError(err.message);
    } finally {
      button.disabled = false;
    }
  }

  async function showOutline() {
    clearError();
    try {
      const data = await callApi("/v1/outline", { document: $("document").value, format: $("format").value });
      renderOutline(data.sections, data.document);
    } catch (err) {
      showError(err.message);
    }
  }

  function loadFile() {
    const file = $("file").files[0];
    if (!file) return;
    const name = file.name.toLowerCase();
    if (name.endsWith(".md") || name.endsWith(".markdown")) $("format").value = "markdown";
    else if (name.endsWith(".rst") || name.endsWith(".rest")) $("format").value = "rst";
    else if (name.endsWith(".json")) $("format").value = "json";
    else if (name.endsWith(".txt") || name.endsWith(".text")) $("format").value = "text";
    const reader = new FileReader();
    reader.onload = () => {
      $("document").value = reader.result;
      showOutline();
    };
    reader.onerror = () => showError("Could not read " + file.name);
    reader.readAsText(file);
  }

  function download() {
    const payload = {
      document: state.stats,
      sections: state.sections,
      results: state.results.map((r) => ({
        model: r.model,
        instruction: r.instruction,
        summary: r.summary,
        note: r.note,
        method: r.method,
        title: r.title,
        structured: r.structured,
        options: r.options,
        timing_ms: { summary: r.summary_ms, request: r.total_ms },
      })),
    };
    const blob = new Blob([JSON.stringify(payload, null, 2)], { type: "application/json" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "synopsis-summaries.json";
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  function clearResults() {
    state.results = [];
    renderResults();
    renderSectionSummaries(null, "");
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("summarize-form").addEventListener("submit", summarize);
    $("model").addEventListener("change", updateModelInfo);
    $("outline-button").addEventListener("click", showOutline);
    $("file").addEventListener("change", loadFile);
    $("download").addEventListener("click", download);
    $("clear").addEventListener("click", clearResults);
    renderResults();
    loadModels();
    loadDevice();
  });
})();
