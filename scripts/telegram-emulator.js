#!/usr/bin/env node
// Runs the telegram-test-api Bot API emulator for the hub tests, with a few
// middlewares the stock server lacks (see internal/tgemu):
//
//   node scripts/telegram-emulator.js PORT [MODULES_DIR]
//
// MODULES_DIR (default $FLEET_TEST_TELEGRAM_EMULATOR) is the folder whose
// node_modules holds telegram-test-api (scripts/install-telegram-emulator.sh).
// Prints "READY http://127.0.0.1:PORT" once listening; SIGTERM/SIGINT stop it.
//
// Added endpoints (JSON bodies):
//   POST /_calls {token}              -> {ok, result: [{method, time, params, fault?}]}
//   POST /_calls/reset {token}
//   POST /_fault {token, method, status, body, count}
//   POST /_fault/clear {token}
// and the client API's /sendMessage and /sendCommand answer
// {message_id, update_id} instead of null.
'use strict';

const path = require('path');

const HOST = '127.0.0.1'; // not localhost: Node may resolve it to ::1
const MAX_CALLS = 20000; // per token
const MAX_BODY = 64 << 20;

// Form fields Telegram takes as JSON text inside a form value.
const JSON_FIELDS = ['reply_markup', 'reply_parameters', 'link_preview_options', 'entities', 'caption_entities'];
// Fields the emulator echoes into the returned Message, where typed clients
// want numbers.
const NUMERIC_FIELDS = ['chat_id', 'message_id', 'message_thread_id', 'reply_to_message_id'];

function log(...args) {
  process.stderr.write(`telegram-emulator: ${args.join(' ')}\n`);
}

function usage(msg) {
  log(msg);
  log('usage: node scripts/telegram-emulator.js PORT [MODULES_DIR]');
  process.exit(2);
}

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port < 1 || port > 65535) usage(`bad PORT ${JSON.stringify(process.argv[2])}`);
const modulesDir = process.argv[3] || process.env.FLEET_TEST_TELEGRAM_EMULATOR;
if (!modulesDir) usage('no MODULES_DIR and FLEET_TEST_TELEGRAM_EMULATOR is not set');

// A malformed client request (no botToken) rejects a promise nobody awaits in
// the stock server; on Node >= 15 that would kill the emulator mid-test.
process.on('unhandledRejection', (err) => log('unhandled rejection:', err && err.stack || err));
process.on('uncaughtException', (err) => log('uncaught exception:', err && err.stack || err));

let pkg;
try {
  pkg = require(path.resolve(modulesDir, 'node_modules', 'telegram-test-api'));
} catch (err) {
  log(`cannot load telegram-test-api from ${modulesDir}/node_modules: ${err.message}`);
  log('install it with scripts/install-telegram-emulator.sh');
  process.exit(1);
}
const TelegramServer = pkg.TelegramServer || pkg.default || pkg;

