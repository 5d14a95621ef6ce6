// Boitata web UI: plain JavaScript, no build step, no dependencies.
//
// Pages (hash routes): "#/" lists blueprints and runs and starts a run; "#/runs/ID"
// follows one run's events live. Every API call goes through api(), which sends the
// token from sessionStorage as an Authorization header and asks for one when the
// server answers 401. Events are read from the SSE endpoint with fetch() (EventSource
// cannot send headers), resuming with Last-Event-ID after a dropped connection.
"use strict";

(() => {
  const TOKEN_KEY = "boitata.api-token";
  const FINAL = new Set(["succeeded", "failed", "cancelled"]);
  const MAX_RAW_LINES = 2000;

  // ---------------------------------------------------------------- helpers

  const $ = (selector, root = document) => root.querySelector(selector);

  /** Builds an element. Text is always set as text, never parsed as HTML. */
  // Bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) make
  // text read in another order than it is ("safe\u202etxt.exe" shows as
  // "safeexe.txt"): every untrusted text is shown with them as visible marks.
  const BIDI = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;
  function shown(text) {
    return String(text).replace(BIDI, (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}>`);
  }

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = shown(value);
      else if (key === "dataset") Object.assign(el.dataset, value);
      else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : shown(child));
    }
    return el;
  }

  const sleep = (ms, signal) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
    });

  function fmtDuration(ms) {
    if (!(ms >= 0)) return "";
    const s = ms / 1000;
    if (s < 10) return `${s.toFixed(1)} s`;
    if (s < 60) return `${Math.round(s)} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${String(Math.round(s % 60)).padStart(2, "0")} s`;
    return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
  }

  function fmtWhen(iso) {
    if (!iso) return "";
    const date = new Date(iso);
    const ago = Date.now() - date.getTime();
    if (ago < 45_000) return "just now";
    if (ago < 3_600_000) return `${Math.round(ago / 60_000)} min ago`;
    const sameDay = date.toDateString() === new Date().toDateString();
    const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return sameDay ? `today ${time}` : `${date.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
  }

  function statusBadge(status, id) {
    return h("span", { class: `status ${status}`, id, dataset: { status } }, status);
  }

  function firstLine(text, max = 140) {
    const line = String(text || "").split("\n")[0];
    return line.length > max ? `${line.slice(0, max)}…` : line;
  }

  // A tool call in one line: the arguments that matter for each tool, as the CLI
  // shows them (boitata_tools::tool::call_summary).
  function callSummary(tool, args) {
    args = args || {};
    const str = (k) => (typeof args[k] === "string" ? args[k] : null);
    const num = (k) => (typeof args[k] === "number" ? args[k] : null);
    const parts = [];
    const add = (v) => { if (v !== null && v !== undefined) parts.push(v); };
    switch (tool) {
      case "execute_command":
        add(str("command"));
        if (num("timeout_secs") !== null) add(`timeout ${num("timeout_secs")}s`);
        break;
      case "file_read": {
        add(str("path"));
        const first = Math.max(num("offset") || 1, 1);
        if (num("limit") !== null) add(`lines ${first}–${first + Math.max(num("limit") - 1, 0)}`);
        else if (first > 1) add(`from line ${first}`);
        break;
      }
      case "file_write":
        add(str("path"));
        if (str("content") !== null) add(`${new TextEncoder().encode(str("content")).length} bytes`);
        break;
      case "file_edit":
      case "list_dir":
        add(str("path"));
        break;
      case "search":
        if (str("pattern") !== null) add(`"${str("pattern")}" in ${str("path") || "."}`);
        if (str("glob") !== null) add(`glob ${str("glob")}`);
        break;
      case "git_status":
        break;
      case "git_diff":
        if (args.staged === true) add("--staged");
        add(str("path"));
        break;
      case "git_log":
        if (num("max_count") !== null) add(`max ${num("max_count")}`);
        break;
      case "git_commit":
        if (str("message") !== null) add(str("message").split("\n")[0]);
        if (args.all === true) add("all");
        break;
      default:
        for (const [k, v] of Object.entries(args)) add(`${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
    }
    return parts.join(", ").replace(/\r?\n|\r/g, " ");
  }

  let toastTimer = null;
  function toast(message) {
    const el = $("#toast");
    el.textContent = shown(message);
    el.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { el.hidden = true; }, 7000);
  }

  // ---------------------------------------------------------------- auth and API

  const auth = {
    get token() { return sessionStorage.getItem(TOKEN_KEY); },
    set(token) { sessionStorage.setItem(TOKEN_KEY, token); showSession(); },
    forget() { sessionStorage.removeItem(TOKEN_KEY); showSession(); },
    headers() { const t = this.token; return t ? { Authorization: `Bearer ${t}` } : {}; },
  };

  function showSession() {
    const has = Boolean(auth.token);
    $("#session-state").textContent = has ? "token set for this tab" : "";
    $("#forget-token").hidden = !has;
  }

  // One prompt at a time, shared by every request that got a 401.
  let tokenPrompt = null;
  function askToken(refused) {
    if (tokenPrompt) return tokenPrompt;
    tokenPrompt = new Promise((resolve) => {
      const dialog = $("#token-dialog");
      const form = $("#token-form");
      const input = $("#token-input");
      $("#token-error").hidden = !refused;
      input.value = "";
      const onSubmit = (event) => {
        event.preventDefault();
        const token = input.value.trim();
        if (!token) return;
        form.removeEventListener("submit", onSubmit);
        dialog.close();
        auth.set(token);
        tokenPrompt = null;
        resolve();
      };
      form.addEventListener("submit", onSubmit);
      dialog.showModal();
      input.focus();
    });
    return tokenPrompt;
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** Calls the API; asks for a token on 401 and retries. Returns the JSON body. */
  async function api(path, { method = "GET", body, signal } = {}) {
    for (;;) {
      const headers = { Accept: "application/json", ...auth.headers() };
      if (body !== undefined) headers["Content-Type"] = "application/json";
      const res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
        cache: "no-store",
      });
      if (res.status === 401) {
        await askToken(Boolean(auth.token));
        continue;
      }
      const text = await res.text();
      let data = null;
      try { data = text ? JSON.parse(text) : null; } catch { data = null; }
      if (!res.ok) throw new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`);
      return data;
    }
  }

  let blueprintCache = null;
  async function blueprints() {
    if (!blueprintCache) blueprintCache = api("/api/blueprints").catch((e) => { blueprintCache = null; throw e; });
    return blueprintCache;
  }

  /**
   * Follows a run's events (SSE over fetch) until run_finished, reconnecting with
   * Last-Event-ID when the connection drops. Calls onEvent(event) for each event and
   * onState(state) with "live", "reconnecting", "ended" or "error".
   */
  async function followEvents(runId, signal, onEvent, onState) {
    let last = 0;
    let finished = false;
    let delay = 500;
    while (!finished && !signal.aborted) {
      try {
        const headers = { Accept: "text/event-stream", ...auth.headers() };
        if (last > 0) headers["Last-Event-ID"] = String(last);
        const res = await fetch(`/api/runs/${encodeURIComponent(runId)}/events`, { headers, signal, cache: "no-store" });
        if (res.status === 401) {
          await askToken(Boolean(auth.token));
          continue;
        }
        if (!res.ok) {
          const body = await res.json().catch(() => null);
          throw new ApiError(res.status, (body && body.error) || res.statusText);
        }
        onState("live");
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        let data = [];
        let id = null;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let newline;
          while ((newline = buffer.indexOf("\n")) >= 0) {
            let line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            if (line.endsWith("\r")) line = line.slice(0, -1);
            if (line === "") {
              if (data.length > 0) {
                const event = JSON.parse(data.join("\n"));
                last = id !== null ? Number(id) : event.seq;
                if (event.type === "run_finished") finished = true;
                onEvent(event);
              }
              data = [];
              id = null;
            } else if (!line.startsWith(":")) {
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              let val = colon < 0 ? "" : line.slice(colon + 1);
              if (val.startsWith(" ")) val = val.slice(1);
              if (field === "data") data.push(val);
              else if (field === "id") id = val;
            }
          }
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ApiError && error.status < 500) {
          onState("error", error.message);
          return;
        }
      }
      if (finished || signal.aborted) break;
      onState("reconnecting");
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 10_000);
    }
    if (finished) onState("ended");
  }

  // ---------------------------------------------------------------- home page

  function homeView() {
    const controller = new AbortController();
    const view = $("#view");
    const formError = h("p", { class: "error-text", id: "form-error", hidden: true });
    const blueprintSelect = h("select", { id: "blueprint", name: "blueprint", required: true });
    const blueprintDesc = h("p", { class: "param-desc", id: "blueprint-desc" });
    const taskInput = h("textarea", {
      id: "task",
      name: "task",
      required: true,
      placeholder: "What should the run do? e.g. make the tests pass",
    });
    const paramsBox = h("div", { id: "params" });
    const submit = h("button", { type: "submit", class: "primary", id: "start-run" }, "Start run");
    const form = h(
      "form",
      { id: "run-form", class: "panel", autocomplete: "off" },
      h("div", { class: "panel-head" }, h("h2", {}, "Start a run")),
      h("label", { for: "blueprint" }, "Blueprint"),
      blueprintSelect,
      blueprintDesc,
      h("label", { for: "task" }, "Task", h("span", { class: "hint" }, "becomes {task} in the blueprint")),
      taskInput,
      paramsBox,
      h("div", { class: "form-actions" }, submit, formError),
    );
    const cards = h("div", { class: "blueprints", id: "blueprint-list" }, h("p", { class: "muted" }, "Loading blueprints…"));
    const runsBody = h("tbody", { id: "runs-body" });
    const runsPanel = h(
      "section",
      { class: "panel" },
      h("div", { class: "panel-head" }, h("h2", {}, "Runs"), h("span", { class: "spacer" }), h("span", { class: "muted", id: "runs-updated" })),
      h(
        "table",
        { class: "runs", id: "runs" },
        h("thead", {}, h("tr", {}, h("th", {}, "Status"), h("th", {}, "Task"), h("th", {}, "Blueprint"), h("th", {}, "Started"), h("th", {}, "Took"))),
        runsBody,
      ),
    );
    view.replaceChildren(
      h("div", { class: "grid-2" }, form, h("section", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", {}, "Blueprints")), cards)),
      runsPanel,
    );

    let offered = [];
    const selectBlueprint = (name) => {
      blueprintSelect.value = name;
      const bp = offered.find((b) => b.name === name);
      blueprintDesc.textContent = bp && bp.description ? shown(bp.description) : "";
      for (const card of cards.querySelectorAll(".blueprint")) card.classList.toggle("selected", card.dataset.name === name);
      paramsBox.replaceChildren(
        ...(bp ? bp.params : []).map((param) =>
          h(
            "div",
            { class: "param" },
            h(
              "label",
              { for: `param-${param.name}` },
              param.name,
              h("span", { class: "hint" }, param.required ? "required" : `default: ${param.default}`),
            ),
            h("input", {
              id: `param-${param.name}`,
              name: `param:${param.name}`,
              value: param.default ?? "",
              required: param.required,
              dataset: { param: param.name },
            }),
            param.description ? h("div", { class: "param-desc" }, param.description) : null,
          ),
        ),
      );
    };
    blueprintSelect.addEventListener("change", () => selectBlueprint(blueprintSelect.value));

    blueprints()
      .then((list) => {
        offered = list;
        if (list.length === 0) {
          cards.replaceChildren(h("p", { class: "empty" }, "No blueprints are offered. Put valid *.yaml files in the server's --blueprints-dir and restart it."));
          submit.disabled = true;
          return;
        }
        blueprintSelect.replaceChildren(...list.map((b) => h("option", { value: b.name }, b.name)));
        cards.replaceChildren(
          ...list.map((b) =>
            h(
              "div",
              { class: "blueprint", dataset: { name: b.name }, tabindex: 0, onclick: () => { selectBlueprint(b.name); taskInput.focus(); } },
              h("div", { class: "name" }, b.name),
              b.description ? h("div", { class: "desc" }, b.description) : null,
              h("div", { class: "chips" }, ...b.nodes.map((n) => h("span", { class: "chip", title: n.description || "" }, `${n.id} · ${n.type}`))),
            ),
          ),
        );
        selectBlueprint(list[0].name);
      })
      .catch((e) => cards.replaceChildren(h("p", { class: "error-text" }, `Cannot list blueprints: ${e.message}`)));

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      formError.hidden = true;
      const params = {};
      for (const input of paramsBox.querySelectorAll("input[data-param]")) params[input.dataset.param] = input.value;
      submit.disabled = true;
      try {
        const run = await api("/api/runs", {
          method: "POST",
          body: { blueprint: blueprintSelect.value, task: taskInput.value, params },
        });
        location.hash = `#/runs/${encodeURIComponent(run.id)}`;
      } catch (e) {
        formError.textContent = shown(e.message);
        formError.hidden = false;
        submit.disabled = false;
      }
    });

    const renderRuns = (runs) => {
      if (runs.length === 0) {
        runsBody.replaceChildren(h("tr", {}, h("td", { colspan: 5, class: "empty" }, "No runs yet. Start one above.")));
        return;
      }
      runsBody.replaceChildren(
        ...runs.map((run) => {
          const href = `#/runs/${encodeURIComponent(run.id)}`;
          const end = run.finished_at ? new Date(run.finished_at) : FINAL.has(run.status) ? null : new Date();
          const took = end ? fmtDuration(end - new Date(run.created_at)) : "";
          return h(
            "tr",
            { class: "run-row", dataset: { id: run.id }, onclick: () => { location.hash = href; } },
            h("td", {}, statusBadge(run.status)),
            h("td", { class: "task" }, h("a", { href, title: run.task }, firstLine(run.task, 90))),
            h("td", { class: "mono" }, run.blueprint || "—"),
            h("td", { title: run.created_at }, fmtWhen(run.created_at)),
            h("td", {}, took),
          );
        }),
      );
    };
    const refresh = async () => {
      try {
        renderRuns(await api("/api/runs?limit=50", { signal: controller.signal }));
        $("#runs-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      } catch (e) {
        if (!controller.signal.aborted) $("#runs-updated").textContent = `cannot refresh: ${e.message}`;
      }
    };
    refresh();
    const timer = setInterval(() => { if (document.visibilityState === "visible") refresh(); }, 3000);
    return { dispose() { controller.abort(); clearInterval(timer); } };
  }

  // ---------------------------------------------------------------- run page

  function runView(runId) {
    const controller = new AbortController();
    const view = $("#view");
    const status = statusBadge("queued", "run-status");
    const cancelButton = h("button", { type: "button", class: "danger", id: "cancel-run", disabled: true }, "Cancel run");
    const title = h("h1", { id: "run-task" }, "…");
    const facts = h("div", { class: "facts", id: "run-facts" });
    const errorBox = h("div", { class: "run-error", id: "run-error", hidden: true });
    const streamState = h("span", { class: "stream-state", id: "stream-state" }, "connecting…");
    const steps = h("ol", { class: "steps", id: "steps" });
    const timeline = h("div", { class: "timeline", id: "timeline" });
    const follow = h("input", { type: "checkbox", id: "follow", checked: true });
    const showRaw = h("input", { type: "checkbox", id: "show-raw" });
    const raw = h("pre", { class: "raw", id: "raw", hidden: true });
    view.replaceChildren(
      h(
        "section",
        { class: "panel" },
        h("div", { class: "run-header" }, h("div", { class: "title" }, title, facts), h("div", {}, status), cancelButton),
        errorBox,
      ),
      h(
        "div",
        { class: "run-layout" },
        h("aside", { class: "panel" }, h("h3", {}, "Nodes"), steps),
        h(
          "section",
          {},
          h(
            "div",
            { class: "toolbar" },
            streamState,
            h("span", { class: "spacer", style: null }),
            h("label", {}, follow, "Follow output"),
            h("label", {}, showRaw, "Raw events"),
          ),
          timeline,
          raw,
        ),
      ),
    );
    showRaw.addEventListener("change", () => { raw.hidden = !showRaw.checked; timeline.hidden = showRaw.checked; });

    const state = {
      run: null,
      startedAt: null,
      finishedAt: null,
      stepItems: new Map(), // node id -> { li, icon, visits }
      blocks: new Map(), // node id -> its latest block
      tools: new Map(), // call id -> { state, details }
      usage: { input: 0, output: 0, requests: 0 },
      budget: null, // the budget_exceeded message, once a budget is spent
      provider: null,
      queue: [],
      scheduled: false,
      rawLines: [],
    };

    const setStatus = (value) => {
      status.className = `status ${value}`;
      status.dataset.status = value;
      status.textContent = value;
      cancelButton.disabled = FINAL.has(value);
      cancelButton.hidden = FINAL.has(value);
    };

    const renderFacts = () => {
      const run = state.run;
      if (!run) return;
      const started = state.startedAt || new Date(run.created_at);
      const end = state.finishedAt || (run.finished_at ? new Date(run.finished_at) : null);
      const items = [
        ["blueprint", run.blueprint || "—"],
        ["run", run.id],
        ["created", fmtWhen(run.created_at)],
        [end ? "took" : "running for", fmtDuration((end || new Date()) - started)],
      ];
      if (state.provider) items.push(["model", state.provider]);
      if (state.usage.input || state.usage.output) items.push(["tokens", `${state.usage.input} in · ${state.usage.output} out · ${state.usage.requests} model requests`]);
      if (state.budget) items.push(["budget", state.budget]);
      const params = Object.entries(run.params || {});
      if (params.length) items.push(["params", params.map(([k, v]) => `${k}=${v}`).join(", ")]);
      facts.replaceChildren(...items.map(([k, v]) => h("span", {}, `${k} `, h("b", { class: k === "run" ? "mono" : null }, v))));
    };

    const stepFor = (nodeId, type) => {
      let item = state.stepItems.get(nodeId);
      if (!item) {
        const icon = h("span", { class: "icon" }, "○");
        const visits = h("span", { class: "visits" });
        const li = h("li", { class: "pending", dataset: { node: nodeId } }, icon, h("span", { class: "node-id" }, nodeId), visits, h("span", { class: "node-type" }, type || ""));
        steps.append(li);
        item = { li, icon, visits, count: 0 };
        state.stepItems.set(nodeId, item);
      }
      return item;
    };
    const markStep = (nodeId, phase) => {
      const item = stepFor(nodeId);
      item.li.className = phase;
      item.icon.textContent = { pending: "○", running: "●", succeeded: "✓", failed: "✗" }[phase];
    };

    const note = (parent, text) => parent.append(h("div", { class: "note" }, text));

    const blockFor = (nodeId) => {
      if (nodeId && state.blocks.has(nodeId)) return state.blocks.get(nodeId);
      return null;
    };

    const apply = (event) => {
      if (state.rawLines.push(JSON.stringify(event)) > MAX_RAW_LINES) state.rawLines.shift();
      const node = event.node;
      switch (event.type) {
        case "run_started": {
          state.startedAt = new Date(event.ts);
          if (event.provider) state.provider = `${event.provider}${event.model ? ` / ${event.model}` : ""}`;
          setStatus("running");
          break;
        }
        case "node_started": {
          const item = stepFor(node, event.node_type);
          item.count += 1;
          item.visits.textContent = item.count > 1 ? `×${item.count}` : "";
          markStep(node, "running");
          const outcome = h("span", { class: "outcome" }, "running…");
          const body = h("div", { class: "node-body" });
          const block = h(
            "article",
            { class: "node-block", dataset: { node, visit: item.count } },
            h("div", { class: "node-head" }, h("span", { class: "node-id" }, node), h("span", { class: "node-type" }, event.node_type), item.count > 1 ? h("span", { class: "node-type" }, `visit ${item.count}`) : null, outcome),
            body,
          );
          timeline.append(block);
          state.blocks.set(node, { block, body, outcome, console: null, lastStream: null, lastText: null, started: new Date(event.ts) });
          break;
        }
        case "exec_output": {
          const b = blockFor(node);
          if (!b) break;
          if (!b.console) {
            b.console = h("pre", { class: "console", dataset: { event: "exec_output" } });
            b.body.append(b.console);
          }
          if (b.lastStream === event.stream && b.lastText) {
            b.lastText.appendData(shown(event.chunk));
          } else {
            const text = document.createTextNode(shown(event.chunk));
            b.console.append(event.stream === "stderr" ? h("span", { class: "stderr" }, text) : text);
            b.lastStream = event.stream;
            b.lastText = text;
          }
          b.console.scrollTop = b.console.scrollHeight;
          break;
        }
        case "agent_message": {
          const b = blockFor(node);
          const message = h("div", { class: "message", dataset: { event: "agent_message" } }, h("span", { class: "who" }, "agent"), event.text);
          (b ? b.body : timeline).append(message);
          if (b) b.lastText = null;
          break;
        }
        case "tool_call": {
          const b = blockFor(node);
          const stateEl = h("span", { class: "tool-state wait" }, "running…");
          const args = event.arguments || {};
          const summary = callSummary(event.tool, args);
          const details = h(
            "details",
            { class: "tool", dataset: { event: "tool_call", call: event.call_id } },
            h("summary", {}, h("span", { class: "tool-name" }, event.tool), h("span", { class: "tool-summary" }, firstLine(summary, 120)), stateEl),
            h("div", { class: "label" }, "arguments"),
            h("pre", {}, JSON.stringify(args, null, 2)),
          );
          (b ? b.body : timeline).append(details);
          if (b) b.lastText = null;
          state.tools.set(event.call_id, { stateEl, details });
          break;
        }
        case "tool_result": {
          const call = state.tools.get(event.call_id);
          if (!call) break;
          // A command that ran but exited non-zero is a result (ok), marked like the CLI's `⚠ exit N`.
          const exit = /\[exit code: (-?\d+)\]$/.exec(event.output);
          const failedExit = event.ok && exit && exit[1] !== "0" ? exit[1] : null;
          call.stateEl.className = `tool-state ${failedExit ? "warn" : event.ok ? "ok" : "err"}`;
          call.stateEl.textContent = failedExit
            ? `⚠ exit ${failedExit} (${event.output.length} chars)`
            : event.ok ? `✓ ${event.output.length} chars` : `✗ ${shown(firstLine(event.output, 60))}`;
          call.details.append(h("div", { class: "label" }, event.ok ? "result" : "error"), h("pre", {}, event.output));
          break;
        }
        case "note": {
          const b = blockFor(node);
          note(b ? b.body : timeline, `note: ${event.message}`);
          break;
        }
        case "usage": {
          state.usage.input += event.input_tokens || 0;
          state.usage.output += event.output_tokens || 0;
          state.usage.requests += 1;
          const b = blockFor(node);
          note(b ? b.body : timeline, `model request: ${event.input_tokens || 0} tokens in · ${event.output_tokens || 0} out`);
          break;
        }
        case "budget_exceeded": {
          state.budget = event.message || `budget exceeded: ${event.budget} ${event.used} > ${event.limit}`;
          const b = blockFor(node);
          note(b ? b.body : timeline, h("b", { class: "budget-exceeded" }, `⛔ ${state.budget}`));
          break;
        }
        case "sandbox_provisioned": {
          const b = blockFor(node);
          note(b ? b.body : timeline, h("span", {}, "sandbox ", h("span", { class: "mono" }, event.sandbox_id.slice(0, 12)), ` ready (${event.backend}, ${event.image})`));
          if (event.network === "bridge") note(b ? b.body : timeline, "⚠ network bridge: not isolated (other runs' sandboxes and host services can be reached)");
          break;
        }
        case "egress": {
          const b = blockFor(node);
          const bytes = event.allowed ? ` · ${event.bytes_up || 0} B up, ${event.bytes_down || 0} B down` : "";
          note(
            b ? b.body : timeline,
            h(
              "span",
              { class: `egress ${event.allowed ? "allowed" : "denied"}`, dataset: { event: "egress" } },
              event.allowed ? "egress " : "egress denied ",
              h("span", { class: "mono" }, `${event.host}:${event.port}`),
              ` (${event.reason})${bytes}`,
            ),
          );
          break;
        }
        case "sandbox_destroyed": {
          note(timeline, h("span", {}, "sandbox ", h("span", { class: "mono" }, event.sandbox_id.slice(0, 12)), " destroyed"));
          break;
        }
        case "node_finished": {
          const b = blockFor(node);
          const ok = event.outcome === "success";
          markStep(node, ok ? "succeeded" : "failed");
          if (b) {
            const code = event.exit_code !== undefined && event.exit_code !== null ? ` (exit ${event.exit_code})` : "";
            const took = fmtDuration(new Date(event.ts) - b.started);
            b.outcome.className = `outcome ${event.outcome}`;
            b.outcome.textContent = `${ok ? "✓ succeeded" : "✗ failed"}${code} · ${took}`;
            if (event.error) note(b.body, `error: ${event.error}`);
            if (!b.body.hasChildNodes() && event.output_preview) {
              b.body.append(h("pre", { class: "console" }, event.output_preview));
            }
          }
          break;
        }
        case "run_finished": {
          state.finishedAt = new Date(event.ts);
          setStatus(event.status);
          const banner = h("div", { class: `finish ${event.status}`, id: "run-finished" }, `Run ${event.status}`, event.error ? h("span", { class: "why" }, event.error) : null);
          timeline.append(banner);
          if (event.error) {
            errorBox.textContent = shown(event.error);
            errorBox.className = `run-error ${event.status}`;
            errorBox.hidden = false;
          }
          break;
        }
        default:
          break;
      }
    };

    // Events arrive in bursts (a command printing fast): apply them once a frame.
    const flush = () => {
      state.scheduled = false;
      const batch = state.queue.splice(0);
      for (const event of batch) apply(event);
      renderFacts();
      if (!raw.hidden) raw.textContent = shown(state.rawLines.join("\n"));
      if (follow.checked && batch.length) window.scrollTo({ top: document.body.scrollHeight });
    };
    const enqueue = (event) => {
      state.queue.push(event);
      if (!state.scheduled) {
        state.scheduled = true;
        requestAnimationFrame(flush);
      }
    };
    showRaw.addEventListener("change", () => { raw.textContent = shown(state.rawLines.join("\n")); });

    cancelButton.addEventListener("click", async () => {
      cancelButton.disabled = true;
      cancelButton.textContent = "Cancelling…";
      try {
        await api(`/api/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST" });
      } catch (e) {
        toast(`Cannot cancel: ${e.message}`);
        cancelButton.disabled = false;
      }
      cancelButton.textContent = "Cancel run";
    });

    const tick = setInterval(renderFacts, 1000);
    (async () => {
      try {
        const run = await api(`/api/runs/${encodeURIComponent(runId)}`, { signal: controller.signal });
        state.run = run;
        title.textContent = shown(run.task);
        document.title = `${firstLine(run.task, 50)} · Boitata`;
        setStatus(run.status);
        renderFacts();
        const offered = await blueprints().catch(() => []);
        const info = offered.find((b) => b.name === run.blueprint);
        if (info) for (const n of info.nodes) stepFor(n.id, n.type);
        await followEvents(
          run.id,
          controller.signal,
          enqueue,
          (s, message) => {
            streamState.textContent = { live: "● live", reconnecting: "reconnecting…", ended: "all events received", error: `stream error: ${message}` }[s] || s;
          },
        );
        if (!controller.signal.aborted) {
          state.run = await api(`/api/runs/${encodeURIComponent(runId)}`, { signal: controller.signal });
          renderFacts();
        }
      } catch (e) {
        if (controller.signal.aborted) return;
        if (e instanceof ApiError && e.status === 404) {
          view.replaceChildren(h("section", { class: "panel" }, h("h1", {}, "No such run"), h("p", { class: "muted" }, e.message), h("a", { href: "#/" }, "Back to runs")));
        } else {
          toast(e.message);
        }
      }
    })();

    return { dispose() { controller.abort(); clearInterval(tick); } };
  }

  // ---------------------------------------------------------------- routing

  let current = null;
  function route() {
    if (current) current.dispose();
    const hash = location.hash || "#/";
    const match = /^#\/runs\/([^/?#]+)/.exec(hash);
    for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", !match);
    document.title = "Boitata";
    current = match ? runView(decodeURIComponent(match[1])) : homeView();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("#token-dialog").addEventListener("cancel", (event) => event.preventDefault());
    $("#forget-token").addEventListener("click", () => {
      auth.forget();
      blueprintCache = null;
      route();
    });
    showSession();
    window.addEventListener("hashchange", route);
    route();
  });
})();
