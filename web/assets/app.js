// fleet web: the page. Every string from a fleet is set as text
// (textContent, never innerHTML). Frames arrive over Server-Sent Events from
// the server's connection to the fleet; a "reset" event starts a fresh
// replay, so a page that reconnects shows nothing twice.
//
// Rendering is by section: a frame marks what it changed, and once per
// animation frame only those sections are drawn again. The long lists (a
// worker's transcript, the feed) keep one element per entry and only add
// and remove elements, so a flood of frames costs the page little.
"use strict";

const MAX_LINES = 2000; // kept per worker transcript and for the feed (up to twice that between trims)
const DOM_LINES = 1000; // of those, drawn: the newest
const DRAW_LINES = 300; // made at most per draw: past it the list starts again from the newest
const MAX_AGENTS = 500; // transcripts kept; the oldest worker's go first
const $ = (id) => document.getElementById(id);

const st = {
  fleet: "", es: null,
  workers: [], selected: "",
  transcripts: new Map(), // agent -> {items: [], dropped: n}
  feed: [], feedDropped: 0, feedAgents: new Set(),
  requests: new Map(), // id -> frame, creation order
  mine: new Set(), // requests this page answered
  gone: "",
  commands: [],
  history: [], histPos: 0,
  welcome: null, state: null,
  timeline: [], timelineAt: 0, intel: null, evolution: null, store: null, experiment: null, status: null,
  diff: null, // {worker, waiting (the /diff prompt's requestId), echoed, text}
  pendingAction: null, // {question, command}: a landing action waiting for its confirmation
  replaying: true, // between reset and replayEnd: requests then are not new
  notified: new Set(),
  feedKind: "", feedWho: "",
  native: { roots: [], rootId: "", status: null, last: "", lastErr: false, busy: false, uncertain: null, ask: null },
  dirty: new Set(["all"]),
  stats: { frames: 0, readyAt: 0, renders: 0, renderMs: 0, renderMaxMs: 0 },
};
window.fleetStats = st.stats; // read by the browser tests

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function button(label, onclick, title) {
  const b = el("button", label);
  b.type = "button";
  b.onclick = onclick;
  if (title) b.title = title;
  return b;
}

async function loadFleets() {
  const r = await fetch("/api/fleets");
  if (!r.ok) { flash("fleets: " + r.status); return; }
  const { fleets, preselect } = await r.json();
  const p = $("picker");
  const want = new URLSearchParams(location.search).get("fleet") || preselect || st.fleet;
  const opts = fleets.map((f) => { const o = el("option", `${f.name} (${f.id}) ${f.cwd}`); o.value = f.id; return o; });
  if (st.fleet && !fleets.some((f) => f.id === st.fleet)) {
    const o = el("option", `${st.fleet} (not running)`); o.value = st.fleet; opts.push(o);
  }
  p.replaceChildren(...opts);
  if (st.fleet) { p.value = st.fleet; return; }
  const pick = fleets.find((f) => f.id === want || f.name === want) || fleets[0];
  if (!pick) { $("conn").textContent = "no fleet is running"; return; }
  p.value = pick.id;
  open(pick.id);
}

function open(id) {
  if (st.es) st.es.close();
  st.fleet = id;
  const u = new URL(location.href);
  u.searchParams.set("fleet", id);
  history.replaceState(null, "", u);
  const es = new EventSource(`/api/fleets/${encodeURIComponent(id)}/events`);
  st.es = es;
  for (const kind of ["reset", "frame", "replayEnd", "missed", "conn"]) {
    es.addEventListener(kind, (e) => { if (st.es === es) enqueue(kind, e.data); });
  }
  es.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "conn connecting"; };
}

// The stream's events are queued as they come and applied in slices of at
// most sliceMs, yielding between slices: however many frames arrive at
// once (a flood, or a page that was in the background), no task of the
// page runs long. Order is kept: a reset clears what came before it.
const sliceMs = 8;
const inbox = []; // [kind, data] pairs not applied yet
let inboxHead = 0, pumping = false;
const pumpChannel = new MessageChannel();
pumpChannel.port1.onmessage = pump;

function enqueue(kind, data) {
  inbox.push([kind, data]);
  if (!pumping) { pumping = true; pumpChannel.port2.postMessage(0); }
}

function pump() {
  const t0 = performance.now();
  while (inboxHead < inbox.length) {
    const [kind, data] = inbox[inboxHead++];
    apply(kind, data);
    if ((inboxHead & 63) === 0 && performance.now() - t0 > sliceMs) break;
  }
  if (inboxHead >= inbox.length) { inbox.length = 0; inboxHead = 0; pumping = false; return; }
  if (inboxHead > 4096) { inbox.splice(0, inboxHead); inboxHead = 0; }
  pumpChannel.port2.postMessage(0);
}

function apply(kind, data) {
  switch (kind) {
    case "reset": reset(); break;
    case "frame": st.stats.frames++; frame(JSON.parse(data)); break;
    case "replayEnd": st.replaying = false; mark("requests"); break;
    case "missed": st.feedDropped += JSON.parse(data).missed; mark("feed"); break;
    case "conn": conn(JSON.parse(data)); break;
  }
}

function reset() {
  st.workers = []; st.transcripts = new Map(); st.feed = []; st.feedDropped = 0; st.feedAgents = new Set(); agentsGen++;
  st.requests = new Map(); st.welcome = null; st.state = null; st.replaying = true; st.timeline = [];
  st.intel = null; st.evolution = null; st.store = null; st.experiment = null; st.status = null;
  openTools.clear();
  mark("all");
}

function conn(c) {
  const s = $("conn");
  s.textContent = c.state === "attached" ? "" : c.state + (c.error ? ": " + c.error : "");
  s.className = "conn " + c.state;
}

let pending = false;
function mark(section) {
  st.dirty.add(section);
  if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); }
}

