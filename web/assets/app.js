// fleet web: the page. Every string from a fleet is set as text
// (textContent, never innerHTML). Frames arrive over Server-Sent Events from
// the server's connection to the fleet; a "reset" event starts a fresh
// replay, so a page that reconnects shows nothing twice.
"use strict";

const MAX_LINES = 2000; // per worker transcript and for the feed
const $ = (id) => document.getElementById(id);

const st = {
  fleet: "", es: null,
  workers: [], selected: "",
  transcripts: new Map(), // agent -> {lines: [], dropped: n}
  feed: [], feedDropped: 0,
  requests: new Map(), // id -> frame, creation order
  gone: "",
  commands: [],
  history: [], histPos: 0,
  welcome: null, state: null,
  timeline: [], timelineAt: 0, intel: null, status: null,
  diff: null, // {worker, waiting (the /diff prompt's requestId), echoed, text}
  pendingAction: null, // {label, command}: a landing action waiting for its confirmation
  replaying: true, // between reset and replayEnd: requests then are not new
  notified: new Set(),
  feedKind: "", feedWho: "",
};

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

async function loadFleets() {
  const r = await fetch("/api/fleets");
  if (!r.ok) { flash("fleets: " + r.status); return; }
  const { fleets, preselect } = await r.json();
  const p = $("picker");
  const want = new URLSearchParams(location.search).get("fleet") || preselect || st.fleet;
  p.replaceChildren();
  for (const f of fleets) {
    const o = el("option", `${f.name} (${f.id}) ${f.cwd}`);
    o.value = f.id;
    p.append(o);
  }
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
  es.addEventListener("reset", reset);
  es.addEventListener("frame", (e) => frame(JSON.parse(e.data)));
  es.addEventListener("replayEnd", () => { st.replaying = false; render(); });
  es.addEventListener("missed", (e) => { st.feedDropped += JSON.parse(e.data).missed; });
  es.addEventListener("conn", (e) => conn(JSON.parse(e.data)));
  es.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "conn connecting"; };
}

function reset() {
  st.workers = []; st.transcripts = new Map(); st.feed = []; st.feedDropped = 0;
  st.requests = new Map(); st.welcome = null; st.state = null; st.replaying = true; st.timeline = []; st.intel = null; st.status = null;
  render();
}

function conn(c) {
  const s = $("conn");
  s.textContent = c.state === "attached" ? "" : c.state + (c.error ? ": " + c.error : "");
  s.className = "conn " + c.state;
}

function pushLine(list, holder, line) {
  list.push(line);
  if (list.length > MAX_LINES) { list.splice(0, list.length - MAX_LINES); holder.dropped = (holder.dropped || 0) + 1; }
}

function transcriptOf(agent) {
  let t = st.transcripts.get(agent);
  if (!t) { t = { lines: [], dropped: 0 }; st.transcripts.set(agent, t); }
  return t;
}

// addFeed adds an entry: kind is user, reply, assistant… (the
// conversation), hub, toolCall or fileChange; who is the agent it is of.
function addFeed(kind, text, who) {
  st.feed.push({ kind, text, who });
  if (st.feed.length > MAX_LINES) { st.feedDropped += st.feed.length - MAX_LINES; st.feed.splice(0, st.feed.length - MAX_LINES); }
}

function hubText(h) { return `${h.from} ${h.kind}${h.to ? " → " + h.to : ""}${h.text ? ": " + h.text : ""}`; }

let pending = false;
function later() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; render(); }); } }

