// The checks of the protocol-fidelity tests (issue 7), shared by
// fidelity.test.mjs (stdio upstream) and fidelity_http.test.mjs (HTTP
// upstream). Each check takes the SDK client connected to mcpmux (and, where
// it compares, one connected to server-everything directly) and asserts what
// a client sees through mcpmux against what it sees directly: names prefixed
// "ev__", resource URIs rewritten to mcpmux://ev/..., otherwise equal. Not a
// test file itself: relayTests and notificationTests register the tests
// both files run, and the rest is the setup both share.

import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import * as types from '@modelcontextprotocol/sdk/types.js';

import {
  CONNECT_TIMEOUT_MS,
  eventLog,
  everythingEntry,
  everythingTap,
  filesystemEntry,
  fullClientCapabilities,
  muxUri,
  serveClientRequests,
  text,
  toml,
  viaMux,
  withTimeout,
  withoutTimes,
} from './support.mjs';

export const EV = 'ev';
export const P = `${EV}__`;
/** Bound on one call or request (the slowest, simulate-research-query, takes ~4 s). */
export const CALL_MS = 30_000;
/** Bound on waiting for a notification the child sends at once or within 5 s. */
export const NOTIFY_MS = 15_000;

const b64 = (s) => Buffer.from(s).toString('base64');

/**
 * Valid arguments for every tool server-everything 2026.8.31 has. A tool
 * missing here fails the every-tool test by name, so a new version's tools
 * are not skipped silently.
 */
export const toolArgs = {
  echo: { message: 'fidelity' },
  'get-annotated-message': { messageType: 'error', includeImage: true },
  'get-env': {},
  'get-resource-links': { count: 4 },
  'get-resource-reference': { resourceType: 'Blob', resourceId: 3 },
  'get-structured-content': { location: 'Chicago' },
  'get-sum': { a: 19, b: 23 },
  'get-tiny-image': {},
  'gzip-file-as-resource': {
    name: 'fidelity.txt.gz',
    data: `data:text/plain;base64,${b64('fidelity through mcpmux\n')}`,
    outputType: 'resource',
  },
  'toggle-simulated-logging': {},
  'toggle-subscriber-updates': {},
  'trigger-long-running-operation': { duration: 0.2, steps: 2 },
  'get-roots-list': {},
  'trigger-elicitation-request': {},
  'trigger-url-elicitation': { url: 'https://example.com/fidelity', elicitationId: 'fidelity-1' },
  'trigger-sampling-request': { prompt: 'fidelity', maxTokens: 16 },
  'simulate-research-query': { topic: 'fidelity' },
  'trigger-sampling-request-async': { prompt: 'fidelity async', maxTokens: 16 },
  'trigger-elicitation-request-async': {},
};

/** Tools that switch a per-session state: called twice, so the state is left as found. */
const toggles = new Set(['toggle-simulated-logging', 'toggle-subscriber-updates']);
/** Tools whose result depends on the process environment, which mcpmux filters: checked, not compared. */
const notCompared = new Set(['get-env']);

/** Valid arguments for every prompt of server-everything. */
export const promptArgs = {
  'simple-prompt': undefined,
  'args-prompt': { city: 'Paris', state: 'Texas' },
  'completable-prompt': { department: 'Engineering', name: 'Alice' },
  'resource-prompt': { resourceType: 'Text', resourceId: '2' },
};

/**
 * Records on client the notifications these tests wait for: log messages,
 * resources/updated, and the SDK's own errors (a progress notification for a
 * token it no longer knows is one).
 */
export function recordNotifications(client) {
  const notes = { message: eventLog(), updated: eventLog(), errors: eventLog() };
  client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => notes.message.push(n.params));
  client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, (n) => notes.updated.push(n.params));
  client.onerror = (err) => notes.errors.push(err);
  return notes;
}

/**
 * A new SDK client: with full, one that implements sampling, elicitation and
 * roots (answering roots()); without, one that declares no capability.
 */
