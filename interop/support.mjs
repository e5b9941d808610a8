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
