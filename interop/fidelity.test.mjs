// Protocol fidelity through mcpmux's stdio upstream (issue 7): the official
// MCP TypeScript SDK client drives mcpmux, whose child "ev" is the official
// reference server (@modelcontextprotocol/server-everything, behind
// everything-tap.mjs, which only logs what reaches it) and whose child "fs" is
// @modelcontextprotocol/server-filesystem.
//
// It proves that every tool, prompt, resource and resource template of
// server-everything is listed through mcpmux as the server lists it to a
// client directly (names prefixed ev__, URIs mcpmux://ev/..., nothing else
// changed) and answers as it does directly; that a resource link a tool
// returns reads back through mcpmux; that completion reaches the child; that
// trigger-long-running-operation's progress all arrives before its answer;
// that a cancelled call is cancelled at the child, under the child's own
// request id, and that nothing of it reaches the client afterwards; that
// logging/setLevel is accepted and simulated logging arrives tagged "ev";
// that a subscription delivers resources/updated; that sampling, elicitation
// and roots round-trip to a client that implements them and fail cleanly for
// one that declares none of them (a second mcpmux); that
// simulate-research-query runs as a task; and that server-filesystem serves
// the client's roots, not its command-line directory.
//
// The checks themselves are in fidelity_cases.mjs (shared with the HTTP
// test). Binaries as in interop.test.mjs. INTEROP_VERBOSE=1 prints mcpmux's
// log at the end.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, writeFile, rm, realpath } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

import {
  BUILD_TIMEOUT_MS,
  CONNECT_TIMEOUT_MS,
  binaries,
  eventLog,
  jsonRecords,
  text,
  withTimeout,
} from './support.mjs';
import * as fc from './fidelity_cases.mjs';

const { P, CALL_MS, NOTIFY_MS } = fc;

let work;
let bins;
let fsArgDir; // server-filesystem's command-line directory
let clientRootDir; // the client's root, which server-filesystem must serve instead
let roots; // the client's roots/list answer
const muxes = []; // every mcpmux started, closed in after()

let direct; // full client, server-everything directly
let full; // full client through mcpmux (children ev and fs)

async function writeConfig(name, { withFs }) {
  const cfg = path.join(work, `${name}.toml`);
  const body = `[mux]
policy_dir = "policies"
call_timeout = "60s"

[upstream]
identity = "fid"

${await fc.childServers({ fsArgDir: withFs ? fsArgDir : undefined })}`;
  await writeFile(cfg, body);
  return cfg;
}

/**
 * Starts mcpmux serve --config cfg over stdio with an SDK client (full: one
 * that implements sampling, elicitation and roots). logs holds mcpmux's JSON
 * log records as they come.
 */
async function startMux(name, cfg, { full: isFull }) {
  const c = fc.newClient(`fidelity-${name}`, { full: isFull, roots: () => roots });
  const transport = new StdioClientTransport({
    command: bins.mcpmux,
    args: ['serve', '--config', cfg],
    env: getDefaultEnvironment(),
    stderr: 'pipe',
  });
  const logs = eventLog();
  const lines = [];
  let partial = '';
  transport.stderr.setEncoding('utf8');
  transport.stderr.on('data', (chunk) => {
    const split = (partial + chunk).split('\n');
    partial = split.pop();
    lines.push(...split);
    for (const r of jsonRecords(split)) logs.push(r);
  });
  const m = { name, ...c, transport, logs, lines };
  muxes.push(m);
  await withTimeout(c.client.connect(transport), CONNECT_TIMEOUT_MS, `${name}: connect`);
  m.proc = transport._process;
  // The first tools/list answers once every child has started.
  await withTimeout(c.client.listTools(), CONNECT_TIMEOUT_MS, `${name}: first tools/list`);
  return m;
}

/** What reached server-everything itself, from the tap's lines in mcpmux's log. */
function tapped(logs) {
  return (pred) => (r) => {
    if (r.message !== 'server stderr' || r.server !== 'ev' || !String(r.stderr).startsWith('tap-in ')) return false;
    return pred(JSON.parse(r.stderr.slice('tap-in '.length)));
  };
}

before(async () => {
  work = await realpath(await mkdtemp(path.join(tmpdir(), 'mcpmux-fidelity-')));
  bins = await binaries(work);
  fsArgDir = path.join(work, 'fs-arg');
  clientRootDir = path.join(work, 'client-root');
  await mkdir(fsArgDir);
  await mkdir(clientRootDir);
  await writeFile(path.join(clientRootDir, 'from-the-client.txt'), 'the client root\n');
  roots = [{ uri: pathToFileURL(clientRootDir).href, name: 'client-root' }];
  await fc.writeFidPolicy(work);

  direct = await fc.connectDirect(() => roots);
  full = await startMux('full', await writeConfig('full', { withFs: true }), { full: true });
}, { timeout: BUILD_TIMEOUT_MS + 3 * CONNECT_TIMEOUT_MS });

after(async () => {
  await direct?.client.close().catch(() => {});
  for (const m of muxes) {
    await m.client.close().catch(() => {});
    if (m.proc && m.proc.exitCode === null && m.proc.signalCode === null) m.proc.kill('SIGKILL');
    if (process.env.INTEROP_VERBOSE) console.error(`--- mcpmux ${m.name} stderr ---\n${m.lines.join('\n')}`);
  }
  if (work) await rm(work, { recursive: true, force: true });
});

