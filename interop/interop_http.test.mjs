// Interop test of mcpmux's streamable HTTP upstream: the official MCP
// TypeScript SDK client (StreamableHTTPClientTransport) drives mcpmux over
// HTTP, with labserver and the official reference server
// (@modelcontextprotocol/server-everything) as children.
//
// It proves that two callers holding two bearer tokens (one given as a
// SHA-256 digest in the config, one read from mcpmux's environment) are two
// identities with their own catalogs at the same time, and that each one's
// calls work within its policy and are refused (JSON-RPC -32602) outside it;
// that a request with no token, or a wrong one, is a 401 the SDK surfaces as
// a StreamableHTTPError with code 401; that the SDK opens its GET stream
// after initializing and that a policy file rewritten the way editors do
// reaches the affected caller on it as notifications/tools/list_changed (and
// not the caller whose tools did not change); that /healthz, /readyz and
// /metrics are served on the same address; and that mcpmux, serving HTTP
// only, exits 0 on SIGTERM with its children gone and nothing on stdout.
// Two TODO tests record known gaps (a session is not bound to the identity
// that opened it; a GET without Mcp-Session-Id opens a stream): they run and
// are reported, but do not fail `npm test`.
//
// mcpmux runs as a plain child process: `mcpmux serve --config FILE` with
// listen = "127.0.0.1:0"; its address is read from its JSON log on stderr.
// Binaries as in interop.test.mjs (MCPMUX_BIN, LABSERVER_BIN, or built).
// INTEROP_VERBOSE=1 prints mcpmux's log at the end.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, mkdir, writeFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ErrorCode, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  BUILD_TIMEOUT_MS,
  CONNECT_TIMEOUT_MS,
  EXIT_TIMEOUT_MS,
  binaries,
  everythingEntry,
  jsonRecords,
  text,
  toml,
  withTimeout,
} from './support.mjs';

const NOTIFY_TIMEOUT_MS = 10_000;

const readerToken = randomBytes(24).toString('base64url');
const adminToken = randomBytes(24).toString('base64url');

let work; // temporary directory: config, policies, maybe binaries
let policyDir;
let proc; // mcpmux's ChildProcess
let exited; // resolves with { code, signal } when mcpmux exits
let stderrDone; // resolves when mcpmux's stderr has been read to its end
const stderrLines = [];
let stdout = '';
let origin; // http://127.0.0.1:PORT
let mcpUrl;

const sessions = []; // every connection opened, closed in after()

function logRecords() {
  return jsonRecords(stderrLines);
}

/** Save identity's policy the way editors do: a temporary file, renamed over it. */
async function writePolicy(identity, body) {
  const tmp = path.join(policyDir, `.${identity}.tmp`);
  await writeFile(tmp, body);
  await rename(tmp, path.join(policyDir, `${identity}.toml`));
}

/** Resolves with the first stderr record matching pred; rejects if mcpmux exits first. */
function logRecord(pred, what) {
  return new Promise((resolve, reject) => {
    const check = () => logRecords().find(pred);
    const found = check();
    if (found) return resolve(found);
    const onLine = () => {
      const r = check();
      if (r) {
        cleanup();
        resolve(r);
      }
    };
    const onExit = (code, signal) => {
      cleanup();
      reject(new Error(`mcpmux exited (${code ?? signal}) before logging ${what}:\n${stderrLines.join('\n')}`));
    };
    const cleanup = () => {
      lineEvents.off('line', onLine);
      proc.off('exit', onExit);
    };
    lineEvents.on('line', onLine);
    proc.once('exit', onExit);
  });
}
let lineEvents; // readline interface on mcpmux's stderr

/**
 * Connects an SDK client to mcpmux over streamable HTTP with token (none if
 * undefined). The returned sseOpen resolves once the SDK's GET stream for
 * server messages got its 200 text/event-stream answer; listChanged counts
 * notifications/tools/list_changed and waitListChanged(n) waits for the nth.
 */