// trim drops the oldest entries of list once it holds twice MAX_LINES, so
// that a flood costs one splice per MAX_LINES entries, and returns how many
// it dropped. Their elements go when the list is drawn next (drawList).
function trim(list) {
  if (list.length <= 2 * MAX_LINES) return 0;
  const n = list.length - MAX_LINES;
  list.splice(0, n);
  return n;
}

// drawList brings box up to date with items, drawing at most the newest
// DOM_LINES of them: all again when full, else only the entries not drawn
// yet (entry.node undefined). shown filters the entries; make makes an
// entry's element. Work per draw is bounded however many entries came: a
// draw makes at most DRAW_LINES elements, and when more came it starts the
// list again from the newest (it grows back to DOM_LINES as entries come).
function drawList(box, items, full, make, shown) {
  let from = items.length;
  if (full) from = 0;
  else while (from > 0 && items[from - 1].node === undefined) from--;
  const cap = full ? DOM_LINES : DRAW_LINES;
  const out = [];
  for (let j = items.length - 1; j >= from && out.length < cap; j--) {
    if (!shown || shown(items[j])) out.push(items[j]);
  }
  for (let j = from; j < items.length; j++) items[j].node = null;
  out.reverse();
  const nodes = out.map((it) => (it.node = make(it)));
  if (full || nodes.length >= cap) {
    box.replaceChildren(...nodes);
    return;
  }
  box.append(...nodes);
  for (let extra = box.childElementCount - DOM_LINES; extra > 0; extra--) box.firstElementChild.remove();
}

function transcriptOf(agent) {
  let t = st.transcripts.get(agent);
  if (!t) {
    if (st.transcripts.size >= MAX_AGENTS) st.transcripts.delete(st.transcripts.keys().next().value);
    t = { items: [], dropped: 0 };
    st.transcripts.set(agent, t);
  }
  return t;
}

function addTranscript(agent, item) {
  const t = transcriptOf(agent);
  t.items.push(item);
  t.dropped += trim(t.items);
  if (agent === st.selected) mark("transcript");
}

// addFeed adds an entry: kind is user, reply, assistant… (the
// conversation), hub, toolCall or fileChange; who is the agent it is of.
function addFeed(kind, text, who) {
  st.feed.push({ kind, text, who });
  if (who && who !== "fleet" && !st.feedAgents.has(who)) { st.feedAgents.add(who); agentsGen++; }
  st.feedDropped += trim(st.feed);
  mark("feed");
}

function hubText(h) { return `${h.from} ${h.kind}${h.to ? " → " + h.to : ""}${h.text ? ": " + h.text : ""}`; }

// openTools pairs a tool call's start with its completion: agent → the
// calls started and not yet complete, oldest first.
const openTools = new Map();

function toolCall(f) {
  const agent = f.agent || "coordinator";
  let started = openTools.get(agent);
  if (f.phase === "start") {
    const item = { type: "tool", tool: f.tool, detail: f.detail || "", input: f.input, done: false };
    if (!started) { started = []; openTools.set(agent, started); }
    started.push(item);
    if (started.length > 64) started.shift();
    addTranscript(agent, item);
    return;
  }
  let item = null;
  if (started) {
    const i = started.findIndex((c) => c.tool === f.tool);
    if (i >= 0) item = started.splice(i, 1)[0];
  }
  if (!item) { item = { type: "tool", tool: f.tool, detail: f.detail || "" }; addTranscript(agent, item); }
  Object.assign(item, { done: true, result: f.result || "", isError: !!f.isError, durationMs: f.durationMs });
  if (item.node) item.node.replaceWith(item.node = toolNode(item));
  addFeed("toolCall", `${f.agent} ${f.tool}${f.isError ? " (error)" : ""}: ${firstLine(f.result || f.detail || "")}`, f.agent);
}

function frame(f) {
  switch (f.type) {
    case "welcome": st.welcome = f; mark("header"); break;
    case "commandCatalog": st.commands = (f.commands || []).map((c) => c.name); break;
    case "fleetIntel": st.intel = f; mark("intel"); break;
    case "fleetEvolution": st.evolution = f; mark("intel"); break;
    case "fleetStore": st.store = f; mark("intel"); break;
    case "fleetExperiment": st.experiment = f; mark("intel"); break;
    case "status": st.status = f; mark("header"); break;
    case "hydrate":
      for (const c of f.conversation || []) addFeed(c.role, c.text, c.agent || "");
      for (const t of f.transcripts || []) addTranscript(t.agent || "coordinator", { type: "line", role: t.role, kind: t.kind, text: t.text });
      for (const h of f.hub || []) addFeed("hub", hubText(h), h.from);
      break;
    case "userMessage":
      if (st.diff && f.requestId && f.requestId === st.diff.waiting) { st.diff.echoed = true; break; }
      addFeed("user", f.text, f.source);
      break;
    case "reply":
      // The reply that follows a /diff the page sent is the diff.
      if (st.diff && st.diff.echoed && st.diff.text === null) { st.diff.text = f.text; st.diff.waiting = ""; mark("diff"); break; }
      addFeed("reply", f.text, "fleet");
      break;
    case "hubEvent": addFeed("hub", hubText(f), f.from); break;
    case "toolCall": toolCall(f); break;
    case "fileChange":
      for (const c of f.changes || []) addFeed("fileChange", `${c.agent} ${c.changeType} ${c.path}`, c.agent);
      break;
    case "transcript": addTranscript(f.agent || "coordinator", { type: "line", role: f.role, kind: f.kind, text: f.text }); break;
    case "confirmRequest": case "askRequest":
      st.requests.set(f.id, f);
      if (!st.replaying) notify(f);
      mark("requests");
      break;
    case "confirmResolved":
      if (st.requests.has(f.id)) {
        st.requests.delete(f.id);
        st.gone = `${f.id}: ${resolvedText(f)}`;
        mark("requests");
      }
      break;
    case "fleetState": st.state = f; st.workers = f.workers || []; mark("header"); mark("workers"); mark("tasks"); break;
    case "fleetAnalytics": st.timeline = f.workerTimeline || []; st.timelineAt = f.ts || Date.now(); mark("timeline"); break;
  }
}

