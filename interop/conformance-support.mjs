// Shared by conformance.mjs and conformance-client.mjs: the mcpmux config
// both run, in front of one remote server. Not a test file itself.

import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { toml } from './support.mjs';

/**
 * Writes into dir a policy that lets the identity "conformance" use every
 * tool and resource, and an mcpmux config whose one child, [servers.alias],
 * is the remote server at url with prefix = false, so that mcpmux exposes
 * its names as they are; upstream is more lines of [upstream]. Resolves with
 * the config's path.
 */
export async function writeConformanceConfig(dir, { alias, url, upstream = '' }) {
  await mkdir(path.join(dir, 'policies'));
  await writeFile(path.join(dir, 'policies', 'conformance.toml'), 'allow = ["*"]\nallow_resources = ["*"]\n');
  const cfg = path.join(dir, 'mcpmux.toml');
  await writeFile(
    cfg,
    `[mux]
policy_dir = "policies"

[upstream]
identity = "conformance"
${upstream}
[servers.${alias}]
url = ${toml(url)}
prefix = false
`,
  );
  return cfg;
}
