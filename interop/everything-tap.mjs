// A transparent tap in front of server-everything's stdio server, for the
// fidelity tests: it runs `node <server-everything> stdio` as its child,
// passes every byte both ways unchanged, and writes one line to its stderr,
// `tap-in {"method","id","params"?}`, for each JSON-RPC message it passes to
// the server (params only for notifications/cancelled and tools/call's
// _meta). mcpmux logs a child's stderr lines, so a test sees what reached
// server-everything itself — e.g. that a cancelled call's
// notifications/cancelled arrived under the server's own request id — which
// the server does not show in any answer.
//
// Usage: node everything-tap.mjs SERVER_EVERYTHING_ENTRY

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';

const entry = process.argv[2];
if (!entry) {
  console.error('usage: everything-tap.mjs SERVER_EVERYTHING_ENTRY');
  process.exit(2);
}

const server = spawn(process.execPath, [entry, 'stdio'], { stdio: ['pipe', 'inherit', 'inherit'] });
server.stdin.on('error', () => {}); // the server gone: its exit ends the tap
const copy = new PassThrough();
process.stdin.pipe(server.stdin);
process.stdin.pipe(copy);

createInterface({ input: copy, crlfDelay: Infinity }).on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  const rec = { method: msg.method, id: msg.id };
  if (msg.method === 'notifications/cancelled') rec.params = msg.params;
  if (msg.method === 'tools/call') rec.params = { name: msg.params?.name, _meta: msg.params?._meta };
  if (rec.method === undefined) rec.response = true; // an answer to the server's own request
  process.stderr.write(`tap-in ${JSON.stringify(rec)}\n`);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.kill(sig));
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