export function newClient(name, { full, roots } = {}) {
  const client = new Client({ name, version: '1.0.0' }, full ? { capabilities: fullClientCapabilities } : undefined);
  const seen = full ? serveClientRequests(client, types, roots) : undefined;
  const notes = recordNotifications(client);
  return { client, seen, notes };
}

/** A full client connected to server-everything directly over stdio. */
export async function connectDirect(roots) {
  const c = newClient('fidelity-direct', { full: true, roots });
  const entry = await everythingEntry();
  await withTimeout(
    c.client.connect(new StdioClientTransport({ command: process.execPath, args: [entry, 'stdio'], stderr: 'ignore' })),
    CONNECT_TIMEOUT_MS,
    'direct connect',
  );
  return c;
}

/** Every page of a list request. */
export async function listAll(list, key) {
  const items = [];
  let cursor;
  do {
    const page = await withTimeout(list(cursor ? { cursor } : undefined), CALL_MS, `${key} page`);
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

export const lists = {
  tools: (c) => listAll((p) => c.listTools(p), 'tools'),
  prompts: (c) => listAll((p) => c.listPrompts(p), 'prompts'),
  resources: (c) => listAll((p) => c.listResources(p), 'resources'),
  templates: (c) => listAll((p) => c.listResourceTemplates(p), 'resourceTemplates'),
};

/** The ev__ items of a list through mcpmux, by the child's own name. */
function evByName(items) {
  return new Map(items.filter((i) => i.name.startsWith(P)).map((i) => [i.name.slice(P.length), i]));
}

/** tools/list and prompts/list: every item of the child, prefixed, its definition equal. */
export async function assertNamedListRelayed(kind, direct, mux) {
  const own = await lists[kind](direct);
  const relayed = evByName(await lists[kind](mux));
  const missing = own.map((i) => i.name).filter((n) => !relayed.has(n));
  assert.deepEqual(missing, [], `${kind} of server-everything missing through mcpmux (it listed ${[...relayed.keys()].join(', ')})`);
  const extra = [...relayed.keys()].filter((n) => !own.some((i) => i.name === n));
  for (const item of own) {
    assert.deepEqual(relayed.get(item.name), { ...item, name: P + item.name }, `${kind}: ${item.name} differs from the child's own`);
  }
  return { names: own.map((i) => i.name), extra };
}

/** resources/list: every resource of the child, URI rewritten, otherwise equal. */
export async function assertResourcesRelayed(direct, mux) {
  const own = await lists.resources(direct);
  assert.ok(own.length > 0, 'server-everything lists no resources directly');
  const relayed = await lists.resources(mux);
  const want = viaMux({ resources: own }, EV).resources;
  const got = relayed.filter((r) => r.uri.startsWith(muxUri(EV, '')));
  assert.deepEqual(
    sortBy(got, 'uri'),
    sortBy(want, 'uri'),
    `resources/list through mcpmux (${relayed.length} in all) is not the child's with mcpmux://ev/ URIs`,
  );
  return own;
}

/** resources/templates/list: every template, mcpmux://ev/ prefixed, otherwise equal. */
export async function assertTemplatesRelayed(direct, mux) {
  const own = await lists.templates(direct);
  assert.ok(own.length > 0, 'server-everything lists no resource templates directly');
  const relayed = await lists.templates(mux);
  const want = viaMux({ resourceTemplates: own }, EV).resourceTemplates;
  const got = relayed.filter((r) => r.uriTemplate.startsWith(muxUri(EV, '')));
  assert.deepEqual(sortBy(got, 'uriTemplate'), sortBy(want, 'uriTemplate'), 'resources/templates/list through mcpmux');
  return own;
}

function sortBy(items, key) {
  return [...items].sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0));
}

/** Calls a tool; a task-only tool through the SDK's task stream. Returns { result } or { error }. */
export async function callAny(client, name, args, taskOnly) {
  if (!taskOnly) {
    try {
      return { result: await withTimeout(client.callTool({ name, arguments: args }, undefined, { timeout: CALL_MS }), CALL_MS, name) };
    } catch (error) {
      return { error };
    }
  }
  const messages = await collectTaskStream(client, name, args);
  const last = messages.at(-1);
  return last?.type === 'result' ? { result: last.result, messages } : { error: last?.error ?? new Error('no result'), messages };
}

