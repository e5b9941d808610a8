// Shared by the interop tests: binaries, server-everything's entry point, and
// small helpers. Not a test file itself.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..');
const require = createRequire(import.meta.url);

// Failure bounds only: nothing here waits for a fixed time.
export const BUILD_TIMEOUT_MS = 300_000;
export const CONNECT_TIMEOUT_MS = 20_000;
export const EXIT_TIMEOUT_MS = 8_000;

/** The path of server-everything's stdio entry point, from its package.json bin. */
export async function everythingEntry() {
  const pkgPath = require.resolve('@modelcontextprotocol/server-everything/package.json');
  const pkg = JSON.parse(await readFile(pkgPath, 'utf8'));
  const bin = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin['mcp-server-everything'];
  return path.join(path.dirname(pkgPath), bin);
}

/**
 * The mcpmux and labserver binaries: MCPMUX_BIN and LABSERVER_BIN when both
 * are set, otherwise built with `go build` into work/bin.
 */
export async function binaries(work) {
  if (process.env.MCPMUX_BIN && process.env.LABSERVER_BIN) {
    return { mcpmux: path.resolve(process.env.MCPMUX_BIN), labserver: path.resolve(process.env.LABSERVER_BIN) };
  }
  const out = path.join(work, 'bin');
  await mkdir(out);
  await promisify(execFile)('go', ['build', '-o', out + path.sep, './cmd/mcpmux', './internal/labserver'], {
    cwd: repoRoot,
    timeout: BUILD_TIMEOUT_MS,
  });
  return { mcpmux: path.join(out, 'mcpmux'), labserver: path.join(out, 'labserver') };
}

export const toml = JSON.stringify; // a JSON string is a valid TOML basic string

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The JSON records among log lines; other lines are skipped. */
export function jsonRecords(lines) {
  return lines.flatMap((line) => {
    try {
      return [JSON.parse(line)];
    } catch {
      return [];
    }
  });
}

/** The text parts of a tool result, joined. */
export function text(result) {
  assert.ok(Array.isArray(result.content), `no content in ${JSON.stringify(result)}`);
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// ---- protocol fidelity (fidelity*.test.mjs) ----

/** The path of a package's bin entry (the first, or the one named bin). */
async function binEntry(pkgName, bin) {
  const pkgPath = require.resolve(`${pkgName}/package.json`);
  const pkg = JSON.parse(await readFile(pkgPath, 'utf8'));
  const rel = typeof pkg.bin === 'string' ? pkg.bin : pkg.bin[bin] ?? Object.values(pkg.bin)[0];
  return path.join(path.dirname(pkgPath), rel);
}

/** The path of server-filesystem's stdio entry point. */
export function filesystemEntry() {
  return binEntry('@modelcontextprotocol/server-filesystem', 'mcp-server-filesystem');
}

/** everything-tap.mjs: server-everything behind a tap that logs what reaches it (see the file). */
export const everythingTap = path.join(here, 'everything-tap.mjs');

/** The URI mcpmux exposes for child alias's resource uri. */
export function muxUri(alias, uri) {
  return `mcpmux://${alias}/${uri}`;
}

/**
 * A deep copy of value (a result the child gave directly) as mcpmux must
 * relay it: resource_link items' uri, embedded resources' resource.uri,
 * resources/read's contents[].uri, resources/list's resources[].uri and
 * resources/templates/list's resourceTemplates[].uriTemplate rewritten to
 * mcpmux://alias/..., everything else unchanged.
 */
export function viaMux(value, alias) {
  const walk = (v, key) => {
    if (Array.isArray(v)) {
      const rewriteUri = key === 'contents' || key === 'resources';
      return v.map((item) => {
        const out = walk(item);
        if (rewriteUri && out && typeof out === 'object' && typeof out.uri === 'string' && out.type === undefined) {
          out.uri = muxUri(alias, out.uri);
        }
        if (key === 'resourceTemplates' && out && typeof out.uriTemplate === 'string') {
          out.uriTemplate = muxUri(alias, out.uriTemplate);
        }
        return out;
      });
    }
    if (!v || typeof v !== 'object') return v;
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = walk(x, k);
    if (out.type === 'resource_link' && typeof out.uri === 'string') out.uri = muxUri(alias, out.uri);
    if (out.type === 'resource' && out.resource && typeof out.resource.uri === 'string') {
      out.resource = { ...out.resource, uri: muxUri(alias, out.resource.uri) };
    }
    return out;
  };
  return walk(value);
}

// server-everything's dynamic resources carry `created at <toLocaleTimeString()>`.
const createdAt = /created at \d{1,2}:\d{2}:\d{2}(\s?[AP]M)?/g;

/**
 * A deep copy of value with the wall-clock times server-everything writes
 * into its dynamic resources replaced by "created at T", in text and inside
 * base64 blobs, so that two reads a second apart compare equal.
 */
export function withoutTimes(value) {
  if (Array.isArray(value)) return value.map(withoutTimes);
  if (typeof value === 'string') return value.replace(createdAt, 'created at T');
  if (!value || typeof value !== 'object') return value;
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'blob' && typeof v === 'string') {
      const decoded = Buffer.from(v, 'base64').toString('utf8');
      out[k] = createdAt.test(decoded) ? `decoded:${decoded.replace(createdAt, 'created at T')}` : v;
      createdAt.lastIndex = 0;
    } else {
      out[k] = withoutTimes(v);
    }
  }
  return out;
}

