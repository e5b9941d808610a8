// The client the conformance suite's client scenarios drive, as
//   node conformance-client.mjs SERVER_URL
// with MCP_CONFORMANCE_SCENARIO naming the scenario (the suite appends the
// URL of the test server it started and sets the variable).
//
// Through mcpmux (the default) it starts `mcpmux serve` over stdio with the
// suite's server as its one remote child (prefix = false), connects the
// official TypeScript SDK client to it, and makes through mcpmux the calls
// the scenario expects, so that mcpmux is the client the suite judges. With
// CONFORMANCE_CLIENT_DIRECT=1 the SDK client connects to the server itself:
// the baseline the runner compares with. MCPMUX_BIN names the mcpmux binary.
//
// The SDK client declares elicitation and answers a form by accepting the
// schema's defaults (SEP-1034), and declares sampling with a fixed answer.
// Exit status 0 when every call returned, 1 otherwise (the reason on stderr).

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { writeConformanceConfig } from './conformance-support.mjs';

/** The calls each client scenario expects, made through client. */
const scenarios = {
  initialize: async (client) => {
    await client.listTools();
  },
  tools_call: async (client) => {
    await callListed(client, 'add_numbers', { a: 5, b: 3 });
  },
  'elicitation-sep1034-client-defaults': async (client) => {
    await callListed(client, 'test_client_elicitation_defaults', {});
  },
  'sse-retry': async (client) => {
    await callListed(client, 'test_reconnection', {});
  },
};

/** Calls tool after checking that it is listed under its own name. */
async function callListed(client, name, args) {
  const { tools } = await client.listTools();
  if (!tools.some((t) => t.name === name)) {
    throw new Error(`tool ${name} is not listed; the list is [${tools.map((t) => t.name).join(', ')}]`);
  }
  const result = await client.callTool({ name, arguments: args });
  console.error(`${name}: ${JSON.stringify(result)}`);
  return result;
}

/** The content a user accepting every default of a form schema would send. */
function defaults(schema) {
  const content = {};
  for (const [key, prop] of Object.entries(schema?.properties ?? {})) {
    if (prop && 'default' in prop) content[key] = prop.default;
  }
  return content;
}

function newClient() {
  const client = new Client(
    { name: 'mcpmux-conformance-client', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} }, sampling: {} } },
  );
  client.setRequestHandler(ElicitRequestSchema, (req) => ({
    action: 'accept',
    content: defaults(req.params.requestedSchema),
  }));
  client.setRequestHandler(CreateMessageRequestSchema, () => ({
    role: 'assistant',
    content: { type: 'text', text: 'A sampled answer from the conformance client' },
    model: 'conformance-client',
    stopReason: 'endTurn',
  }));
  return client;
}

/** A transport to mcpmux fronting url, and the cleanup of its config. */
async function throughMcpmux(url) {
  const bin = process.env.MCPMUX_BIN;
  if (!bin) throw new Error('MCPMUX_BIN is not set');
  const work = await mkdtemp(path.join(tmpdir(), 'mcpmux-conformance-client-'));
  const cfg = await writeConformanceConfig(work, { alias: 'suite', url });
  const transport = new StdioClientTransport({ command: bin, args: ['serve', '--config', cfg], stderr: 'inherit' });
  return { transport, cleanup: () => rm(work, { recursive: true, force: true }) };
}

async function main() {
  const url = process.argv[2];
  const name = process.env.MCP_CONFORMANCE_SCENARIO;
  const run = scenarios[name];
  if (!url || !run) {
    throw new Error(`usage: MCP_CONFORMANCE_SCENARIO=NAME node conformance-client.mjs URL; NAME one of ${Object.keys(scenarios).join(', ')}`);
  }
  const direct = process.env.CONFORMANCE_CLIENT_DIRECT === '1';
  const { transport, cleanup } = direct
    ? { transport: new StreamableHTTPClientTransport(new URL(url)), cleanup: async () => {} }
    : await throughMcpmux(url);
  const client = newClient();
  try {
    await client.connect(transport);
    await run(client);
  } finally {
    await client.close().catch(() => {});
    await cleanup();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`conformance client (${process.env.MCP_CONFORMANCE_SCENARIO}): ${err?.stack ?? err}`);
    process.exit(1);
  },
);