/** The messages of callToolStream for a task-augmented call, to its end. */
export async function collectTaskStream(client, name, args) {
  const messages = [];
  const run = (async () => {
    const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, types.CallToolResultSchema, {
      task: { ttl: 60_000 },
      timeout: CALL_MS,
    });
    for await (const m of stream) messages.push(m);
  })();
  await withTimeout(run, CALL_MS, `${name} as a task`);
  return messages;
}

/**
 * value without the task id of its related-task _meta: a task's result
 * names the task it belongs to, and mcpmux's task ids are its own.
 */
function withoutTaskIds(value) {
  const related = value?._meta?.['io.modelcontextprotocol/related-task'];
  if (!related?.taskId) return value;
  return { ...value, _meta: { ...value._meta, 'io.modelcontextprotocol/related-task': { ...related, taskId: 'T' } } };
}

const describe = (r) => (r.error ? `error ${r.error.code ?? ''} ${r.error.message}` : JSON.stringify(r.result).slice(0, 400));

/**
 * Calls every tool server-everything lists directly, with toolArgs, both
 * directly and through mcpmux, as one subtest per tool, and compares the
 * results (modulo URI rewriting and wall-clock times). skip: tool names not
 * called.
 */
export async function callEveryTool(t, direct, mux, { skip = new Set() } = {}) {
  const own = await lists.tools(direct);
  const viaList = evByName(await lists.tools(mux));
  for (const tool of own) {
    if (skip.has(tool.name)) continue;
    await t.test(tool.name, async () => {
      assert.ok(tool.name in toolArgs, `no arguments known for server-everything's tool ${tool.name}: add them to toolArgs`);
      assert.ok(viaList.has(tool.name), `${P}${tool.name} is not listed through mcpmux`);
      const taskOnly = tool.execution?.taskSupport === 'required';
      const times = toggles.has(tool.name) ? 2 : 1;
      for (let i = 0; i < times; i++) {
        const d = await callAny(direct, tool.name, toolArgs[tool.name], taskOnly);
        const m = await callAny(mux, P + tool.name, toolArgs[tool.name], taskOnly);
        assert.ok(!d.error && !d.result.isError, `direct call failed: ${describe(d)}`);
        assert.ok(!m.error, `through mcpmux: ${describe(m)}`);
        assert.ok(!m.result.isError, `through mcpmux, an error result: ${describe(m)}`);
        if (notCompared.has(tool.name)) {
          assert.doesNotThrow(() => JSON.parse(text(m.result)), 'get-env: not the JSON environment');
          continue;
        }
        assert.deepEqual(withoutTaskIds(withoutTimes(m.result)), withoutTaskIds(withoutTimes(viaMux(d.result, EV))),
          `result differs from the child's own (call ${i + 1})`);
      }
    });
  }
}

/** prompts/get of every prompt, one subtest each, compared with the child's own. */
export async function getEveryPrompt(t, direct, mux) {
  const own = await lists.prompts(direct);
  for (const p of own) {
    await t.test(p.name, async () => {
      assert.ok(p.name in promptArgs, `no arguments known for prompt ${p.name}`);
      const args = promptArgs[p.name];
      const d = await withTimeout(direct.getPrompt({ name: p.name, arguments: args }), CALL_MS, `direct ${p.name}`);
      const m = await withTimeout(mux.getPrompt({ name: P + p.name, arguments: args }), CALL_MS, `mux ${p.name}`);
      assert.deepEqual(withoutTimes(m), withoutTimes(viaMux(d, EV)));
    });
  }
}

/**
 * resources/read of every resource on the child's first page, and of each
 * template expanded with resourceId=1, one subtest each, compared with the
 * child's own.
 */