// resolvedText says how a request left: answered on this page, answered
// elsewhere (another console, the terminal), expired or cancelled.
function resolvedText(f) {
  const mine = st.mine.delete(f.id);
  let s;
  switch (f.reason || "answered") {
    case "answered": s = mine ? "answered here" : "answered elsewhere"; break;
    case "superseded": s = "answered elsewhere"; break;
    case "expired": s = "expired unanswered"; break;
    case "cancelled": s = "cancelled (the worker ended)"; break;
    default: s = f.reason;
  }
  if (f.message) s += ": " + f.message;
  return s;
}

function firstLine(s) { const i = s.indexOf("\n"); return i < 0 ? s : s.slice(0, i) + " …"; }

// notify shows a browser notification for a new request while the tab is
// in the background, once per request; a click brings the tab and the
// request into view.
function notify(r) {
  if (!document.hidden || st.notified.has(r.id) || !("Notification" in window) || Notification.permission !== "granted") return;
  st.notified.add(r.id);
  const n = new Notification(`${st.welcome ? st.welcome.sessionName : "fleet"}: ${r.type === "confirmRequest" ? "approve?" : "a question"}`,
    { body: r.summary || r.question || "", tag: r.id });
  n.onclick = () => { window.focus(); focusRequest(r.id); n.close(); };
}

function focusRequest(id) {
  const d = id ? document.querySelector(`.req[data-id="${CSS.escape(id)}"]`) : document.querySelector("#req-list .req");
  if (d) { d.scrollIntoView({ block: "center" }); const b = d.querySelector("button,input"); if (b) b.focus(); }
}

const sections = {
  header: renderHeader, requests: renderRequests, workers: renderWorkers, transcript: renderTranscript,
  diff: renderDiff, intel: renderIntel, tasks: renderTasks, timeline: renderTimeline, feed: renderFeed, native: renderNative,
};

function render() {
  const t0 = performance.now();
  draw();
  const ms = performance.now() - t0;
  st.stats.renders++; st.stats.renderMs += ms; st.stats.renderMaxMs = Math.max(st.stats.renderMaxMs, ms);
}

function draw() {
  const all = st.dirty.has("all");
  const feedAll = all || st.dirty.has("feed-all");
  const transcriptAll = all || st.dirty.has("transcript-all");
  const todo = all ? Object.keys(sections) : [...st.dirty];
  st.dirty.clear();
  for (const name of todo) {
    if (name === "feed") renderFeed(feedAll);
    else if (name === "transcript") renderTranscript(transcriptAll);
    else if (name === "feed-all") { if (!todo.includes("feed")) renderFeed(true); }
    else if (name === "transcript-all") { if (!todo.includes("transcript")) renderTranscript(true); }
    else if (sections[name]) sections[name]();
  }
  if (!st.replaying && !st.stats.readyAt) {
    st.stats.readyAt = performance.now();
    performance.mark("fleet-ready");
  }
}