async function connect(name, token) {
  let sseOpened;
  const sseOpen = new Promise((resolve) => (sseOpened = resolve));
  const requests = []; // { method, status, type } of every HTTP request the transport made
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: token === undefined ? undefined : { headers: { Authorization: `Bearer ${token}` } },
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      const type = res.headers.get('content-type') ?? '';
      requests.push({ method: init?.method ?? 'GET', status: res.status, type });
      if ((init?.method ?? 'GET') === 'GET' && res.ok && type.startsWith('text/event-stream')) sseOpened();
      return res;
    },
  });
  const client = new Client({ name, version: '1.0.0' });
  const conn = { name, client, transport, requests, sseOpen, listChanged: 0, waiters: [] };
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    conn.listChanged++;
    conn.waiters = conn.waiters.filter((w) => {
      if (conn.listChanged >= w.n) w.resolve();
      return conn.listChanged < w.n;
    });
  });
  conn.waitListChanged = (n) =>
    withTimeout(
      conn.listChanged >= n ? Promise.resolve() : new Promise((resolve) => conn.waiters.push({ n, resolve })),
      NOTIFY_TIMEOUT_MS,
      `${name}: tools/list_changed #${n}`,
    );
  sessions.push(conn);
  await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `${name}: connect`);
  return conn;
}

async function toolNames(conn) {
  const res = await conn.client.listTools();
  assert.equal(res.nextCursor, undefined, 'whole catalog expected on one page');
  return res.tools.map((t) => t.name);
}

async function metrics() {
  const res = await fetch(`${origin}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

/** The value of a metric line `name{labels} value`, or undefined. */
function metricValue(body, name, labels) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of body.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2].split(',');
    if (want.every((w) => have.includes(w))) return Number(m[3]);
  }
  return undefined;
}

function assertInvalidParams(promise, what) {
  return assert.rejects(promise, (err) => {
    assert.ok(err instanceof McpError, `${what}: not an McpError: ${err}`);
    assert.equal(err.code, ErrorCode.InvalidParams, `${what}: ${err.message}`);
    assert.equal(err.code, -32602);
    return true;
  });
}

before(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'mcpmux-interop-http-'));
  const bins = await binaries(work);
  const entry = await everythingEntry();

  policyDir = path.join(work, 'policies');
  await mkdir(policyDir);
  await writePolicy('reader', 'allow = ["docs__*"]\n');
  await writePolicy('admin', 'allow = ["*"]\n');
  const readerDigest = createHash('sha256').update(readerToken).digest('hex');
  const cfg = path.join(work, 'mcpmux.toml');
  await writeFile(
    cfg,
    `[mux]
policy_dir = "policies"
call_timeout = "30s"

[upstream]
listen = "127.0.0.1:0"

[[upstream.tokens]]
identity = "reader"
sha256 = ${toml(readerDigest)}

[[upstream.tokens]]
identity = "admin"
env = "INTEROP_ADMIN_TOKEN"

[servers.docs]
command = ${toml(bins.labserver)}
env = { LAB_SOURCE = "docs" }
hide = ["crash_for_test"]
read_only = ["search"]

[servers.everything]
command = ${toml(process.execPath)}
args = [${toml(entry)}, "stdio"]
inherit_env = []
`,
  );

  // stdin is /dev/null: serving HTTP only, mcpmux must not stop at its EOF.
  proc = spawn(bins.mcpmux, ['serve', '--config', cfg], {
    env: { ...process.env, INTEROP_ADMIN_TOKEN: adminToken },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  exited = once(proc, 'exit').then(([code, signal]) => ({ code, signal }));
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (chunk) => (stdout += chunk));
  lineEvents = createInterface({ input: proc.stderr, crlfDelay: Infinity });
  lineEvents.on('line', (line) => stderrLines.push(line));
  stderrDone = once(lineEvents, 'close');

  const serving = await withTimeout(
    logRecord((r) => r.message === 'serving HTTP' && typeof r.addr === 'string', '"serving HTTP"'),
    CONNECT_TIMEOUT_MS,
    'mcpmux listening',
  );
  origin = `http://${serving.addr}`;
  mcpUrl = `${origin}/mcp`;

  // Catalog changes (each child becoming ready) are announced to every
  // session open at the time. A first tools/list returns once every child
  // has started and the catalog has been published, so sessions opened after
  // this one see only the notifications the tests cause.
  const warmup = await connect('interop-warmup', adminToken);
  assert.ok((await toolNames(warmup)).includes('everything__echo'));
  await warmup.transport.terminateSession();
  await warmup.client.close();
}, { timeout: BUILD_TIMEOUT_MS + CONNECT_TIMEOUT_MS });