export async function readEveryResource(t, direct, mux) {
  const first = await withTimeout(direct.listResources(), CALL_MS, 'direct resources/list');
  const uris = first.resources.map((r) => r.uri);
  for (const tpl of await lists.templates(direct)) uris.push(tpl.uriTemplate.replace('{resourceId}', '1'));
  for (const uri of uris) {
    await t.test(uri, async () => {
      const d = await withTimeout(direct.readResource({ uri }), CALL_MS, `direct read ${uri}`);
      const m = await withTimeout(mux.readResource({ uri: muxUri(EV, uri) }), CALL_MS, `mux read ${uri}`);
      assert.deepEqual(withoutTimes(m), withoutTimes(viaMux(d, EV)));
    });
  }
}

/** completion/complete for a prompt argument and a template variable, compared with the child's own. */
export async function assertCompletionRelayed(direct, mux) {
  const tpl = (await lists.templates(direct)).find((x) => x.uriTemplate.includes('{resourceId}'));
  const cases = [
    [
      { ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'S' } },
      { ref: { type: 'ref/prompt', name: `${P}completable-prompt` }, argument: { name: 'department', value: 'S' } },
    ],
    [
      {
        ref: { type: 'ref/prompt', name: 'completable-prompt' },
        argument: { name: 'name', value: '' },
        context: { arguments: { department: 'Sales' } },
      },
      {
        ref: { type: 'ref/prompt', name: `${P}completable-prompt` },
        argument: { name: 'name', value: '' },
        context: { arguments: { department: 'Sales' } },
      },
    ],
    [
      { ref: { type: 'ref/resource', uri: tpl.uriTemplate }, argument: { name: 'resourceId', value: '7' } },
      { ref: { type: 'ref/resource', uri: muxUri(EV, tpl.uriTemplate) }, argument: { name: 'resourceId', value: '7' } },
    ],
  ];
  for (const [own, relayed] of cases) {
    const d = await withTimeout(direct.complete(own), CALL_MS, 'direct complete');
    assert.ok(d.completion.values.length > 0, `server-everything completes nothing for ${JSON.stringify(own)}`);
    const m = await withTimeout(mux.complete(relayed), CALL_MS, 'mux complete');
    assert.deepEqual(m, d, `completion/complete ${JSON.stringify(relayed)}`);
  }
}

/**
 * trigger-long-running-operation: every progress notification, in order,
 * before the answer, as they arrive on the wire. (The SDK's onprogress
 * callback cannot tell: it runs a notification's handler a microtask later,
 * while a response read in the same chunk drops the call's progress handler
 * at once, so a last progress notification written just before the answer
 * is reported as for "an unknown token".)
 */
export async function assertProgressBeforeAnswer(mux) {
  const steps = 4;
  const events = [];
  const tr = mux.transport;
  const onmessage = tr.onmessage;
  let id;
  tr.onmessage = (msg, extra) => {
    if (msg.method === 'notifications/progress') events.push({ progress: msg.params.progress, total: msg.params.total });
    if (id !== undefined && msg.id === id && !msg.method) events.push('answer');
    onmessage(msg, extra);
  };
  const send = tr.send.bind(tr);
  tr.send = (msg, opts) => {
    if (msg.method === 'tools/call' && msg.params?.name === `${P}trigger-long-running-operation`) id = msg.id;
    return send(msg, opts);
  };
  let result;
  try {
    result = await withTimeout(
      mux.callTool({ name: `${P}trigger-long-running-operation`, arguments: { duration: 0.4, steps } }, undefined, {
        timeout: CALL_MS,
        onprogress: () => {},
      }),
      CALL_MS,
      'trigger-long-running-operation',
    );
  } finally {
    tr.onmessage = onmessage;
    tr.send = send;
  }
  assert.ok(!result.isError, JSON.stringify(result));
  const want = [...Array(steps)].map((_, i) => ({ progress: i + 1, total: steps }));
  assert.deepEqual(events, [...want, 'answer'], 'progress notifications (then the answer) as the client saw them');
}

/**
 * logging/setLevel is accepted; after toggle-simulated-logging a
 * notifications/message arrives with logger "ev" or "ev/..."; the toggle is
 * switched back off.
 */
