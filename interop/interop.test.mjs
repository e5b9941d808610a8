// Interop test: the official MCP TypeScript SDK client drives mcpmux over
// stdio, and mcpmux runs the official reference server
// (@modelcontextprotocol/server-everything) as a child next to labserver.
//
// It proves that a third-party client can initialize against mcpmux, list the
// merged catalog (aliases prefixed, hidden tools absent, the children's input
// and output schemas passed through unchanged), call tools on both children
// (including structured content that the SDK validates against the relayed
// outputSchema), that a child sees only the environment its config gives it,
// that mcpmux's own refusals come in the shapes the spec asks for (invalid
// arguments as an isError result, an unknown or hidden tool as JSON-RPC
// -32602), that each of many concurrent calls gets its own answer, and that
// mcpmux exits 0 by itself, taking its children with it, when the client
// closes its stdin.
//
// Binaries: MCPMUX_BIN and LABSERVER_BIN point at built binaries; when either
// is unset both are built with `go build` into a temporary directory, so that
// `npm test` runs on its own. Run: cd interop && npm ci && npm test
// (INTEROP_VERBOSE=1 prints mcpmux's log at the end.) The HTTP upstream is
// tested in interop_http.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { finished } from 'node:stream/promises';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';

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

let work; // temporary directory: config, policies, maybe binaries
let client;
let transport;
let proc; // mcpmux's ChildProcess
let exited; // resolves with { code, signal } when mcpmux exits
let stderrDone; // resolves when mcpmux's stderr has been read to its end
const stderrLines = [];

function logRecords() {
  return jsonRecords(stderrLines);
}

before(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'mcpmux-interop-'));
  const bins = await binaries(work);
  const entry = await everythingEntry();

  await mkdir(path.join(work, 'policies'));
  await writeFile(path.join(work, 'policies', 'reader.toml'), 'allow = ["docs__*", "everything__*"]\n');
  const cfg = path.join(work, 'mcpmux.toml');
  await writeFile(
    cfg,
    `[mux]
policy_dir = "policies"
call_timeout = "30s"

[upstream]
identity = "reader"

[servers.docs]
command = ${toml(bins.labserver)}
env = { LAB_SOURCE = "docs" }
hide = ["crash_for_test"]
read_only = ["search"]

[servers.everything]
command = ${toml(process.execPath)}
args = [${toml(entry)}, "stdio"]
env = { INTEROP_MARK = "set-by-config" }
inherit_env = []
`,
  );

  transport = new StdioClientTransport({
    command: bins.mcpmux,
    args: ['serve', '--config', cfg],
    // mcpmux gets the SDK's default environment plus this; a child must not.
    env: { ...getDefaultEnvironment(), INTEROP_SECRET: 'not-for-children' },
    stderr: 'pipe',
  });
  let partial = '';
  transport.stderr.setEncoding('utf8');
  transport.stderr.on('data', (chunk) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop();
    stderrLines.push(...lines);
  });

  client = new Client({ name: 'mcpmux-interop', version: '1.0.0' });
  await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, 'connect');

  // The SDK keeps the ChildProcess private; the exit status is only on it.
  // (The SDK version is pinned, so this field is stable here.)
  proc = transport._process;
  assert.ok(proc && typeof proc.once === 'function', 'StdioClientTransport no longer exposes _process');
  exited =
    proc.exitCode !== null || proc.signalCode !== null
      ? Promise.resolve({ code: proc.exitCode, signal: proc.signalCode })
      : new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  // stderr may still hold log lines after 'exit'; the shutdown test reads them.
  stderrDone = finished(transport.stderr).catch(() => {});
}, { timeout: BUILD_TIMEOUT_MS + CONNECT_TIMEOUT_MS });

after(async () => {
  // Normally the last test has closed everything; this is for failures.
  if (proc && proc.exitCode === null && proc.signalCode === null) {
    proc.kill('SIGKILL');
  }
  if (process.env.INTEROP_VERBOSE) {
    console.error('--- mcpmux stderr ---\n' + stderrLines.join('\n'));
  }
  if (work) await rm(work, { recursive: true, force: true });
});

test('initialize: mcpmux answers as an MCP server with tools', () => {
  assert.equal(client.getServerVersion()?.name, 'mcpmux');
  assert.ok(client.getServerCapabilities()?.tools, 'tools capability missing');
});

