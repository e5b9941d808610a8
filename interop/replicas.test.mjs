// Interop through a load balancer (issue 19): HAProxy balancing round robin,
// with no stickiness, over 3 mcpmux replicas sharing one key, each running
// its own server-everything (behind everything-tap.mjs) as child "ev".
//
// A 2025-11-25 session of the TypeScript SDK client (@modelcontextprotocol/sdk
// v1) goes through it as through one mcpmux: lists, calls, prompts and reads
// answer as server-everything does directly, progress arrives before the
// answer, logging and resources/updated reach it on its GET stream, its
// sampling request round-trips, and a task runs to its report. Each of its
// requests lands on whichever replica is next, and reaches the one its
// session id names. A 2026-07-28 client (the SDK's v2 client,
// @modelcontextprotocol/client, pinned to 2026-07-28) calls tools and goes
// through sampling rounds, each retry landing on another replica than the
// round's first request, which the requestState leads back to its owner.
// Last, the replica running a task of the session is SIGKILLed: the session
// answers 404, and in the one initialized again the task reads failed.
//
// Binaries as in interop.test.mjs (MCPMUX_BIN, LABSERVER_BIN, or built);
// haproxy from PATH (test.sh installs it; without it the file is skipped,
// unless MCPMUX_NEED_HAPROXY is set). INTEROP_VERBOSE=1 prints the logs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createDecipheriv, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, mkdir, writeFile, rm, realpath } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';

import { BUILD_TIMEOUT_MS, CONNECT_TIMEOUT_MS, binaries, eventLog, jsonRecords, text, toml, withTimeout } from './support.mjs';
import * as fc from './fidelity_cases.mjs';

const REPLICAS = 3;
const token = randomBytes(24).toString('base64url');

function haproxyPath() {
  try {
    return execFileSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).trim();
  } catch {
    if (process.env.MCPMUX_NEED_HAPROXY) throw new Error('haproxy is needed (apt-get install haproxy)');
    return '';
  }
}
const haproxy = haproxyPath();

let work;
let key; // the replicas' shared key
let pub = []; // each replica's public host:port
let peer = []; // each replica's peer host:port: the owner its ids name
const procs = []; // { name, proc, lines, logs }
let lbUrl;
const sessions = [];
let direct;
let full; // the 2025-11-25 session: sampling, elicitation and roots
let modern; // the 2026-07-28 client
const modernSampled = [];
// What HAProxy did with each POST: the backend that served it (HAProxy names
// it in X-Served-By) and the JSON-RPC request it carried.
const served = { legacy: [], modern: [] };

/** A fetch that records in log which replica served each POST, and what it carried. */
function recordingFetch(log) {
  return async (url, init) => {
    const res = await fetch(url, init);
    if ((init?.method ?? 'GET') === 'POST') {
      let msg;
      try {
        msg = JSON.parse(init.body);
      } catch {
        msg = undefined;
      }
      log.push({ server: res.headers.get('x-served-by'), method: msg?.method, params: msg?.params });
    }
    return res;
  };
}

/** A loopback host:port nothing listens on now. */
async function freePort() {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address();
  srv.close();
  await once(srv, 'close');
  return `127.0.0.1:${port}`;
}

/**
 * The replica a sealed id names (package seal's format: version, key id,
 * nonce, AES-256-GCM of the owner's length, the owner and the local id,
 * authenticated with the purpose and the head).
 */
function ownerOf(purpose, id) {
  const b = Buffer.from(id.replace(/^mcp-session-/, ''), 'base64url');
  const head = b.subarray(0, 5);
  const d = createDecipheriv('aes-256-gcm', key, b.subarray(5, 17));
  d.setAAD(Buffer.concat([Buffer.from(`${purpose}\0`), head]));
  d.setAuthTag(b.subarray(b.length - 16));
  const plain = Buffer.concat([d.update(b.subarray(17, b.length - 16)), d.final()]);
  assert.ok(plain[0] < 0x80, 'an owner of over 127 bytes');
  const i = peer.indexOf(plain.subarray(1, 1 + plain[0]).toString());
  assert.ok(i >= 0, `${id} names no replica`);
  return i;
}

/** Starts a process whose stderr lines are kept (and JSON records logged). */
function start(name, cmd, args, env) {
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const p = { name, proc, lines: [], logs: eventLog() };
  createInterface({ input: proc.stderr, crlfDelay: Infinity }).on('line', (line) => {
    p.lines.push(line);
    for (const r of jsonRecords([line])) p.logs.push(r);
  });
  p.exited = once(proc, 'exit');
  procs.push(p);
  return p;
}