export async function assertLoggingTagged(mux, notes) {
  await withTimeout(mux.setLoggingLevel('debug'), CALL_MS, 'logging/setLevel');
  const before = notes.message.items.length;
  const on = await withTimeout(mux.callTool({ name: `${P}toggle-simulated-logging`, arguments: {} }), CALL_MS, 'toggle on');
  assert.ok(!on.isError && /Started/.test(text(on)), `toggle-simulated-logging: ${JSON.stringify(on)}`);
  try {
    const simulated = (m) => typeof m.data === 'string' && /-level message|level-message/.test(m.data);
    const msg = await notes.message.waitFor(
      (m) => notes.message.items.indexOf(m) >= before && simulated(m),
      NOTIFY_MS,
      `a simulated log message (seen: ${JSON.stringify(notes.message.items)})`,
    );
    assert.match(String(msg.logger), /^ev(\/|$)/, `logger of ${JSON.stringify(msg)}`);
  } finally {
    await mux.callTool({ name: `${P}toggle-simulated-logging`, arguments: {} });
  }
}

/**
 * resources/subscribe of a static document, then toggle-subscriber-updates:
 * notifications/resources/updated arrives with the mcpmux URI.
 */
export async function assertSubscriptionUpdates(mux, notes) {
  const res = (await lists.resources(mux)).find((r) => r.uri.startsWith(muxUri(EV, 'demo://resource/static/')));
  assert.ok(res, 'no static document of ev listed through mcpmux');
  await withTimeout(mux.subscribeResource({ uri: res.uri }), CALL_MS, 'resources/subscribe');
  const on = await withTimeout(mux.callTool({ name: `${P}toggle-subscriber-updates`, arguments: {} }), CALL_MS, 'toggle on');
  assert.ok(!on.isError && /Started/.test(text(on)), `toggle-subscriber-updates: ${JSON.stringify(on)}`);
  try {
    await notes.updated.waitFor(
      (u) => u.uri === res.uri,
      NOTIFY_MS,
      `resources/updated for ${res.uri} (seen: ${JSON.stringify(notes.updated.items)})`,
    );
  } finally {
    await mux.callTool({ name: `${P}toggle-subscriber-updates`, arguments: {} });
    await mux.unsubscribeResource({ uri: res.uri });
  }
}

/** trigger-sampling-request: the client's sampling handler gets the child's request, the child the answer. */
export async function assertSamplingRoundTrip(mux, seen) {
  const prompt = `sample-${Math.random().toString(36).slice(2)}`;
  const r = await withTimeout(
    mux.callTool({ name: `${P}trigger-sampling-request`, arguments: { prompt, maxTokens: 16 } }),
    CALL_MS,
    'trigger-sampling-request',
  );
  assert.ok(!r.isError, JSON.stringify(r));
  const req = seen.sampling.items.find((s) => JSON.stringify(s.params.messages).includes(prompt));
  assert.ok(req, `the client got no sampling/createMessage for ${prompt}`);
  assert.equal(req.params.maxTokens, 16);
  assert.match(text(r), /fidelity-model/);
  assert.ok(text(r).includes(`sampled: Resource trigger-sampling-request context: ${prompt}`), text(r));
}

/** trigger-elicitation-request: the client's elicitation handler answers, the child reports the answer. */
export async function assertElicitationRoundTrip(mux, seen) {
  const before = seen.elicitation.items.length;
  const r = await withTimeout(mux.callTool({ name: `${P}trigger-elicitation-request`, arguments: {} }), CALL_MS, 'trigger-elicitation-request');
  assert.ok(!r.isError, JSON.stringify(r));
  assert.equal(seen.elicitation.items.length, before + 1, 'the client got no elicitation/create');
  assert.equal(seen.elicitation.items[before].params.requestedSchema.required[0], 'name');
  assert.match(text(r), /- Name: Ada/);
  assert.match(text(r), /- Agreed to terms: true/);
}

/** The text of get-roots-list through mcpmux. */
export async function allRoots(mux) {
  const r = await withTimeout(mux.callTool({ name: `${P}get-roots-list`, arguments: {} }), CALL_MS, 'get-roots-list');
  assert.ok(!r.isError, JSON.stringify(r));
  return text(r);
}