function renderHeader() {
  const w = st.welcome;
  $("fleet-name").textContent = w ? w.sessionName || "" : "";
  const s = st.state;
  const parts = [];
  if (w) parts.push([w.provider, w.model].filter(Boolean).join("/"));
  if (s && s.coordinator && s.coordinator.model && !(w && w.model)) parts.push(s.coordinator.model);
  const up = s && s.session && s.session.uptime;
  if (up) parts.push("up " + duration(up));
  if (s) parts.push(`${s.workerActive}/${s.workerTotal} workers`, `tokens ${tokenTotal(s.tokens)}`);
  if (s && s.budget && s.budget.sessionTokens) parts.push(`budget ${s.budget.sessionUsed}/${s.budget.sessionTokens}`);
  if (st.status && st.status.processing) parts.push("processing");
  if (s && s.coordinator && s.coordinator.dispatchPaused) parts.push("dispatch paused");
  $("fleet-info").textContent = parts.filter(Boolean).join(" · ");
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// renderTimeline draws fleetAnalytics' workerTimeline as a Gantt chart: a
// row per worker, a bar from its start to its end (or to now).
function renderTimeline() {
  const box = $("timeline");
  const rows = (st.timeline || []).slice(-50);
  if (!rows.length) { box.replaceChildren(el("div", "no workers yet", "dim")); return; }
  const now = st.timelineAt || Date.now();
  const t0 = Math.min(...rows.map((r) => r.startedAt || now));
  const t1 = Math.max(now, ...rows.map((r) => r.completedAt || now));
  const span = Math.max(t1 - t0, 1);
  const W = 1000, label = 120, rowH = 18;
  const g = svg("svg", { viewBox: `0 0 ${W} ${rows.length * rowH + 20}`, role: "img", "aria-label": "worker timeline" });
  rows.forEach((r, i) => {
    const y = i * rowH;
    const x = label + ((r.startedAt || now) - t0) / span * (W - label - 10);
    const w = Math.max(((r.completedAt || now) - (r.startedAt || now)) / span * (W - label - 10), 2);
    g.append(svg("text", { x: 0, y: y + 13 }, r.name || r.id));
    const bar = svg("rect", { x, y: y + 3, width: w, height: rowH - 6, rx: 3, class: "bar " + (r.status || "") });
    bar.append(svg("title", {}, `${r.name || r.id} ${r.status} · ${Math.round(((r.completedAt || now) - (r.startedAt || now)) / 100) / 10} s · ${r.toolUseCount ?? 0} tools · ${r.tokenCount ?? 0} tokens`));
    g.append(bar);
  });
  g.append(svg("text", { x: label, y: rows.length * rowH + 15, class: "dim" }, `${Math.round(span / 100) / 10} s`));
  box.replaceChildren(g);
}

// openDiff asks the fleet for w's diff (/diff, with a requestId of the
// page's own: the reply that follows its echo is the diff).
function openDiff(w) {
  const id = "web-diff-" + randomHex(8);
  st.diff = { worker: w, waiting: id, echoed: false, text: null };
  st.pendingAction = null;
  post({ type: "prompt", text: `/diff ${w}`, requestId: id });
  mark("diff");
}

// colour splits one diff line's code into spans: keywords, strings and
// comments get their own classes. Text only: the spans' contents are set
// with textContent.
function colour(pre, prefix, code) {
  pre.append(prefix);
  const re = /(\/\/.*$|#.*$|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)|(\b(?:func|function|return|if|else|for|while|switch|case|const|let|var|type|struct|interface|package|import|class|def|from|async|await|go|defer|select|chan|map|range|nil|null|true|false|None|True|False|self|this|new)\b)/g;
  let last = 0;
  for (const m of code.matchAll(re)) {
    if (m.index > last) pre.append(code.slice(last, m.index));
    const cls = m[2] ? "kw" : (m[1].startsWith("//") || m[1].startsWith("#")) ? "cm" : "str";
    pre.append(el("span", m[0], cls));
    last = m.index + m[0].length;
  }
  if (last < code.length) pre.append(code.slice(last));
}

function renderDiff() {
  const pane = $("diff-pane");
  pane.hidden = !st.diff;
  if (!st.diff) return;
  $("diff-of").textContent = st.diff.worker;
  const a = st.pendingAction;
  $("diff-confirm").hidden = !a;
  $("diff-question").textContent = a ? a.question : "";
  const box = $("diff");
  if (st.diff.text === null) { box.replaceChildren(el("div", "asking the fleet…", "dim")); return; }
  const files = [];
  let cur = null;
  for (const line of st.diff.text.split("\n")) {
    if (line.startsWith("diff --git ")) {
      cur = { path: line.replace(/^diff --git a\/(.*) b\/.*$/, "$1"), lines: [], add: 0, del: 0 };
      files.push(cur);
    }
    if (!cur) { cur = { path: "", lines: [], add: 0, del: 0 }; files.push(cur); }
    let cls = "";
    if (line.startsWith("+") && !line.startsWith("+++")) { cls = "add"; cur.add++; }
    else if (line.startsWith("-") && !line.startsWith("---")) { cls = "del"; cur.del++; }
    else if (line.startsWith("@@")) cls = "hunk";
    else if (/^(diff --git|index |--- |\+\+\+ |new file|deleted file|similarity|rename |old mode|new mode|Binary )/.test(line)) cls = "meta";
    const pre = el("pre", null, cls);
    if (cls === "" || cls === "add" || cls === "del") colour(pre, line.slice(0, 1), line.slice(1));
    else pre.textContent = line || " ";
    if (!pre.textContent) pre.textContent = " ";
    cur.lines.push(pre);
  }
  box.replaceChildren(...files.map((f) => {
    const d = el("details", null, "file");
    d.open = true;
    d.append(el("summary", f.path ? `${f.path}  +${f.add} −${f.del}` : "—"), ...f.lines);
    return d;
  }));
}

// landing asks for a confirmation on the page, then sends command.
function landing(question, command) {
  st.pendingAction = { question, command };
  mark("diff");
}

function tokenTotal(t) {
  if (!t) return 0;
  return t.totalTokens ?? ((t.inputTokens || 0) + (t.outputTokens || 0));
}

function duration(ms) {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor(s % 3600 / 60)}m`;
}

function pct(x) { return x === undefined || x === null ? "–" : Math.round(x * 100) + "%"; }
function when(ms) { return ms ? new Date(ms).toLocaleString() : ""; }

// table returns a table of rows (arrays of cell text) under head.
function table(head, rows) {
  const t = el("table");
  const tr = el("tr");
  for (const h of head) tr.append(el("th", h));
  t.append(el("thead"));
  t.tHead.append(tr);
  const tb = el("tbody");
  for (const r of rows) {
    const row = el("tr");
    for (const c of r) row.append(c instanceof Node ? wrapTd(c) : el("td", c ?? ""));
    tb.append(row);
  }
  t.append(tb);
  return t;
}

function wrapTd(node) { const td = el("td"); td.append(node); return td; }

function span(...kids) { const s = el("span"); s.append(...kids); return s; }

// renderIntel shows the four intelligence snapshots: fleetIntel (what past
// runs say, suggestions to accept or dismiss with /fleet-intel, skills),
// fleetEvolution (/learn's shadows and applied history), fleetStore (the
// store's contents) and fleetExperiment.
function renderIntel() {
  const i = st.intel;
  const sum = i && i.summary;
  $("intel-summary").textContent = sum ? `${sum.totalAgentRuns} runs · ${Math.round((sum.successRate || 0) * 100)}% succeeded · ${sum.failedRuns} failed · ${sum.totalTokens} tokens · ${sum.sessionCount} sessions` : "";
  $("intel-errors").textContent = sum && (sum.topErrors || []).length ? "top errors: " + sum.topErrors.map((e) => `${e.message} (${e.count})`).join(" · ") : "";
  const sugg = (i && i.suggestions) || [];
  $("intel-suggestions").replaceChildren(...(sugg.length ? [el("h3", "Suggestions")] : []), ...sugg.map((g) => {
    const d = el("div", null, "req");
    d.dataset.id = g.id;
    d.append(el("span", `${g.title} (${g.suggestionType}, ${Math.round(g.confidence * 100)}%) `),
      button("accept", () => post({ type: "prompt", text: `/fleet-intel accept ${g.id}` })),
      button("dismiss", () => post({ type: "prompt", text: `/fleet-intel dismiss ${g.id}` })));
    return d;
  }));
  const skills = (i && i.skills) || [];
  $("intel-skills").replaceChildren(...(skills.length ? [el("h3", "Skills"), table(["skill", "uses", "last used", "crew"],
    skills.map((s) => [s.name, s.uses, when(s.lastUsedAt), s.crew || ""]))] : []));

  const ev = st.evolution;
  const evBox = [];
  if (ev && (ev.shadows || []).length) {
    evBox.push(el("h3", "Evolution: shadows on trial"), table(["shadow", "skill", "change", "status", "trials", "baseline → candidate", ""],
      ev.shadows.map((s) => [s.id, s.skill, s.summary, s.status || "", s.trials ?? "", `${pct(s.baselineSuccessRate)} → ${pct(s.candidateSuccessRate)}`,
        span(button("apply", () => post({ type: "prompt", text: `/learn apply ${s.id}` })), button("reject", () => post({ type: "prompt", text: `/learn reject ${s.id}` })))])));
  }
  if (ev && (ev.timeline || []).length) {
    evBox.push(el("h3", "Evolution: applied"), table(["id", "skill", "change", "applied", "version", "success before → after"],
      ev.timeline.map((r) => [r.id, r.skill, r.summary, when(r.appliedAt), r.version ?? "", `${pct(r.successRateBefore)} → ${pct(r.successRateAfter)}`])));
  }
  if (ev && (ev.skills || []).length) {
    evBox.push(el("h3", "Evolution: skills"), table(["skill", "uses", "success", "evolutions", "last evolved"],
      ev.skills.map((s) => [s.name, s.uses, pct(s.successRate), s.evolutionCount, when(s.lastEvolvedAt)])));
  }
  $("intel-evolution").replaceChildren(...evBox);

  const so = st.store;
  const soBox = [];
  if (so) {
    soBox.push(el("h3", "Store"), el("div", (so.counts || []).map((c) => `${c.name} ${c.count}`).join(" · ") || "empty", "dim"));
    if ((so.sessions || []).length) {
      soBox.push(table(["session", "name", "started", "tokens", "runs", "failed", "duration"],
        so.sessions.map((s) => [s.id, s.name || "", when(s.startedAt), s.totalTokens, s.agentRuns, s.failedRuns ?? "", s.durationMs ? duration(s.durationMs) : ""])));
    }
    if ((so.steering || []).length) {
      soBox.push(el("h3", "Steering"), table(["when", "from", "insight"], so.steering.map((s) => [when(s.createdAt), s.source || "", s.text])));
    }
  }
  $("intel-store").replaceChildren(...soBox);

  const ex = (st.experiment && st.experiment.experiments) || [];
  $("intel-experiments").replaceChildren(...(ex.length ? [el("h3", "Experiments"), table(["experiment", "status", "variants", "latest run", "winner"],
    ex.map((e) => {
      const r = e.latestRun;
      const runs = r ? (r.variants || []).map((v) => `${v.variant}: mean ${Math.round(v.mean * 100) / 100}, pass ${pct(v.passRate)}${v.lift !== undefined && v.lift !== null ? ", lift " + pct(v.lift) : ""} (${v.samples})`).join(" · ") : "not run yet";
      return [`${e.name} (${e.id})`, e.status, (e.variants || []).join(", "), runs, r ? r.winner || "inconclusive" : ""];
    }))] : []));
}

function renderTasks() {
  const t = (st.state && st.state.tasks) || { items: [] };
  $("task-counts").textContent = st.state ? `${t.total ?? 0} tasks · ${t.done ?? 0} done · ${t.running ?? 0} running · ${t.pending ?? 0} pending · ${t.blocked ?? 0} blocked` : "";
  const tb = $("tasks").tBodies[0];
  tb.replaceChildren(...(t.items || []).map((i) => {
    const tr = el("tr");
    for (const v of [i.id, i.status, i.owner || "", i.subject, i.waitReason || ""]) tr.append(el("td", v));
    return tr;
  }));
}

function renderRequests() {
  const n = st.requests.size;
  document.title = n ? `(${n}) fleet` : "fleet";
  $("badge").hidden = n === 0;
  $("badge").textContent = String(n);
  $("req-count").textContent = n ? `${n} waiting` : "none waiting";
  $("req-gone").textContent = st.gone;
  const list = $("req-list");
  list.replaceChildren();
  for (const r of st.requests.values()) {
    const d = el("div", null, "req");
    d.dataset.id = r.id;
    if (r.type === "confirmRequest") {
      d.append(el("div", `confirm ${r.id}`, "dim"), el("pre", r.summary));
      d.append(button("Approve", () => answer({ type: "confirmResponse", id: r.id, approve: true })),
        button("Deny", () => answer({ type: "confirmResponse", id: r.id, approve: false })));
    } else {
      d.append(el("div", `ask ${r.id}`, "dim"), el("pre", r.question));
      for (const c of r.choices || []) d.append(button(c.label, () => answer({ type: "askResponse", id: r.id, text: c.value })));
      if (r.allowFreeform !== false || !(r.choices || []).length) {
        const f = el("form");
        const i = el("input");
        i.placeholder = "answer";
        i.setAttribute("aria-label", "answer");
        f.append(i, el("button", "Answer"));
        f.onsubmit = (e) => { e.preventDefault(); answer({ type: "askResponse", id: r.id, text: i.value }); };
        d.append(f);
      }
    }
    list.append(d);
  }
}

// gitText says how a worker's branch stands against its base.
function gitText(g) {
  if (!g || !g.branch) return "";
  const p = [g.branch];
  if (g.worktreeMissing) p.push("worktree missing");
  p.push(`↑${g.ahead ?? 0} ↓${g.behind ?? 0}`);
  if (g.merged) p.push("merged" + (g.mergedInto ? " into " + g.mergedInto : ""));
  else if (g.mergeable === true) p.push("mergeable");
  else if (g.mergeable === false) p.push("conflicts" + ((g.conflicts || []).length ? ": " + g.conflicts.join(", ") : ""));
  if (g.filesChanged) p.push(`${g.filesChanged} file${g.filesChanged === 1 ? "" : "s"} +${g.linesAdded ?? 0} −${g.linesRemoved ?? 0}`);
  if (g.uncommitted) p.push(`${g.uncommitted} uncommitted`);
  return p.join(" · ");
}

function renderWorkers() {
  const tb = $("workers").tBodies[0];
  tb.replaceChildren(...st.workers.map((w) => {
    const tr = el("tr");
    tr.dataset.id = w.id;
    if (w.id === st.selected) tr.className = "selected";
    const g = w.git;
    for (const v of [w.name || w.id, w.status, w.taskId || "", w.host || "", w.toolUseCount ?? 0, w.tokenCount ?? 0, w.recentActivity || ""]) tr.append(el("td", v));
    const gt = el("td", gitText(g), "git");
    if (g && (g.files || []).length) gt.title = g.files.map((f) => `${f.status} ${f.path} +${f.added} −${f.removed}`).join("\n");
    tr.insertBefore(gt, tr.children[4]);
    tr.append(wrapTd(button("diff", (e) => { e.stopPropagation(); openDiff(w.id); })));
    tr.onclick = () => select(w.id);
    return tr;
  }));
}

function select(id) {
  st.selected = id;
  mark("workers");
  mark("transcript-all");
}

function toolNode(item) {
  const d = el("details", null, "tool" + (item.isError ? " error" : ""));
  const state = item.done ? (item.isError ? "failed" : "done") + (item.durationMs !== undefined ? ` in ${Math.round(item.durationMs)} ms` : "") : "running…";
  d.append(el("summary", `⚙ ${item.tool}${item.detail ? ": " + firstLine(item.detail) : ""} — ${state}`));
  if (item.input !== undefined && item.input !== null) { d.append(el("div", "input", "dim"), el("pre", JSON.stringify(item.input, null, 2))); }
  if (item.done) { d.append(el("div", "result", "dim"), el("pre", item.result || "(none)")); }
  return d;
}

function itemNode(item) {
  if (item.type === "tool") return toolNode(item);
  if (item.kind === "reasoning") {
    const d = el("details", null, "reasoning");
    d.append(el("summary", "reasoning: " + firstLine(item.text).slice(0, 100)), el("pre", item.text));
    return d;
  }
  return el("div", item.text, "line " + (item.role || ""));
}

function renderTranscript(full) {
  const pane = $("transcript-pane");
  pane.hidden = !st.selected;
  if (!st.selected) return;
  $("transcript-of").textContent = st.selected;
  const t = st.transcripts.get(st.selected) || { items: [], dropped: 0 };
  const box = $("transcript");
  drawList(box, t.items, full, itemNode);
  const hidden = t.dropped + Math.max(0, t.items.length - box.childElementCount);
  $("transcript-missed").textContent = hidden ? `${hidden} older lines not shown` : "";
  if (full) stuck.add(box);
  if (stuck.has(box)) box.scrollTop = box.scrollHeight;
}

// stuck holds the scrolled lists that follow their newest entry: the
// reader is at the bottom. A scroll event says where the reader is, so
// drawing never reads the layout to find out.
const stuck = new Set();
for (const id of ["transcript", "feed"]) {
  const box = $(id);
  stuck.add(box);
  box.addEventListener("scroll", () => {
    if (box.scrollTop + box.clientHeight >= box.scrollHeight - 20) stuck.add(box); else stuck.delete(box);
  }, { passive: true });
}

const conversation = new Set(["user", "reply", "assistant", "system", "tool"]);

function feedShown(e) {
  return (!st.feedKind || e.kind === st.feedKind || (st.feedKind === "conversation" && conversation.has(e.kind))) &&
    (!st.feedWho || e.who === st.feedWho);
}

function feedNode(e) {
  return el("div", (e.kind === "user" || e.kind === "reply") && e.who ? e.who + ": " + e.text : e.text, "line " + e.kind);
}

let agentsGen = 0, agentsDrawn = -1; // the feed's worker filter is redrawn when agentsGen moves
function renderFeed(full) {
  const box = $("feed");
  if (agentsDrawn !== agentsGen) {
    agentsDrawn = agentsGen;
    const agents = [...st.feedAgents].sort();
    const who = $("feed-who");
    const all = el("option", "every worker");
    all.value = "";
    who.replaceChildren(all, ...agents.map((a) => el("option", a)));
    who.value = agents.includes(st.feedWho) ? st.feedWho : "";
  }
  drawList(box, st.feed, full, feedNode, feedShown);
  const unfiltered = !st.feedKind && !st.feedWho;
  const hidden = st.feedDropped + (unfiltered ? Math.max(0, st.feed.length - box.childElementCount) : 0);
  $("missed").textContent = hidden ? `${hidden} older entries not shown` : "";
  if (full) stuck.add(box);
  if (stuck.has(box)) box.scrollTop = box.scrollHeight;
}

// Native roots (docs/native-roots.md): the page asks through the server,
// which pairs each request with its result. A mutation carries the
// revision shown and an operationId minted here once; when its result is
// uncertain (no answer came), the retry sends the very same body, which
// the fleet applies at most once.
function randomHex(n) {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b);
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

async function nativeCall(req) {
  const n = st.native;
  n.busy = true;
  mark("native");
  let r, body;
  try {
    r = await fetch(`/api/fleets/${encodeURIComponent(st.fleet)}/native`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(req),
    });
    body = await r.json().catch(() => ({}));
  } catch (err) {
    r = { ok: false, status: 0 };
    body = { error: String(err), uncertain: !!req.operationId };
  }
  n.busy = false;
  if (r.ok) {
    if (n.uncertain && n.uncertain.operationId === req.operationId) n.uncertain = null;
    nativeResult(req, body.result || {});
  } else if (body.uncertain || (r.status === 0 && req.operationId)) {
    n.uncertain = req;
    n.last = `${req.action} at revision ${req.expectedRevision}: uncertain — ${body.error || "no answer"}. Retry sends it again with the same operation id (${req.operationId}); the fleet applies it at most once.`;
    n.lastErr = true;
  } else {
    n.last = `${req.action}: ${body.error || "error " + r.status}`;
    n.lastErr = true;
  }
  mark("native");
}

function nativeResult(req, res) {
  const n = st.native;
  switch (res.kind) {
    case "roots": {
      n.roots = res.roots || [];
      const replaced = new Set(n.roots.map((x) => x.previousRootId).filter(Boolean));
      const cur = n.roots.find((x) => x.id === n.rootId) || n.roots.find((x) => !replaced.has(x.id)) || n.roots[0];
      n.rootId = cur ? cur.id : "";
      n.last = `${n.roots.length} root${n.roots.length === 1 ? "" : "s"} listed`; n.lastErr = false;
      if (n.rootId) nativeCall({ action: "status", rootId: n.rootId });
      break;
    }
    case "status": n.status = res.root || null; if (n.status) n.rootId = n.status.id; break;
    case "receipt": {
      const rc = res.receipt || {};
      n.last = `receipt: ${rc.action} root ${rc.rootId} → revision ${rc.revision}, ${rc.status} (operation ${rc.operationId})` +
        (rc.status === "persisted" ? " — recorded, not yet carried out: the status below follows what the fleet reaches" : "");
      n.lastErr = false;
      if (n.rootId) nativeCall({ action: "status", rootId: n.rootId });
      break;
    }
    case "policy-admission":
      n.last = `policy admission: new root ${res.rootId}${res.previousRootId ? ", previous root " + res.previousRootId + (res.previousRootUnchanged ? " unchanged" : "") : ""}`;
      n.lastErr = false;
      if (res.rootId) n.rootId = res.rootId;
      break;
    case "error": {
      const texts = {
        revision_conflict: `conflict: the root changed since you looked (you saw revision ${req.expectedRevision}); it is shown again below, decide again`,
        operation_id_reused: "refused: that operation id was already used for a different request",
        native_mode_required: "not a native session: native controls need a fleet started with --native-root",
        unknown_root: "unknown root: load the roots again",
      };
      n.last = (texts[res.code] || "error " + res.code) + (res.message ? " — " + res.message : "");
      n.lastErr = true;
      if (res.code === "revision_conflict" && n.rootId) nativeCall({ action: "status", rootId: n.rootId });
      break;
    }
  }
}

// nativeAsk asks for a confirmation on the page before a mutation of the
// root shown, at the revision shown.
function nativeAsk(action, extra, what) {
  const s = st.native.status;
  if (!s) return;
  const req = Object.assign({ action, rootId: s.id, operationId: "web-op-" + randomHex(8), expectedRevision: s.revision }, extra);
  st.native.ask = { question: `${what || action} — root ${s.id} at revision ${s.revision}?`, req };
  mark("native");
}

function renderNative() {
  const n = st.native;
  $("native-confirm").hidden = !n.ask;
  $("native-question").textContent = n.ask ? n.ask.question : "";
  $("native-retry").hidden = !n.uncertain;
  $("native-last").textContent = n.busy ? "waiting for the fleet…" : n.last;
  $("native-last").className = n.lastErr && !n.busy ? "bad" : "dim";
  const box = $("native");
  const out = [];
  if (n.roots.length > 1) {
    const sel = el("select");
    sel.setAttribute("aria-label", "root");
    for (const r of n.roots) { const o = el("option", `${r.id} rev ${r.revision} · ${r.intent} · ${r.phase}`); o.value = r.id; sel.append(o); }
    sel.value = n.rootId;
    sel.onchange = () => { n.rootId = sel.value; nativeCall({ action: "status", rootId: n.rootId }); };
    out.push(sel);
  }
  const s = n.status;
  if (s) {
    out.push(el("div", `root ${s.id} · revision ${s.revision} · intent ${s.intent} · phase ${s.phase}`, "name"),
      el("div", `grant: session ${s.grant ? s.grant.sessionId : ""} · policy ${s.grant ? s.grant.policyVersion : ""}${s.previousRootId ? " · previous root " + s.previousRootId : ""}`, "dim"));
    out.push(span(button("pause", () => nativeAsk("pause")), button("resume", () => nativeAsk("resume")), button("stop", () => nativeAsk("stop"))));
    const rationale = el("input");
    rationale.placeholder = "rationale (needed to approve or deny)";
    rationale.id = "native-rationale";
    rationale.setAttribute("aria-label", "rationale");
    const decide = (verdict, t) => {
      const why = $("native-rationale").value.trim();
      if (!why) { n.last = "approve and deny need a rationale"; n.lastErr = true; mark("native"); return; }
      nativeAsk(verdict, { taskId: t.id, rationale: why }, `${verdict} task ${t.id} (${why})`);
    };
    out.push(el("h3", `Tasks (${(s.tasks || []).length})`), rationale, table(["task", "subject", "state", "attempts", "evidence", ""],
      (s.tasks || []).map((t) => [t.id, t.subject, t.state, t.attempts, t.evidenceHash ? t.evidenceHash.slice(0, 12) : "",
        t.evidenceHash && t.state !== "settled" && t.state !== "failed" ? span(button("approve", () => decide("approve", t)), button("deny", () => decide("deny", t))) : ""])));
    out.push(el("h3", `Holds (${(s.holds || []).length})`), table(["hold", "reason", "task", "since", ""],
      (s.holds || []).map((h) => [h.holdHash.slice(0, 12), h.reason, h.taskId || "", when(h.createdAt),
        button("release", () => nativeAsk("release", { holdHash: h.holdHash }, `release hold ${h.holdHash.slice(0, 12)}`))])));
    out.push(el("h3", `Decisions (${(s.decisions || []).length})`), table(["decision", "task", "verdict", "rationale", "consumed"],
      (s.decisions || []).map((d) => [d.id, d.taskId, d.verdict, d.rationale, d.consumed ? "yes" : ""])));
    const uncertain = (s.effects || []).filter((e) => e.state === "uncertain").length;
    out.push(el("div", `effects: ${(s.effects || []).length}${uncertain ? ` (${uncertain} uncertain)` : ""}`, uncertain ? "bad" : "dim"));
    out.push(el("h3", `Pending receipts (${(s.pendingReceipts || []).length})`), table(["operation", "action", "revision", "status"],
      (s.pendingReceipts || []).map((r) => [r.operationId, r.action, r.revision, r.status])));
  } else {
    out.push(el("div", "press load for the fleet's native roots (native sessions only: fleet run --native-root)", "dim"));
  }
  box.replaceChildren(...out);
}

async function post(frame) {
  const r = await fetch(`/api/fleets/${encodeURIComponent(st.fleet)}/send`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(frame),
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) flash(body.error || `error ${r.status}`);
  return r.ok;
}

function answer(frame) { st.mine.add(frame.id); post(frame); }

function flash(text) { $("flash").textContent = text; }

$("prompt-form").onsubmit = async (e) => {
  e.preventDefault();
  const i = $("prompt");
  const text = i.value;
  if (!text.trim() || !st.fleet) return;
  if (await post({ type: "prompt", text })) {
    st.history.push(text); st.histPos = st.history.length; $("complete").textContent = "";
    if (i.value === text) i.value = ""; // not what was typed since
  }
};

$("prompt").onkeydown = (e) => {
  const i = e.target;
  if (e.key === "Tab" && i.value.startsWith("/")) {
    e.preventDefault();
    const word = i.value.split(/\s/)[0];
    const m = st.commands.filter((c) => ("/" + c).startsWith(word) || c.startsWith(word));
    if (m.length === 1) i.value = (m[0].startsWith("/") ? m[0] : "/" + m[0]) + " ";
    $("complete").textContent = m.join("  ");
  } else if (e.key === "ArrowUp" && st.histPos > 0) {
    e.preventDefault(); i.value = st.history[--st.histPos];
  } else if (e.key === "ArrowDown" && st.histPos < st.history.length) {
    e.preventDefault(); st.histPos++; i.value = st.history[st.histPos] || "";
  }
};

$("transcript-close").onclick = () => select("");
$("diff-close").onclick = () => { st.diff = null; st.pendingAction = null; mark("diff"); };
$("diff-merge").onclick = () => landing(`Merge ${st.diff.worker} into its base branch?`, `/merge ${st.diff.worker}`);
$("diff-apply").onclick = () => landing(`Apply ${st.diff.worker}'s change to the repository's work tree (uncommitted, not staged)?`, `/apply ${st.diff.worker}`);
$("diff-pr").onclick = () => landing(`Push ${st.diff.worker}'s branch and open a pull request?`, `/pr ${st.diff.worker}`);
$("diff-cancel").onclick = () => landing(`Stop ${st.diff.worker}'s task?`, `/cancel ${st.diff.worker}`);
$("diff-yes").onclick = async () => {
  const a = st.pendingAction;
  st.pendingAction = null;
  mark("diff");
  if (a && await post({ type: "prompt", text: a.command })) flash("sent: " + a.command);
};
$("diff-no").onclick = () => { st.pendingAction = null; mark("diff"); };
$("native-load").onclick = () => nativeCall({ action: "list" });
$("native-yes").onclick = () => { const a = st.native.ask; st.native.ask = null; if (a) nativeCall(a.req); };
$("native-no").onclick = () => { st.native.ask = null; mark("native"); };
$("native-retry").onclick = () => { const u = st.native.uncertain; if (u) nativeCall(u); };
$("feed-kind").onchange = (e) => { st.feedKind = e.target.value; mark("feed-all"); };
$("feed-who").onchange = (e) => { st.feedWho = e.target.value; mark("feed-all"); };
$("help-button").onclick = () => { $("help").hidden = !$("help").hidden; };
$("notify").onclick = async () => {
  if (!("Notification" in window)) { flash("this browser has no notifications"); return; }
  const p = await Notification.requestPermission();
  flash(p === "granted" ? "you will be notified of requests while this tab is in the background" : "notifications: " + p);
};

const jumps = { w: "workers-pane", t: "tasks-pane", l: "timeline-pane", i: "intel-pane", n: "native-pane", f: "feed-pane" };

document.addEventListener("keydown", (e) => {
  const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement;
  if (e.key === "Escape") {
    if (!$("help").hidden) $("help").hidden = true;
    else if (typing) e.target.blur();
    else if (st.diff) { st.diff = null; st.pendingAction = null; mark("diff"); }
    else if (st.selected) select("");
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "?") { $("help").hidden = !$("help").hidden; }
  else if (e.key === "/") { e.preventDefault(); $("prompt").focus(); }
  else if (e.key === "r") { focusRequest(""); }
  else if (e.key === "d" && st.selected) { openDiff(st.selected); }
  else if (jumps[e.key]) { $(jumps[e.key]).scrollIntoView({ block: "start" }); }
  else if (/^[1-9]$/.test(e.key)) { const w = st.workers[Number(e.key) - 1]; if (w) select(w.id); }
});
$("picker").onchange = (e) => { reset(); open(e.target.value); };

loadFleets();
setInterval(loadFleets, 3000);