function frame(f) {
  switch (f.type) {
    case "welcome": st.welcome = f; break;
    case "commandCatalog": st.commands = (f.commands || []).map((c) => c.name); break;
    case "fleetIntel": st.intel = f; break;
    case "status": st.status = f; break;
    case "hydrate":
      for (const c of f.conversation || []) addFeed(c.role, c.text, c.agent || "");
      for (const t of f.transcripts || []) { const h = transcriptOf(t.agent); pushLine(h.lines, h, t); }
      for (const h of f.hub || []) addFeed("hub", hubText(h), h.from);
      break;
    case "userMessage":
      if (st.diff && f.requestId && f.requestId === st.diff.waiting) { st.diff.echoed = true; break; }
      addFeed("user", f.text, f.source);
      break;
    case "reply":
      // The reply that follows a /diff the page sent is the diff.
      if (st.diff && st.diff.echoed && st.diff.text === null) { st.diff.text = f.text; st.diff.waiting = ""; break; }
      addFeed("reply", f.text, "fleet");
      break;
    case "hubEvent": addFeed("hub", hubText(f), f.from); break;
    case "toolCall":
      if (f.phase === "complete" || f.phase === "error") {
        addFeed("toolCall", `${f.agent} ${f.tool}${f.isError ? " (error)" : ""}: ${firstLine(f.result || f.detail || "")}`, f.agent);
      }
      break;
    case "fileChange":
      for (const c of f.changes || []) addFeed("fileChange", `${c.agent} ${c.changeType} ${c.path}`, c.agent);
      break;
    case "transcript": { const h = transcriptOf(f.agent || "coordinator"); pushLine(h.lines, h, f); break; }
    case "confirmRequest": case "askRequest":
      st.requests.set(f.id, f);
      if (!st.replaying) notify(f);
      break;
    case "confirmResolved":
      if (st.requests.has(f.id)) {
        st.requests.delete(f.id);
        st.gone = `${f.id} ${f.reason === "answered" || !f.reason ? "answered" : f.reason}${f.message ? ": " + f.message : ""}`;
      }
      break;
    case "fleetState": st.state = f; st.workers = f.workers || []; break;
    case "fleetAnalytics": st.timeline = f.workerTimeline || []; st.timelineAt = f.ts || Date.now(); break;
  }
  later();
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
  const d = id ? document.querySelector(`.req[data-id="${CSS.escape(id)}"]`) : document.querySelector(".req");
  if (d) { d.scrollIntoView({ block: "center" }); const b = d.querySelector("button,input"); if (b) b.focus(); }
}

function render() {
  const w = st.welcome;
  $("fleet-name").textContent = w ? w.sessionName || "" : "";
  const s = st.state;
  const parts = [];
  if (w) parts.push([w.provider, w.model].filter(Boolean).join("/"));
  const up = s && s.session && s.session.uptime;
  if (up) parts.push("up " + duration(up));
  if (s) parts.push(`${s.workerActive}/${s.workerTotal} workers`, `tokens ${tokenTotal(s.tokens)}`);
  if (s && s.budget && s.budget.sessionTokens) parts.push(`budget ${s.budget.sessionUsed}/${s.budget.sessionTokens}`);
  if (st.status && st.status.processing) parts.push("processing");
  if (s && s.coordinator && s.coordinator.dispatchPaused) parts.push("dispatch paused");
  $("fleet-info").textContent = parts.filter(Boolean).join(" · ");
  renderRequests();
  renderWorkers();
  renderTranscript();
  renderDiff();
  renderIntel();
  renderTasks();
  renderTimeline();
  renderFeed();
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
  const id = "web-diff-" + Math.random().toString(36).slice(2);
  st.diff = { worker: w, waiting: id, echoed: false, text: null };
  st.pendingAction = null;
  post({ type: "prompt", text: `/diff ${w}`, requestId: id });
  render();
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
    else if (/^(diff --git|index |--- |\+\+\+ |new file|deleted file|similarity|rename )/.test(line)) cls = "meta";
    cur.lines.push(el("pre", line || " ", cls));
  }
  box.replaceChildren(...files.map((f) => {
    const d = el("div", null, "file");
    d.append(el("h3", f.path ? `${f.path}  +${f.add} −${f.del}` : "—"), ...f.lines);
    return d;
  }));
}

// landing asks for a confirmation on the page, then sends command.
function landing(question, command) {
  st.pendingAction = { question, command };
  render();
}

function tokenTotal(t) {
  if (!t) return 0;
  return t.totalTokens ?? ((t.inputTokens || 0) + (t.outputTokens || 0));
}