/** get-roots-list: the child lists the client's own roots. */
export async function assertRootsRoundTrip(mux, roots) {
  const r = await withTimeout(mux.callTool({ name: `${P}get-roots-list`, arguments: {} }), CALL_MS, 'get-roots-list');
  assert.ok(!r.isError, JSON.stringify(r));
  for (const root of roots) assert.ok(text(r).includes(`URI: ${root.uri}`), `${root.uri} not in ${text(r)}`);
}

/**
 * For a client that declares none of sampling, elicitation and roots: the
 * three tools are listed (mcpmux declares the capabilities to its children)
 * and each call ends, within the bound, in an error result or a JSON-RPC
 * error that names what is missing, or (get-roots-list, which swallows the
 * error) in no roots; the client is never asked. skip: tool names not
 * checked.
 */
export async function assertBareClientFailsCleanly(bare, { skip = new Set() } = {}) {
  const names = (await lists.tools(bare)).map((t) => t.name);
  const cases = [
    ['trigger-sampling-request', { prompt: 'nobody samples', maxTokens: 8 }, /sampl/i],
    ['trigger-elicitation-request', {}, /elicit/i],
    ['get-roots-list', {}, /roots/i],
  ];
  const problems = [];
  for (const [name, args, word] of cases) {
    if (skip.has(name)) continue;
    if (!names.includes(P + name)) {
      problems.push(`${P}${name} is not listed for a client without the capability`);
      continue;
    }
    const r = await callAny(bare, P + name, args, false);
    if (r.error) {
      if (r.error.message.includes('no result within')) problems.push(`${name}: hangs (${r.error.message})`);
      else if (r.error.code === types.ErrorCode.InvalidParams && /unknown|not found/i.test(r.error.message)) {
        problems.push(`${name}: refused as unknown: ${r.error.message}`);
      } else if (!word.test(r.error.message)) problems.push(`${name}: JSON-RPC error without a reason: ${r.error.message}`);
      continue;
    }
    if (name === 'get-roots-list') {
      if (/file:\/\//.test(text(r.result))) problems.push(`${name}: roots reported to a client that has none: ${text(r.result)}`);
      continue;
    }
    if (!r.result.isError) problems.push(`${name}: succeeded without the capability: ${text(r.result)}`);
    else if (!word.test(text(r.result))) problems.push(`${name}: error result without a reason: ${text(r.result)}`);
  }
  assert.deepEqual(problems, []);
}

/**
 * simulate-research-query as a task: the SDK's task stream gets taskCreated
 * and then the report; tasks/get through mcpmux then says completed.
 */
export async function assertResearchRunsAsTask(mux) {
  const tool = (await lists.tools(mux)).find((t) => t.name === `${P}simulate-research-query`);
  assert.ok(tool, `${P}simulate-research-query is not listed through mcpmux`);
  assert.equal(tool.execution?.taskSupport, 'required');
  const messages = await collectTaskStream(mux, tool.name, { topic: 'relayed tasks' });
  const kinds = messages.map((m) => m.type);
  const last = messages.at(-1);
  assert.equal(last?.type, 'result', `task stream ended with ${JSON.stringify(last?.error?.message ?? last)}; saw ${kinds}`);
  assert.equal(kinds[0], 'taskCreated', `task stream: ${kinds}`);
  assert.match(text(last.result), /# Research Report: relayed tasks/);
  const task = await withTimeout(mux.experimental.tasks.getTask(messages[0].task.taskId), CALL_MS, 'tasks/get');
  assert.equal(task.status, 'completed');
}

/** The text server-filesystem's list_allowed_directories gives through mcpmux under alias. */
export async function allowedDirectories(mux, alias) {
  const r = await withTimeout(mux.callTool({ name: `${alias}__list_allowed_directories`, arguments: {} }), CALL_MS, 'list_allowed_directories');
  assert.ok(!r.isError, JSON.stringify(r));
  return text(r);
}

/** Writes work/policies/fid.toml: the identity "fid" may use every tool and resource of ev and fs. */
export async function writeFidPolicy(work) {
  await mkdir(path.join(work, 'policies'));
  await writeFile(path.join(work, 'policies', 'fid.toml'), 'allow = ["ev__*", "fs__*"]\nallow_resources = ["ev", "fs"]\n');
}

/**
 * The config's [servers.ev] (server-everything behind the tap) and, with
 * fsArgDir, [servers.fs] (server-filesystem serving fsArgDir on its command
 * line); with rootUri, each with roots = [rootUri].
 */
export async function childServers({ fsArgDir, rootUri } = {}) {
  const roots = rootUri ? `roots = [${toml(rootUri)}]\n` : '';
  let body = `[servers.ev]
command = ${toml(process.execPath)}
args = [${toml(everythingTap)}, ${toml(await everythingEntry())}]
${roots}`;
  if (fsArgDir) {
    body += `
[servers.fs]
command = ${toml(process.execPath)}
args = [${toml(await filesystemEntry())}, ${toml(fsArgDir)}]
${roots}`;
  }
  return body;
}

/**
 * Waits until server-filesystem (child "fs", its stderr in mcpmux's logs)
 * has taken one valid root over MCP, then checks that it serves served and
 * no longer its command-line directory fsArgDir.
 */
export async function assertFilesystemServes(mux, logs, { served, fsArgDir, what }) {
  const fsSaid = (r) => r.message === 'server stderr' && r.server === 'fs';
  await logs
    .waitFor((r) => fsSaid(r) && /Updated allowed directories from MCP roots: 1 valid/.test(String(r.stderr)), NOTIFY_MS, `server-filesystem taking ${what}`)
    .catch((err) => assert.fail(`${err.message}; server-filesystem said: ${JSON.stringify(logs.items.filter(fsSaid).map((r) => r.stderr))}`));
  const dirs = await allowedDirectories(mux, 'fs');
  assert.ok(dirs.includes(served), `${what} ${served} not in: ${dirs}`);
  assert.ok(!dirs.includes(fsArgDir), `the command-line directory is still served: ${dirs}`);
}

/**
 * Registers the tests both upstreams run on what mcpmux relays: every list,
 * call, prompt and read against server-everything's own. clients() returns
 * { direct, full } (SDK clients) once before() has connected them; the tools
 * in skipTools are left out of the call comparison.
 */
export function relayTests(clients, { skipTools = new Set() } = {}) {
  test('tools/list: every server-everything tool, prefixed, definition unchanged', async () => {
    const { direct, full } = clients();
    await assertNamedListRelayed('tools', direct, full);
  });
  test('prompts/list: every server-everything prompt, prefixed, definition unchanged', async () => {
    const { direct, full } = clients();
    await assertNamedListRelayed('prompts', direct, full);
  });
  test('resources/list: every server-everything resource under mcpmux://ev/', async () => {
    const { direct, full } = clients();
    await assertResourcesRelayed(direct, full);
  });
  test('resources/templates/list: every template under mcpmux://ev/', async () => {
    const { direct, full } = clients();
    await assertTemplatesRelayed(direct, full);
  });
  test('tools/call: every tool answers through mcpmux as it does directly', async (t) => {
    const { direct, full } = clients();
    await callEveryTool(t, direct, full, { skip: skipTools });
  });
  test('prompts/get: every prompt answers through mcpmux as it does directly', async (t) => {
    const { direct, full } = clients();
    await getEveryPrompt(t, direct, full);
  });
  test('resources/read: every resource and template answers through mcpmux as it does directly', async (t) => {
    const { direct, full } = clients();
    await readEveryResource(t, direct, full);
  });
  test('progress: trigger-long-running-operation delivers every step before its answer', async () => {
    await assertProgressBeforeAnswer(clients().full);
  });
}

/**
 * Registers the tests both upstreams run on what reaches a session unasked:
 * logging and resources/updated. full() returns the session ({ client,
 * notes }) once before() has connected it.
 */
export function notificationTests(full) {
  test('logging: setLevel is accepted and simulated logging arrives tagged ev', async () => {
    await assertLoggingTagged(full().client, full().notes);
  });
  test('subscribe: resources/updated arrives for the mcpmux URI', async () => {
    await assertSubscriptionUpdates(full().client, full().notes);
  });
}