let tools; // name -> tool, as mcpmux lists them

test('tools/list: merged catalog with intact schemas', async () => {
  const res = await client.listTools();
  assert.equal(res.nextCursor, undefined, 'whole catalog expected on one page');
  tools = new Map(res.tools.map((t) => [t.name, t]));
  assert.equal(tools.size, res.tools.length, 'duplicate tool names');

  for (const name of ['docs__search', 'docs__echo', 'everything__echo', 'everything__get-sum', 'everything__get-structured-content']) {
    assert.ok(tools.has(name), `${name} not listed; got ${[...tools.keys()].join(', ')}`);
  }
  assert.ok(!tools.has('docs__crash_for_test'), 'hidden tool docs__crash_for_test is listed');
  for (const name of tools.keys()) {
    assert.match(name, /^(docs|everything)__[A-Za-z0-9_-]+$/);
  }

  const search = tools.get('docs__search');
  assert.equal(search.inputSchema.type, 'object');
  assert.equal(search.inputSchema.properties.query.type, 'string');
  assert.deepEqual(search.inputSchema.required, ['query']);
  // Keywords that a typed schema would drop survive the trip.
  const pick = tools.get('docs__pick');
  assert.ok(Array.isArray(pick?.inputSchema.oneOf), 'docs__pick lost its oneOf');

  const echo = tools.get('everything__echo');
  assert.equal(echo.inputSchema.type, 'object');
  assert.equal(echo.inputSchema.properties.message.type, 'string');
  assert.equal(echo.inputSchema.properties.message.description, 'Message to echo');
  assert.deepEqual(echo.inputSchema.required, ['message']);

  const weather = tools.get('everything__get-structured-content');
  assert.deepEqual(weather.inputSchema.properties.location.enum, ['New York', 'Chicago', 'Los Angeles']);
  assert.ok(weather.outputSchema, 'outputSchema dropped');
  assert.deepEqual(Object.keys(weather.outputSchema.properties).sort(), ['conditions', 'humidity', 'temperature']);
});

test('tools/list: everything tools are relayed exactly as the server lists them', async () => {
  // Ask server-everything directly, with the same SDK, and compare. The
  // direct client declares what mcpmux declares to its children (roots,
  // sampling, elicitation), on which server-everything's list depends.
  const direct = new Client(
    { name: 'mcpmux-interop-direct', version: '1.0.0' },
    { capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: { form: {}, url: {} } } },
  );
  const entry = await everythingEntry();
  await withTimeout(
    direct.connect(new StdioClientTransport({ command: process.execPath, args: [entry, 'stdio'], stderr: 'ignore' })),
    CONNECT_TIMEOUT_MS,
    'direct connect',
  );
  try {
    const own = new Map((await direct.listTools()).tools.map((t) => [t.name, t]));
    const relayed = [...tools.values()].filter((t) => t.name.startsWith('everything__'));
    assert.ok(relayed.length >= 3);
    for (const t of relayed) {
      const orig = own.get(t.name.slice('everything__'.length));
      assert.ok(orig, `${t.name} has no counterpart on server-everything`);
      for (const key of ['title', 'description', 'inputSchema', 'outputSchema', 'annotations']) {
        assert.deepEqual(t[key], orig[key], `${t.name}: ${key} differs from the server's own`);
      }
    }
  } finally {
    await direct.close();
  }
});

test('tools/call: labserver through mcpmux', async () => {
  const pub = await client.callTool({ name: 'docs__search', arguments: { query: 'public' } });
  assert.ok(!pub.isError, JSON.stringify(pub));
  assert.equal(text(pub), 'docs: public evidence');

  const priv = await client.callTool({ name: 'docs__search', arguments: { query: 'private' } });
  assert.equal(priv.isError, true, JSON.stringify(priv));
  assert.match(text(priv), /service policy denies private data/);
});

test('tools/call: server-everything through mcpmux', async () => {
  const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'hello through the mux' } });
  assert.ok(!echo.isError, JSON.stringify(echo));
  assert.equal(text(echo), 'Echo: hello through the mux');

  const sum = await client.callTool({ name: 'everything__get-sum', arguments: { a: 2, b: 3.5 } });
  assert.ok(!sum.isError, JSON.stringify(sum));
  assert.equal(text(sum), 'The sum of 2 and 3.5 is 5.5.');

  // The SDK validates structuredContent against the outputSchema mcpmux relayed.
  const weather = await client.callTool({ name: 'everything__get-structured-content', arguments: { location: 'Chicago' } });
  assert.ok(!weather.isError, JSON.stringify(weather));
  assert.deepEqual(weather.structuredContent, { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 });
});