function duration(ms) {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor(s % 3600 / 60)}m`;
}

// renderIntel shows fleetIntel: what past runs say, and the suggestions,
// each accepted or dismissed with /fleet-intel.
function renderIntel() {
  const i = st.intel;
  const sum = i && i.summary;
  $("intel-summary").textContent = sum ? `${sum.totalAgentRuns} runs · ${Math.round((sum.successRate || 0) * 100)}% succeeded · ${sum.failedRuns} failed · ${sum.totalTokens} tokens` : "";
  $("intel-errors").textContent = sum && (sum.topErrors || []).length ? "top errors: " + sum.topErrors.map((e) => `${e.message} (${e.count})`).join(" · ") : "";
  const box = $("intel-suggestions");
  box.replaceChildren(...((i && i.suggestions) || []).map((g) => {
    const d = el("div", null, "req");
    d.dataset.id = g.id;
    d.append(el("span", `${g.title} (${g.suggestionType}, ${Math.round(g.confidence * 100)}%) `));
    for (const [label, verb] of [["accept", "accept"], ["dismiss", "dismiss"]]) {
      const b = el("button", label);
      b.type = "button";
      b.onclick = () => post({ type: "prompt", text: `/fleet-intel ${verb} ${g.id}` });
      d.append(b);
    }
    return d;
  }));
}

function renderTasks() {
  const t = (st.state && st.state.tasks) || { items: [] };
  $("task-counts").textContent = st.state ? `${t.total ?? 0} tasks · ${t.done ?? 0} done · ${t.running ?? 0} running · ${t.pending ?? 0} pending · ${t.blocked ?? 0} blocked` : "";
  const tb = $("tasks").tBodies[0];
  tb.replaceChildren();
  for (const i of t.items || []) {
    const tr = el("tr");
    for (const v of [i.id, i.status, i.owner || "", i.subject, i.waitReason || ""]) tr.append(el("td", v));
    tb.append(tr);
  }
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
      const yes = el("button", "Approve"), no = el("button", "Deny");
      yes.onclick = () => answer({ type: "confirmResponse", id: r.id, approve: true });
      no.onclick = () => answer({ type: "confirmResponse", id: r.id, approve: false });
      d.append(yes, no);
    } else {
      d.append(el("div", `ask ${r.id}`, "dim"), el("pre", r.question));
      for (const c of r.choices || []) {
        const b = el("button", c.label);
        b.onclick = () => answer({ type: "askResponse", id: r.id, text: c.value });
        d.append(b);
      }
      if (r.allowFreeform !== false || !(r.choices || []).length) {
        const f = el("form");
        const i = el("input");
        i.placeholder = "answer";
        f.append(i, el("button", "Answer"));
        f.onsubmit = (e) => { e.preventDefault(); answer({ type: "askResponse", id: r.id, text: i.value }); };
        d.append(f);
      }
    }
    list.append(d);
  }
}

function renderWorkers() {
  const tb = $("workers").tBodies[0];
  tb.replaceChildren();
  for (const w of st.workers) {
    const g = w.git || {};
    const tr = el("tr");
    tr.dataset.id = w.id;
    if (w.id === st.selected) tr.className = "selected";
    for (const v of [w.name || w.id, w.status, w.taskId || "", w.host || "", g.branch || "", w.toolUseCount ?? 0, w.tokenCount ?? 0, w.recentActivity || ""]) tr.append(el("td", v));
    const d = el("button", "diff");
    d.type = "button";
    d.onclick = (e) => { e.stopPropagation(); openDiff(w.id); };
    const td = el("td");
    td.append(d);
    tr.append(td);
    tr.onclick = () => { st.selected = w.id; render(); };
    tb.append(tr);
  }
}

function renderTranscript() {
  const pane = $("transcript-pane");
  pane.hidden = !st.selected;
  if (!st.selected) return;
  $("transcript-of").textContent = st.selected;
  const t = st.transcripts.get(st.selected) || { lines: [], dropped: 0 };
  $("transcript-missed").textContent = t.dropped ? `${t.dropped} older lines not shown` : "";
  const box = $("transcript");
  box.replaceChildren(...t.lines.map((l) => el("div", l.text, "line " + (l.role || ""))));
  box.scrollTop = box.scrollHeight;
}

const conversation = new Set(["user", "reply", "assistant", "system", "tool"]);

function renderFeed() {
  $("missed").textContent = st.feedDropped ? `${st.feedDropped} older entries not shown` : "";
  const who = $("feed-who");
  const agents = [...new Set(st.feed.map((e) => e.who).filter((w) => w && w !== "fleet"))].sort();
  if (who.options.length !== agents.length + 1) {
    who.replaceChildren(el("option", "every worker"), ...agents.map((a) => el("option", a)));
    who.options[0].value = "";
    who.value = agents.includes(st.feedWho) ? st.feedWho : "";
  }
  const shown = st.feed.filter((e) =>
    (!st.feedKind || e.kind === st.feedKind || (st.feedKind === "conversation" && conversation.has(e.kind))) &&
    (!st.feedWho || e.who === st.feedWho));
  const box = $("feed");
  box.replaceChildren(...shown.map((e) => el("div", (e.kind === "user" || e.kind === "reply") && e.who ? e.who + ": " + e.text : e.text, "line " + e.kind)));
  box.scrollTop = box.scrollHeight;
}

async function post(frame) {
  const r = await fetch(`/api/fleets/${encodeURIComponent(st.fleet)}/send`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(frame),
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) flash(body.error || `error ${r.status}`);
  return r.ok;
}

function answer(frame) { post(frame); }

function flash(text) { $("flash").textContent = text; }

$("prompt-form").onsubmit = async (e) => {
  e.preventDefault();
  const i = $("prompt");
  const text = i.value;
  if (!text.trim() || !st.fleet) return;
  if (await post({ type: "prompt", text })) {
    st.history.push(text); st.histPos = st.history.length; i.value = ""; $("complete").textContent = "";
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

$("transcript-close").onclick = () => { st.selected = ""; render(); };
$("diff-close").onclick = () => { st.diff = null; st.pendingAction = null; render(); };
$("diff-merge").onclick = () => landing(`Merge ${st.diff.worker} into its base branch?`, `/merge ${st.diff.worker}`);
$("diff-pr").onclick = () => landing(`Push ${st.diff.worker}'s branch and open a pull request?`, `/pr ${st.diff.worker}`);
$("diff-cancel").onclick = () => landing(`Stop ${st.diff.worker}'s task?`, `/cancel ${st.diff.worker}`);
$("diff-yes").onclick = async () => {
  const a = st.pendingAction;
  st.pendingAction = null;
  render();
  if (a && await post({ type: "prompt", text: a.command })) flash("sent: " + a.command);
};
$("diff-no").onclick = () => { st.pendingAction = null; render(); };
$("feed-kind").onchange = (e) => { st.feedKind = e.target.value; render(); };
$("feed-who").onchange = (e) => { st.feedWho = e.target.value; render(); };
$("help-button").onclick = () => { $("help").hidden = !$("help").hidden; };
$("notify").onclick = async () => {
  if (!("Notification" in window)) { flash("this browser has no notifications"); return; }
  const p = await Notification.requestPermission();
  flash(p === "granted" ? "you will be notified of requests while this tab is in the background" : "notifications: " + p);
};

document.addEventListener("keydown", (e) => {
  const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement;
  if (e.key === "Escape") {
    if (!$("help").hidden) $("help").hidden = true;
    else if (typing) e.target.blur();
    else if (st.selected) { st.selected = ""; render(); }
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "?") { $("help").hidden = !$("help").hidden; }
  else if (e.key === "/") { e.preventDefault(); $("prompt").focus(); }
  else if (e.key === "r") { focusRequest(""); }
  else if (/^[1-9]$/.test(e.key)) { const w = st.workers[Number(e.key) - 1]; if (w) { st.selected = w.id; render(); } }
});
$("picker").onchange = (e) => { reset(); open(e.target.value); };

loadFleets();
setInterval(loadFleets, 3000);
