// Protocol fidelity through mcpmux's streamable HTTP upstream (issue 7): the
// key checks of fidelity.test.mjs, with two SDK clients on two sessions of one
// identity, one implementing sampling, elicitation and roots and one declaring
// none of them. mcpmux's children: "ev", server-everything behind
// everything-tap.mjs, and "fs", server-filesystem.
//
// It proves that server-everything's tools, prompts, resources and templates
// are listed and answer through mcpmux as they do directly; that progress
// arrives before the answer; that logging arrives tagged "ev"; that a
// subscription delivers resources/updated; that sampling, elicitation and
// roots round-trip to the session that made the call and fail cleanly for
// the session that cannot answer them; that simulate-research-query runs as
// a task; and that a child asking for roots/list outside any call (server-
// filesystem does, right after initialize) is answered from [servers.fs]
// roots, so that it serves that directory instead of its command-line one.
//
// Over HTTP, server-everything caches the first roots it gets: from the config
// ([servers.ev] roots) when its own sync after initialize (outside any call)
// is answered first, else the calling session's; so get-roots-list is left
// out of the direct-vs-mcpmux comparison and of the bare client's check, and
// the round trip accepts either answer (never both, never another's).
//
// Binaries as in interop.test.mjs. INTEROP_VERBOSE=1 prints mcpmux's log.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, mkdir, writeFile, rm, realpath } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import {
  BUILD_TIMEOUT_MS,
  CONNECT_TIMEOUT_MS,
  binaries,
  eventLog,
  jsonRecords,
  withTimeout,
} from './support.mjs';
import * as fc from './fidelity_cases.mjs';

const token = randomBytes(24).toString('base64url');

let work;
let proc;
const lines = [];
const logs = eventLog();
let mcpUrl;
let fsArgDir;
let configRootDir; // [servers.fs] roots and [servers.ev] roots
let roots; // the full client's own roots/list answer
const sessions = [];

let direct;
let full; // session that implements sampling, elicitation and roots
let bare; // session that declares none

async function connect(name, opts) {
  const c = fc.newClient(`fidelity-http-${name}`, opts);
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  sessions.push(c);
  await withTimeout(c.client.connect(transport), CONNECT_TIMEOUT_MS, `${name}: connect`);
  return c;
}

before(async () => {
  work = await realpath(await mkdtemp(path.join(tmpdir(), 'mcpmux-fidelity-http-')));
  const bins = await binaries(work);
  fsArgDir = path.join(work, 'fs-arg');
  configRootDir = path.join(work, 'config-root');
  await mkdir(fsArgDir);
  await mkdir(configRootDir);
  const clientRootDir = path.join(work, 'client-root');
  await mkdir(clientRootDir);
  roots = [{ uri: pathToFileURL(clientRootDir).href, name: 'client-root' }];
  await fc.writeFidPolicy(work);
  const rootUri = pathToFileURL(configRootDir).href;
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

${await fc.childServers({ fsArgDir, rootUri })}`,
  );
  proc = spawn(bins.mcpmux, ['serve', '--config', cfg], {
    env: { ...process.env, FIDELITY_TOKEN: token },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  createInterface({ input: proc.stderr, crlfDelay: Infinity }).on('line', (line) => {
    lines.push(line);
    for (const r of jsonRecords([line])) logs.push(r);
  });
  const exited = once(proc, 'exit').then(([code, signal]) => {
    throw new Error(`mcpmux exited (${code ?? signal}):\n${lines.join('\n')}`);
  });
  const serving = await Promise.race([
    logs.waitFor((r) => r.message === 'serving HTTP' && typeof r.addr === 'string', CONNECT_TIMEOUT_MS, '"serving HTTP"'),
    exited,
  ]);
  exited.catch(() => {});
  mcpUrl = `http://${serving.addr}/mcp`;

  direct = await fc.connectDirect(() => roots);
  full = await connect('full', { full: true, roots: () => roots });
  bare = await connect('bare', {});
  // The first tools/list answers once every child has started.
  await withTimeout(full.client.listTools(), CONNECT_TIMEOUT_MS, 'first tools/list');
}, { timeout: BUILD_TIMEOUT_MS + 3 * CONNECT_TIMEOUT_MS });

after(async () => {
  await direct?.client.close().catch(() => {});
  for (const s of sessions) await s.client.close().catch(() => {});
  if (proc && proc.exitCode === null && proc.signalCode === null) {
    const gone = once(proc, 'exit');
    proc.kill('SIGTERM');
    await withTimeout(gone, CONNECT_TIMEOUT_MS, 'mcpmux exit').catch(() => proc.kill('SIGKILL'));
  }
  if (process.env.INTEROP_VERBOSE) console.error(`--- mcpmux stderr ---\n${lines.join('\n')}`);
  if (work) await rm(work, { recursive: true, force: true });
});

fc.relayTests(() => ({ direct: direct.client, full: full.client }), { skipTools: new Set(['get-roots-list']) });

fc.notificationTests(() => full);

test('sampling, elicitation and roots round-trip to the session that made the call', async () => {
  await fc.assertSamplingRoundTrip(full.client, full.seen);
  await fc.assertElicitationRoundTrip(full.client, full.seen);
  // server-everything lists the roots it cached first: the calling session's
  // (asked in the call) or, if its own sync after initialize came first, the
  // configured ones; never another session's.
  const r = await fc.allRoots(full.client);
  const own = roots.every((x) => r.includes(`URI: ${x.uri}`));
  const configured = r.includes(`URI: ${pathToFileURL(configRootDir).href}`);
  assert.ok(own !== configured, `get-roots-list through mcpmux: ${r}`);
});

test('a session without sampling and elicitation gets clean failures', async () => {
  await fc.assertBareClientFailsCleanly(bare.client, { skip: new Set(['get-roots-list']) });
});

test('tasks: simulate-research-query runs as a task', async () => {
  await fc.assertResearchRunsAsTask(full.client);
});

test('server-filesystem asking for roots outside a call gets [servers.fs] roots', async () => {
  await fc.assertFilesystemServes(full.client, logs, { served: configRootDir, fsArgDir, what: 'the configured root' });
});