test('tools/call: a child sees only the environment its config gives it', async () => {
  const r = await client.callTool({ name: 'everything__get-env', arguments: {} });
  assert.ok(!r.isError, JSON.stringify(r));
  const env = JSON.parse(text(r));
  assert.equal(env.INTEROP_MARK, 'set-by-config');
  assert.equal(env.PATH, process.env.PATH);
  assert.equal(env.INTEROP_SECRET, undefined, 'mcpmux leaked its own environment to a child');
});

test('tools/call: invalid arguments are an isError result naming the path', async () => {
  const bad = await client.callTool({ name: 'docs__search', arguments: { query: 3 } });
  assert.equal(bad.isError, true, JSON.stringify(bad));
  assert.match(text(bad), /\/query/);

  const badEnum = await client.callTool({ name: 'everything__get-structured-content', arguments: { location: 'Paris' } });
  assert.equal(badEnum.isError, true, JSON.stringify(badEnum));
  assert.match(text(badEnum), /\/location/);

  const missing = await client.callTool({ name: 'everything__echo', arguments: {} });
  assert.equal(missing.isError, true, JSON.stringify(missing));
  assert.match(text(missing), /message/);
});

test('tools/call: unknown and hidden tools are JSON-RPC errors -32602', async () => {
  for (const name of ['nope__x', 'docs__crash_for_test']) {
    await assert.rejects(
      client.callTool({ name, arguments: {} }),
      (err) => {
        assert.ok(err instanceof McpError, `${name}: not an McpError: ${err}`);
        assert.equal(err.code, ErrorCode.InvalidParams, `${name}: ${err.message}`);
        assert.equal(err.code, -32602);
        return true;
      },
    );
  }
});

test('tools/call: concurrent calls each get their own answer', async () => {
  const calls = Array.from({ length: 20 }, (_, i) => {
    const message = `m-${i}-${Math.random().toString(36).slice(2)}`;
    if (i % 2 === 0) {
      return client
        .callTool({ name: 'docs__echo', arguments: { message } })
        .then((r) => ({ r, want: `docs: ${message}`, structured: { source: 'docs', message } }));
    }
    return client.callTool({ name: 'everything__echo', arguments: { message } }).then((r) => ({ r, want: `Echo: ${message}` }));
  });
  const results = await Promise.all(calls);
  for (const { r, want, structured } of results) {
    assert.ok(!r.isError, JSON.stringify(r));
    assert.equal(text(r), want);
    if (structured) assert.deepEqual(r.structuredContent, structured);
  }
});

test('shutdown: mcpmux exits 0 by itself when the client closes', async () => {
  const ready = logRecords().filter((r) => r.message === 'server ready' && typeof r.pid === 'number');
  const childPids = ready.map((r) => r.pid);
  assert.deepEqual(ready.map((r) => r.server).sort(), ['docs', 'everything']);

  const started = Date.now();
  await client.close();
  const { code, signal } = await withTimeout(exited, EXIT_TIMEOUT_MS, 'mcpmux exit');
  const took = Date.now() - started;
  assert.equal(signal, null, `mcpmux was killed by ${signal} after ${took} ms`);
  assert.equal(code, 0, `mcpmux exited with ${code}`);
  await withTimeout(stderrDone, EXIT_TIMEOUT_MS, 'end of mcpmux stderr');

  // The SDK sends SIGTERM if the server is still running 2 s after stdin
  // closed; mcpmux also exits 0 on SIGTERM, so its log tells the two apart.
  const messages = logRecords().map((r) => r.message);
  assert.ok(messages.includes('stdin closed; stopping'), `mcpmux did not stop on EOF (took ${took} ms): ${messages.join(' | ')}`);
  assert.ok(!messages.includes('signal received; stopping'), `mcpmux needed a signal to stop (took ${took} ms)`);

  for (const pid of childPids) {
    assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, `child pid ${pid} outlived mcpmux`);
  }
});
