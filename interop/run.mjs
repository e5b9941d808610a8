// `npm test`: builds mcpmux and labserver once (unless MCPMUX_BIN and
// LABSERVER_BIN are both set) and runs every interop test file with them.
// Each test file also runs on its own (node --test FILE), building the
// binaries itself when the variables are unset. Extra arguments are passed
// to node --test.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { binaries } from './support.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const files = ['interop.test.mjs', 'interop_http.test.mjs', 'fidelity.test.mjs', 'fidelity_http.test.mjs', 'search.test.mjs', 'replicas.test.mjs'];

const env = { ...process.env };
let tmp;
if (!(env.MCPMUX_BIN && env.LABSERVER_BIN)) {
  tmp = await mkdtemp(path.join(tmpdir(), 'mcpmux-interop-bin-'));
  try {
    const bins = await binaries(tmp);
    env.MCPMUX_BIN = bins.mcpmux;
    env.LABSERVER_BIN = bins.labserver;
  } catch (err) {
    console.error(`building the binaries failed:\n${err.stderr || err.message}`);
    await rm(tmp, { recursive: true, force: true });
    process.exit(1);
  }
}

const child = spawn(process.execPath, ['--test', '--test-reporter=spec', ...process.argv.slice(2), ...files], {
  cwd: here,
  env,
  stdio: 'inherit',
});
const [code, signal] = await once(child, 'exit');
if (tmp) await rm(tmp, { recursive: true, force: true });
process.exit(code ?? (signal ? 1 : 0));