test('initialize: mcpmux declares prompts, resources with subscribe, logging and completions', () => {
  const caps = full.client.getServerCapabilities() ?? {};
  const missing = [];
  if (!caps.prompts) missing.push('prompts');
  if (!caps.resources) missing.push('resources');
  if (!caps.resources?.subscribe) missing.push('resources.subscribe');
  if (!caps.logging) missing.push('logging');
  if (!caps.completions) missing.push('completions');
  if (!caps.tasks?.requests?.tools?.call) missing.push('tasks.requests.tools.call');
  assert.deepEqual(missing, [], `capabilities: ${JSON.stringify(caps)}`);
});

fc.relayTests(() => ({ direct: direct.client, full: full.client }));

test('a resource link returned by a tool reads back through mcpmux', async () => {
  const args = { ...fc.toolArgs['gzip-file-as-resource'], name: 'linked.txt.gz', outputType: 'resourceLink' };
  const r = await withTimeout(full.client.callTool({ name: `${P}gzip-file-as-resource`, arguments: args }), CALL_MS, 'gzip');
  assert.ok(!r.isError, JSON.stringify(r));
  const link = r.content.find((c) => c.type === 'resource_link');
  assert.equal(link?.uri, 'mcpmux://ev/demo://resource/session/linked.txt.gz', JSON.stringify(r.content));
  const read = await withTimeout(full.client.readResource({ uri: link.uri }), CALL_MS, 'read the link');
  assert.equal(read.contents[0].uri, link.uri);
  assert.equal(read.contents[0].mimeType, 'application/gzip');
  assert.ok(read.contents[0].blob?.length > 0, JSON.stringify(read));
});

test('completion/complete reaches the child with its own prompt name and template', async () => {
  await fc.assertCompletionRelayed(direct.client, full.client);
});

test('cancel: a cancelled long call is cancelled at the child, nothing of it follows, the next call works', async () => {
  const isTap = tapped(full.logs);
  const tool = `${P}trigger-long-running-operation`;
  const args = { duration: 3, steps: 6 };
  const errorsBefore = full.notes.errors.items.length;
  const tapBefore = full.logs.items.length;
  const ac = new AbortController();
  const call = full.client.callTool({ name: tool, arguments: args }, undefined, {
    signal: ac.signal,
    timeout: CALL_MS,
    onprogress: () => {},
  });
  const outcome = call.then(
    (r) => ({ r }),
    (err) => ({ err }),
  );

  // Cancelled once the child has it; then the child sees notifications/cancelled for its own id.
  const sent = await full.logs.waitFor(
    (r) => full.logs.items.indexOf(r) >= tapBefore && isTap((m) => m.method === 'tools/call' && m.params?.name === 'trigger-long-running-operation')(r),
    NOTIFY_MS,
    'the long call at the child',
  );
  ac.abort('fidelity test cancels');
  const { r, err } = await withTimeout(outcome, CALL_MS, 'the cancelled call');
  assert.ok(err, `the cancelled call answered: ${JSON.stringify(r)}`);
  const childId = JSON.parse(sent.stderr.slice('tap-in '.length)).id;
  await full.logs.waitFor(
    isTap((m) => m.method === 'notifications/cancelled' && m.params?.requestId === childId),
    NOTIFY_MS,
    `notifications/cancelled for request ${childId} at the child`,
  );

  // A call as long as the cancelled one, started after it, ends after the
  // child's loop for the cancelled one has sent its last progress: none of
  // that may reach the client (the SDK reports a progress notification for a
  // token it has dropped as an error).
  const later = await withTimeout(full.client.callTool({ name: tool, arguments: { duration: 3, steps: 1 } }), CALL_MS, 'the next call');
  assert.ok(!later.isError, JSON.stringify(later));
  const stray = full.notes.errors.items.slice(errorsBefore).map(String);
  assert.deepEqual(stray, [], 'messages of the cancelled call reached the client after it was cancelled');
});

fc.notificationTests(() => full);

test('sampling: trigger-sampling-request round-trips to the client', async () => {
  await fc.assertSamplingRoundTrip(full.client, full.seen);
});

test('elicitation: trigger-elicitation-request round-trips to the client', async () => {
  await fc.assertElicitationRoundTrip(full.client, full.seen);
});

test('roots: get-roots-list shows the client its own roots', async () => {
  await fc.assertRootsRoundTrip(full.client, roots);
});

test('tasks: simulate-research-query runs as a task', async () => {
  await fc.assertResearchRunsAsTask(full.client);
});

test("server-filesystem serves the client's roots, not its command-line directory", async () => {
  await fc.assertFilesystemServes(full.client, full.logs, { served: clientRootDir, fsArgDir, what: "the client's root" });
});

test('a client without sampling, elicitation and roots gets clean failures', async () => {
  const bare = await startMux('bare', await writeConfig('bare', { withFs: false }), { full: false });
  await fc.assertBareClientFailsCleanly(bare.client);
  const works = await withTimeout(bare.client.callTool({ name: `${P}echo`, arguments: { message: 'still here' } }), CALL_MS, 'echo');
  assert.equal(text(works), 'Echo: still here');
});