after(async () => {
  for (const s of sessions) await s.client.close().catch(() => {});
  // Normally the last test has stopped mcpmux; this is for failures.
  if (proc && proc.exitCode === null && proc.signalCode === null) {
    proc.kill('SIGKILL');
  }
  if (process.env.INTEROP_VERBOSE) {
    console.error('--- mcpmux stderr ---\n' + stderrLines.join('\n'));
  }
  if (work) await rm(work, { recursive: true, force: true });
});

let reader;
let admin;

test('two tokens are two identities, each with its own catalog, at the same time', async () => {
  [reader, admin] = await Promise.all([connect('interop-reader', readerToken), connect('interop-admin', adminToken)]);
  assert.notEqual(reader.transport.sessionId, undefined, 'no Mcp-Session-Id');
  assert.notEqual(reader.transport.sessionId, admin.transport.sessionId);
  assert.equal(reader.client.getServerVersion()?.name, 'mcpmux');
  assert.ok(reader.client.getServerCapabilities()?.tools?.listChanged, 'tools.listChanged capability missing');

  const [readerTools, adminTools] = await Promise.all([toolNames(reader), toolNames(admin)]);
  for (const name of ['docs__search', 'docs__echo']) {
    assert.ok(readerTools.includes(name), `reader lacks ${name}: ${readerTools}`);
    assert.ok(adminTools.includes(name), `admin lacks ${name}: ${adminTools}`);
  }
  assert.ok(readerTools.every((n) => n.startsWith('docs__')), `reader sees beyond docs__*: ${readerTools}`);
  for (const name of ['everything__echo', 'everything__get-sum']) {
    assert.ok(adminTools.includes(name), `admin lacks ${name}: ${adminTools}`);
  }
  assert.ok(!adminTools.includes('docs__crash_for_test'), 'hidden tool listed');
  assert.deepEqual(
    readerTools,
    adminTools.filter((n) => n.startsWith('docs__')),
    'the docs tools differ between identities',
  );
});

test('calls work per identity, interleaved; outside the policy is -32602', async () => {
  const calls = [];
  for (let i = 0; i < 6; i++) {
    const message = `m-${i}-${Math.random().toString(36).slice(2)}`;
    calls.push(
      reader.client.callTool({ name: 'docs__echo', arguments: { message } }).then((r) => ({ r, want: `docs: ${message}` })),
      admin.client.callTool({ name: 'docs__echo', arguments: { message } }).then((r) => ({ r, want: `docs: ${message}` })),
      admin.client.callTool({ name: 'everything__echo', arguments: { message } }).then((r) => ({ r, want: `Echo: ${message}` })),
    );
  }
  for (const { r, want } of await Promise.all(calls)) {
    assert.ok(!r.isError, JSON.stringify(r));
    assert.equal(text(r), want);
  }

  const pub = await reader.client.callTool({ name: 'docs__search', arguments: { query: 'public' } });
  assert.ok(!pub.isError, JSON.stringify(pub));
  assert.equal(text(pub), 'docs: public evidence');

  // Listed for admin, not for reader: refused as an unknown tool would be.
  await assertInvalidParams(reader.client.callTool({ name: 'everything__echo', arguments: { message: 'x' } }), 'reader everything__echo');
  await assertInvalidParams(admin.client.callTool({ name: 'docs__crash_for_test', arguments: {} }), 'admin hidden tool');
  // The refusal did not break reader's session.
  const again = await reader.client.callTool({ name: 'docs__echo', arguments: { message: 'still here' } });
  assert.equal(text(again), 'docs: still here');
});