/** Resolves once ok() does, asking again after each answer; rejects after ms. */
async function until(ok, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await ok().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function status(url) {
  const res = await fetch(url);
  await res.body?.cancel();
  return res.status;
}

async function connect(name, opts) {
  const c = fc.newClient(`replicas-${name}`, opts);
  const transport = new StreamableHTTPClientTransport(new URL(lbUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: recordingFetch(served.legacy),
  });
  sessions.push(c);
  await withTimeout(c.client.connect(transport), CONNECT_TIMEOUT_MS, `${name}: connect`);
  return c;
}

before(async (t) => {
  if (!haproxy) return;
  work = await realpath(await mkdtemp(path.join(tmpdir(), 'mcpmux-replicas-')));
  const bins = await binaries(work);
  await fc.writeFidPolicy(work);
  const keyFile = path.join(work, 'key');
  key = randomBytes(32);
  await writeFile(keyFile, key.toString('base64') + '\n', { mode: 0o600 });
  for (let i = 0; i < REPLICAS; i++) {
    pub.push(await freePort());
    peer.push(await freePort());
  }
  const cfg = path.join(work, 'mcpmux.toml');
  await writeFile(
    cfg,
    `[mux]
policy_dir = "policies"
call_timeout = "60s"

[upstream]
listen = "127.0.0.1:0"

[[upstream.tokens]]
identity = "fid"
env = "FIDELITY_TOKEN"

[replicas]
key_file = ${toml(keyFile)}
listen = "\${MCPMUX_PEER_LISTEN}"
advertise = "\${MCPMUX_PEER_LISTEN}"
peers = [${peer.map(toml).join(', ')}]

${await fc.childServers({})}`,
  );
  for (let i = 0; i < REPLICAS; i++) {
    start(`replica ${i}`, bins.mcpmux, ['serve', '--config', cfg, '--listen', pub[i]], {
      FIDELITY_TOKEN: token,
      MCPMUX_PEER_LISTEN: peer[i],
    });
  }
  // Ready: each replica's children are up, so any of them answers anything.
  for (let i = 0; i < REPLICAS; i++) {
    await until(async () => (await status(`http://${pub[i]}/readyz`)) === 200, 2 * CONNECT_TIMEOUT_MS, `replica ${i} ready`);
  }
  const lb = await freePort();
  const hcfg = path.join(work, 'haproxy.cfg');
  await writeFile(
    hcfg,
    `global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 60s
  option http-server-close
frontend mcp
  bind ${lb}
  default_backend replicas
backend replicas
  balance roundrobin
  retries 3
  option redispatch 1
  http-response set-header X-Served-By %s
  option httpchk GET /readyz
${pub.map((a, i) => `  server r${i} ${a} check inter 200ms`).join('\n')}
`,
  );
  start('haproxy', haproxy, ['-db', '-f', hcfg], {});
  await until(async () => (await status(`http://${lb}/healthz`)) === 200, CONNECT_TIMEOUT_MS, 'haproxy answering');
  lbUrl = `http://${lb}/mcp`;

  direct = await fc.connectDirect(() => []);
  full = await connect('full', { full: true, roots: () => [] });
  await withTimeout(full.client.listTools(), CONNECT_TIMEOUT_MS, 'first tools/list');

  modern = new ModernClient(
    { name: 'replicas-2026', version: '1.0.0' },
    { capabilities: { sampling: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  modern.setRequestHandler('sampling/createMessage', async (req) => {
    modernSampled.push(req.params);
    return { model: 'replicas-model', role: 'assistant', content: { type: 'text', text: `sampled in 2026: ${req.params.messages[0]?.content?.text}` } };
  });
  await withTimeout(
    modern.connect(
      new ModernTransport(new URL(lbUrl), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
        fetch: recordingFetch(served.modern),
      }),
    ),
    CONNECT_TIMEOUT_MS,
    '2026-07-28 client connect',
  );
}, { timeout: BUILD_TIMEOUT_MS + 4 * CONNECT_TIMEOUT_MS });

after(async () => {
  await direct?.client.close().catch(() => {});
  for (const s of sessions) await s.client.close().catch(() => {});
  await modern?.close().catch(() => {});
  for (const p of procs) {
    if (p.proc.exitCode === null && p.proc.signalCode === null) {
      p.proc.kill('SIGTERM');
      await withTimeout(p.exited, CONNECT_TIMEOUT_MS, `${p.name} exit`).catch(() => p.proc.kill('SIGKILL'));
    }
    if (process.env.INTEROP_VERBOSE) console.error(`--- ${p.name} stderr ---\n${p.lines.join('\n')}`);
  }
  if (work) await rm(work, { recursive: true, force: true });
});

const skip = haproxy ? false : 'haproxy is not installed';

if (!skip) {
  fc.relayTests(() => ({ direct: direct.client, full: full.client }), { skipTools: new Set(['get-roots-list']) });
  fc.notificationTests(() => full);
}

test('a 2025-11-25 session\'s sampling request round-trips through HAProxy', { skip }, async () => {
  for (let i = 0; i < REPLICAS; i++) await fc.assertSamplingRoundTrip(full.client, full.seen);
});

test('tasks: simulate-research-query runs as a task through HAProxy', { skip }, async () => {
  await fc.assertResearchRunsAsTask(full.client);
});

test('a 2026-07-28 client: calls, and sampling rounds whose retries land on other replicas', { skip }, async () => {
  assert.equal(modern.getNegotiatedProtocolVersion(), '2026-07-28');
  assert.equal(modern.getProtocolEra(), 'modern');
  assert.ok(!served.modern.some((c) => c.method === 'initialize'), 'the 2026-07-28 client initialized');
  for (let i = 0; i < REPLICAS; i++) {
    const echo = await withTimeout(modern.callTool({ name: 'ev__echo', arguments: { message: `modern ${i}` } }), fc.CALL_MS, 'echo');
    assert.equal(text(echo), `Echo: modern ${i}`);
  }
  const tools = await withTimeout(modern.listTools(), fc.CALL_MS, 'tools/list');
  assert.ok(tools.tools.some((t) => t.name === 'ev__trigger-sampling-request'), 'no ev__trigger-sampling-request for the 2026 client');
  // Each round: the first request, answered input_required with a
  // requestState naming the replica whose child waits, and the retry,
  // which round robin sends to the next replica.
  for (let i = 0; i < REPLICAS; i++) {
    const from = served.modern.length;
    const prompt = `round-${i}-${randomBytes(4).toString('hex')}`;
    const r = await withTimeout(
      modern.callTool({ name: 'ev__trigger-sampling-request', arguments: { prompt, maxTokens: 16 } }),
      fc.CALL_MS,
      'trigger-sampling-request',
    );
    assert.ok(!r.isError, JSON.stringify(r));
    assert.ok(modernSampled.some((p) => JSON.stringify(p.messages).includes(prompt)), `the 2026 client was not asked to sample ${prompt}`);
    assert.ok(text(r).includes(`sampled in 2026: Resource trigger-sampling-request context: ${prompt}`), text(r));
    const calls = served.modern.slice(from).filter((c) => c.method === 'tools/call');
    assert.equal(calls.length, 2, `round ${i}: ${JSON.stringify(calls)}`);
    assert.ok(!calls[0].params.requestState && calls[1].params.requestState, `round ${i}: ${JSON.stringify(calls)}`);
    assert.notEqual(calls[0].server, calls[1].server, `round ${i}: the retry landed on the replica the round began on`);
  }
});

// Last: by now the session has made every kind of request above.
test('the session\'s requests land on every replica, and each answers them', { skip }, async () => {
  const sid = full.client.transport.sessionId;
  assert.ok(sid?.startsWith('mcp-session-'), `session id ${sid}`);
  const servers = new Set(served.legacy.map((r) => r.server));
  assert.equal(servers.size, REPLICAS, `the session's requests went to ${[...servers]} only`);
  // Straight to each replica, with the session's id: each answers it, the
  // owner itself and the others by forwarding.
  for (const addr of pub) {
    const res = await fetch(`http://${addr}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'direct', method: 'tools/list' }),
    });
    const body = await res.text();
    assert.equal(res.status, 200, `replica at ${addr} answered the session's tools/list with ${res.status}: ${body}`);
    assert.match(body, /ev__echo/);
  }
});

// After everything else: the replica running a 2025-11-25 session's task
// is SIGKILLed. The session answers 404 (the SDK's StreamableHTTPError);
// in a session initialized again, tasks/get of the task answers it failed,
// naming the gone replica, in a shape the SDK's own schema accepts.
test('a task whose replica is killed reads failed in the session initialized again', { skip }, async () => {
  const created = await withTimeout(
    full.client.request(
      { method: 'tools/call', params: { name: 'ev__simulate-research-query', arguments: { topic: 'lost' }, task: { ttl: 60_000 } } },
      CreateTaskResultSchema,
    ),
    fc.CALL_MS,
    'a task-augmented simulate-research-query',
  );
  const id = created.task.taskId;
  const owner = ownerOf('task', id);
  assert.equal(owner, ownerOf('session', full.client.transport.sessionId), 'the task is not its session\'s replica\'s');
  const victim = procs.find((p) => p.name === `replica ${owner}`);
  victim.proc.kill('SIGKILL');
  await victim.exited;

  await assert.rejects(full.client.experimental.tasks.getTask(id), (err) => {
    assert.ok(err instanceof StreamableHTTPError, `not a StreamableHTTPError: ${err}`);
    assert.equal(err.code, 404, err.message);
    return true;
  });
  const again = await connect('after-kill', {});
  assert.notEqual(ownerOf('session', again.client.transport.sessionId), owner, 'a new session on the killed replica');
  const task = await withTimeout(again.client.experimental.tasks.getTask(id), fc.CALL_MS, 'tasks/get in the new session');
  assert.equal(task.taskId, id);
  assert.equal(task.status, 'failed');
  assert.equal(task.createdAt, created.task.createdAt);
  assert.equal(task.ttl, created.task.ttl);
  assert.ok(task.statusMessage.includes('the replica that owns it is gone') && task.statusMessage.includes(peer[owner]), task.statusMessage);
});