// botPath splits /bot<token>/<method>; null for the client API.
function botPath(p) {
  const m = /^\/bot([^/]+)\/([^/]+)\/?$/.exec(p);
  if (!m) return null;
  try {
    return { token: decodeURIComponent(m[1]), method: decodeURIComponent(m[2]) };
  } catch {
    return null;
  }
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    req.on('data', (c) => {
      n += c.length;
      if (n > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function tgError(res, status, description) {
  res.status(status).json({ ok: false, error_code: status, description });
}

// multipart parses multipart/form-data bodies (go-telegram/bot sends every
// call that way), which the stock server's body parsers skip. Files are dropped.
async function multipart(req, res, next) {
  const ct = req.headers['content-type'] || '';
  if (!/^multipart\/form-data/i.test(ct) || req._body) return next();
  let buf;
  try {
    buf = await readBody(req);
  } catch (err) {
    return tgError(res, 400, `Bad Request: ${err.message}`);
  }
  const body = {};
  // go-telegram/bot sends an empty body for methods without parameters.
  if (buf.length > 0) {
    let form;
    try {
      form = await new Response(buf, { headers: { 'content-type': ct } }).formData();
    } catch (err) {
      return tgError(res, 400, `Bad Request: cannot parse multipart body: ${err.message}`);
    }
    for (const [k, v] of form.entries()) {
      if (typeof v === 'string') body[k] = v;
    }
  }
  req.body = body;
  req._body = true; // tells body-parser it is done
  next();
}

// normalize turns JSON-in-a-form-field values into objects and numeric ids
// into numbers, for bot calls only.
function normalize(req, res, next) {
  if (!botPath(req.path)) return next();
  const b = req.body && typeof req.body === 'object' ? req.body : {};
  req.body = b;
  for (const k of JSON_FIELDS) {
    if (typeof b[k] !== 'string') continue;
    try {
      b[k] = JSON.parse(b[k]);
    } catch {
      return tgError(res, 400, `Bad Request: can't parse ${k} JSON object`);
    }
  }
  const rp = b.reply_parameters;
  if (rp && typeof rp === 'object' && rp.message_id !== undefined && b.reply_to_message_id === undefined) {
    b.reply_to_message_id = rp.message_id;
  }
  for (const k of NUMERIC_FIELDS) {
    if (typeof b[k] === 'string' && /^-?\d+$/.test(b[k])) b[k] = Number(b[k]);
  }
  next();
}

const calls = new Map(); // token -> [{method, time, params, fault?}]
const faults = new Map(); // token -> [{method, status, body, count}]

function record(token, entry) {
  let list = calls.get(token);
  if (!list) {
    list = [];
    calls.set(token, list);
  }
  list.push(entry);
  if (list.length > MAX_CALLS) list.splice(0, list.length - MAX_CALLS);
}

function takeFault(token, method) {
  const list = faults.get(token);
  if (!list) return null;
  const i = list.findIndex((f) => f.method.toLowerCase() === method.toLowerCase());
  if (i < 0) return null;
  const f = list[i];
  f.count--;
  if (f.count <= 0) list.splice(i, 1);
  return f;
}

// botCalls records every bot call, then answers it with an injected fault if
// one is armed.
function botCalls(req, res, next) {
  const bp = botPath(req.path);
  if (!bp) return next();
  const entry = { method: bp.method, time: Date.now(), params: structuredClone(req.body) };
  record(bp.token, entry);
  const f = takeFault(bp.token, bp.method);
  if (!f) return next();
  entry.fault = f.status;
  res.status(f.status).type('application/json').send(f.body);
}

function tokenOf(req, res) {
  const t = req.body && req.body.token;
  if (typeof t !== 'string' || t === '') {
    tgError(res, 400, 'Bad Request: token is required');
    return null;
  }
  return t;
}

// control serves the /_calls and /_fault endpoints.
function control(req, res, next) {
  if (!req.path.startsWith('/_')) return next();
  if (req.method !== 'POST') return tgError(res, 405, 'POST only');
  const token = tokenOf(req, res);
  if (token === null) return undefined;
  switch (req.path) {
    case '/_calls':
      return res.json({ ok: true, result: calls.get(token) || [] });
    case '/_calls/reset':
      calls.delete(token);
      return res.json({ ok: true, result: true });
    case '/_fault': {
      const { method, status, count } = req.body;
      let { body } = req.body;
      if (typeof method !== 'string' || method === '') return tgError(res, 400, 'Bad Request: method is required');
      if (!Number.isInteger(status) || status < 100 || status > 599) return tgError(res, 400, 'Bad Request: bad status');
      const n = count === undefined ? 1 : count;
      if (!Number.isInteger(n) || n < 1) return tgError(res, 400, 'Bad Request: bad count');
      if (typeof body !== 'string') body = JSON.stringify(body === undefined ? { ok: false, error_code: status, description: 'injected fault' } : body);
      if (!faults.has(token)) faults.set(token, []);
      faults.get(token).push({ method, status, body, count: n });
      return res.json({ ok: true, result: true });
    }
    case '/_fault/clear':
      faults.delete(token);
      return res.json({ ok: true, result: true });
    default:
      return tgError(res, 404, `Not Found: ${req.path}`);
  }
}

// userIds makes the client API's /sendMessage and /sendCommand answer the
// ids the emulator assigns (stock: result null), so a test can reply to or
// find its own message. Routes run synchronously after this middleware, so
// the counters read here are the ones the handler uses. It also refuses
// requests the stock server would accept with ok:true and then fail on in
// an unawaited promise (no botToken; a command without entities).
function userIds(req, res, next) {
  if (req.method !== 'POST' || !['/sendMessage', '/sendCommand', '/sendCallback'].includes(req.path)) return next();
  if (!req.body || typeof req.body.botToken !== 'string' || req.body.botToken === '') {
    return tgError(res, 400, 'Bad Request: botToken is required');
  }
  if (req.path === '/sendCommand' && !Array.isArray(req.body.entities)) {
    return tgError(res, 400, 'Bad Request: a command needs entities');
  }
  if (req.path === '/sendCallback') return next();
  const ids = { message_id: server.messageId, update_id: server.updateId };
  const json = res.json.bind(res);
  res.json = (body) => json(body && body.ok && body.result === null ? { ...body, result: ids } : body);
  return next();
}

const server = new TelegramServer({ port, host: HOST, storeTimeout: 3600 });
const app = server.webServer || server.app;
if (!app || !app._router || !Array.isArray(app._router.stack)) {
  log('telegram-test-api changed: no express app with _router.stack');
  process.exit(1);
}

// insertAt moves middlewares to index `at` of app._router.stack (Express 4
// runs layers in stack order; app.use only appends, after the 404 handler).
function insertAt(at, ...fns) {
  const stack = app._router.stack;
  const before = stack.length;
  for (const fn of fns) app.use(fn);
  const added = stack.splice(before, stack.length - before);
  stack.splice(at, 0, ...added);
}

{
  const stack = app._router.stack;
  // After Express's own query/expressInit layers (they set up req/res
  // helpers), before the stock body parsers.
  const init = stack.findIndex((l) => l.name === 'expressInit');
  if (init < 0) {
    log('express changed: no expressInit layer');
    process.exit(1);
  }
  insertAt(init + 1, multipart);
  // After the body parsers, before the first route.
  const firstRoute = stack.findIndex((l) => l.route);
  if (firstRoute < 0) {
    log('telegram-test-api changed: no routes in the express app');
    process.exit(1);
  }
  insertAt(firstRoute, control, userIds, normalize, botCalls);
}

let started = false;
let stopping = false;

async function shutdown(sig) {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(0), 3000).unref();
  try {
    if (started) await server.stop();
  } catch (err) {
    log(`stop on ${sig}:`, err && err.message);
  }
  process.exit(0);
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

server.start().then(() => {
  started = true;
  if (stopping) return;
  process.stdout.write(`READY http://${HOST}:${port}\n`);
}, (err) => {
  log(`cannot listen on ${HOST}:${port}: ${err.message}`);
  process.exit(1);
});