test('no token, or a wrong one: 401, surfaced by the SDK as StreamableHTTPError 401', async () => {
  for (const [what, token] of [
    ['no token', undefined],
    ['wrong token', 'not-' + readerToken],
    ['the digest itself', createHash('sha256').update(readerToken).digest('hex')],
  ]) {
    await assert.rejects(connect(`interop-${what.replaceAll(' ', '-')}`, token), (err) => {
      assert.ok(err instanceof StreamableHTTPError, `${what}: not a StreamableHTTPError: ${err?.constructor?.name}: ${err}`);
      assert.equal(err.code, 401, `${what}: ${err.message}`);
      return true;
    });
  }

  // The challenge, as a plain client sees it.
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="mcpmux"/);
  assert.doesNotMatch(res.headers.get('www-authenticate'), /invalid_token/);
  await res.body?.cancel();

  // None of this left a secret in the log.
  const log = stderrLines.join('\n');
  assert.ok(!log.includes(readerToken) && !log.includes(adminToken), 'a token was logged');
});

test('list_changed over HTTP: a policy rewrite reaches the affected caller on its GET stream', async () => {
  // The SDK opens its GET stream after notifications/initialized.
  await withTimeout(reader.sseOpen, CONNECT_TIMEOUT_MS, 'reader GET stream');
  await withTimeout(admin.sseOpen, CONNECT_TIMEOUT_MS, 'admin GET stream');
  assert.ok(reader.requests.some((r) => r.method === 'GET' && r.status === 200));
  assert.equal(reader.listChanged, 0);
  assert.equal(admin.listChanged, 0);

  await writePolicy('reader', 'allow = ["docs__*", "everything__echo"]\n');
  await reader.waitListChanged(1);

  const tools = await toolNames(reader);
  assert.ok(tools.includes('everything__echo'), `reader's list lacks everything__echo after the rewrite: ${tools}`);
  assert.ok(!tools.includes('everything__get-sum'), 'reader sees more than its policy allows');
  const echo = await reader.client.callTool({ name: 'everything__echo', arguments: { message: 'newly allowed' } });
  assert.ok(!echo.isError, JSON.stringify(echo));
  assert.equal(text(echo), 'Echo: newly allowed');

  // admin's tools did not change, so it was not told they did. (Both were
  // sent in the same pass; a stray one would have arrived by now.)
  await toolNames(admin);
  assert.equal(admin.listChanged, 0, 'admin was sent tools/list_changed though its tools did not change');

  // And back: taken away again, told again.
  await writePolicy('reader', 'allow = ["docs__*"]\n');
  await reader.waitListChanged(2);
  assert.ok(!(await toolNames(reader)).includes('everything__echo'));
  await assertInvalidParams(reader.client.callTool({ name: 'everything__echo', arguments: { message: 'x' } }), 'reader after revert');
});

test('server-everything through the HTTP upstream', async () => {
  const echo = await admin.client.callTool({ name: 'everything__echo', arguments: { message: 'hello over HTTP' } });
  assert.ok(!echo.isError, JSON.stringify(echo));
  assert.equal(text(echo), 'Echo: hello over HTTP');

  const sum = await admin.client.callTool({ name: 'everything__get-sum', arguments: { a: 2, b: 3.5 } });
  assert.ok(!sum.isError, JSON.stringify(sum));
  assert.equal(text(sum), 'The sum of 2 and 3.5 is 5.5.');

  // The SDK validates structuredContent against the outputSchema mcpmux relayed.
  const weather = await admin.client.callTool({ name: 'everything__get-structured-content', arguments: { location: 'Chicago' } });
  assert.ok(!weather.isError, JSON.stringify(weather));
  assert.deepEqual(weather.structuredContent, { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 });

  const bad = await admin.client.callTool({ name: 'everything__echo', arguments: {} });
  assert.equal(bad.isError, true, JSON.stringify(bad));
  assert.match(text(bad), /message/);
});