/**
 * A waitable log of events: push(x) records x; waitFor(pred, ms, what)
 * resolves with the first recorded x matching pred (already recorded or
 * still to come), or rejects after ms.
 */
export function eventLog() {
  const items = [];
  const waiters = new Set();
  return {
    items,
    push(x) {
      items.push(x);
      for (const w of waiters) {
        if (w.pred(x)) {
          waiters.delete(w);
          w.resolve(x);
        }
      }
    },
    waitFor(pred, ms, what) {
      const found = items.find(pred);
      if (found !== undefined) return Promise.resolve(found);
      let w;
      const p = new Promise((resolve) => {
        w = { pred, resolve };
        waiters.add(w);
      });
      return withTimeout(p, ms, what).finally(() => waiters.delete(w));
    },
  };
}

/**
 * The capabilities of a client that implements sampling, elicitation (form
 * and URL) and roots, as declared in initialize.
 */
export const fullClientCapabilities = {
  sampling: {},
  elicitation: { form: {}, url: {} },
  roots: { listChanged: true },
};

/**
 * Installs on client (an SDK Client created with fullClientCapabilities) the
 * handlers of a client that implements sampling, elicitation and roots:
 * sampling answers model "fidelity-model" with text `sampled: <first
 * message's text>`; a form elicitation is accepted with {check: true, name:
 * "Ada"} (or {interpretation: "technical"} when that is what it asks for), a
 * URL elicitation accepted; roots/list answers roots(). Each request's params
 * are recorded in the returned eventLogs, with the handler's extra.signal.
 */
export function serveClientRequests(client, sdkTypes, roots) {
  const seen = { sampling: eventLog(), elicitation: eventLog(), roots: eventLog() };
  client.setRequestHandler(sdkTypes.CreateMessageRequestSchema, (req, extra) => {
    seen.sampling.push({ params: req.params, signal: extra.signal });
    const first = req.params.messages?.[0]?.content;
    return {
      model: 'fidelity-model',
      role: 'assistant',
      stopReason: 'endTurn',
      content: { type: 'text', text: `sampled: ${first?.text ?? ''}` },
    };
  });
  client.setRequestHandler(sdkTypes.ElicitRequestSchema, (req, extra) => {
    seen.elicitation.push({ params: req.params, signal: extra.signal });
    if (req.params.mode === 'url') return { action: 'accept' };
    const props = req.params.requestedSchema?.properties ?? {};
    if (props.interpretation) return { action: 'accept', content: { interpretation: 'technical' } };
    // Keys in sorted order: mcpmux re-encodes the answer (Go maps sort keys), and
    // server-everything prints it with JSON.stringify, so any other order would
    // differ in text only.
    return { action: 'accept', content: { check: true, name: 'Ada' } };
  });
  client.setRequestHandler(sdkTypes.ListRootsRequestSchema, (req, extra) => {
    seen.roots.push({ params: req.params, signal: extra.signal });
    return { roots: roots() };
  });
  return seen;
}