test('/healthz, /readyz and /metrics on the same address, without a token', async () => {
  const health = await fetch(`${origin}/healthz`);
  assert.equal(health.status, 200);
  assert.equal(await health.text(), 'ok');

  const ready = await fetch(`${origin}/readyz`);
  assert.equal(ready.status, 200);
  const body = await ready.json();
  assert.equal(body.ready, true);
  assert.deepEqual(body.servers.map((s) => [s.name, s.state]).sort(), [['docs', 'ready'], ['everything', 'ready']]);
  assert.ok(body.policy.generation >= 3, `policy generation ${body.policy.generation} after two rewrites`);

  const m = await metrics();
  assert.equal(metricValue(m, 'mcpmux_sessions', { identity: 'reader' }), 1, 'reader sessions');
  assert.equal(metricValue(m, 'mcpmux_sessions', { identity: 'admin' }), 1, 'admin sessions');
  assert.ok(
    metricValue(m, 'mcpmux_calls_total', { identity: 'reader', tool: 'everything__echo', decision: 'denied' }) >= 2,
    'reader\'s refused calls not counted',
  );
  assert.ok(metricValue(m, 'mcpmux_calls_total', { identity: 'admin', tool: 'everything__echo', decision: 'allowed' }) >= 6);

  // The session ends with DELETE; the metric follows.
  await reader.transport.terminateSession();
  assert.equal(reader.transport.sessionId, undefined);
  assert.equal(metricValue(await metrics(), 'mcpmux_sessions', { identity: 'reader' }), 0, 'reader sessions after DELETE');
});

// A session belongs to the identity that opened it: mcp-go's streamable
// HTTP server looks sessions up by Mcp-Session-Id alone, so mcpmux checks
// the caller itself.

const sseHeaders = (token, sessionId) => ({
  accept: 'text/event-stream',
  authorization: `Bearer ${token}`,
  ...(sessionId ? { 'mcp-session-id': sessionId } : {}),
});

test('a session belongs to the identity that opened it', async () => {
  const victim = await connect('interop-victim', adminToken);
  await withTimeout(victim.sseOpen, CONNECT_TIMEOUT_MS, 'victim GET stream');
  const sid = victim.transport.sessionId;
  const problems = [];

  // Another identity's listening stream on the victim's session.
  const ac = new AbortController();
  try {
    const get = await fetch(mcpUrl, { headers: sseHeaders(readerToken, sid), signal: ac.signal });
    if (get.ok) problems.push(`reader's GET on admin's session: ${get.status} ${get.headers.get('content-type')}`);
  } finally {
    ac.abort();
  }
  // Another identity ending the victim's session.
  const del = await fetch(mcpUrl, { method: 'DELETE', headers: sseHeaders(readerToken, sid) });
  await del.body?.cancel();
  if (del.ok) problems.push(`reader's DELETE of admin's session: ${del.status}`);
  try {
    await victim.client.listTools();
  } catch (err) {
    problems.push(`admin's own session afterwards: ${err.message}`);
  }
  assert.deepEqual(problems, []);
});

test('a GET without Mcp-Session-Id is refused', async () => {
  const ac = new AbortController();
  try {
    const get = await fetch(mcpUrl, { headers: sseHeaders(readerToken), signal: ac.signal });
    assert.equal(get.status, 400, `GET without a session: ${get.status} ${get.headers.get('content-type')}`);
  } finally {
    ac.abort();
  }
});

test('shutdown: SIGTERM with a client connected, exit 0, children gone, stdout untouched', async () => {
  const ready = logRecords().filter((r) => r.message === 'server ready' && typeof r.pid === 'number');
  assert.deepEqual(ready.map((r) => r.server).sort(), ['docs', 'everything']);
  const childPids = ready.map((r) => r.pid);

  const started = Date.now();
  proc.kill('SIGTERM');
  const { code, signal } = await withTimeout(exited, EXIT_TIMEOUT_MS, 'mcpmux exit');
  const took = Date.now() - started;
  assert.equal(signal, null, `mcpmux was killed by ${signal} after ${took} ms`);
  assert.equal(code, 0, `mcpmux exited with ${code}`);
  await withTimeout(stderrDone, EXIT_TIMEOUT_MS, 'end of mcpmux stderr');
  for (const s of sessions) await s.client.close();

  const messages = logRecords().map((r) => r.message);
  assert.ok(messages.includes('signal received; stopping'), messages.join(' | '));
  assert.ok(!messages.includes('stdin closed; stopping'), 'mcpmux served stdio though it serves HTTP');
  assert.equal(stdout, '', 'mcpmux wrote to stdout while serving HTTP only');
  for (const pid of childPids) {
    assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, `child pid ${pid} outlived mcpmux`);
  }
});
