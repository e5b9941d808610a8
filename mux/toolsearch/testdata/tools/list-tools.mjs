#!/usr/bin/env node
// list-tools.mjs lists the tools of real MCP servers from their npm packages
// and writes one corpus file per server into ../corpus/<alias>.json.
//
// Each server is started with `npx -y <package>@<exact version> <args>` and
// spoken to by hand over stdio (newline-delimited JSON-RPC): initialize,
// notifications/initialized, then tools/list, following nextCursor pages.
// The tool objects are written exactly as the server sent them.
//
// Usage: node list-tools.mjs [alias ...]   (no alias: every server below)
// Env:   NODE22=/path/to/node22/bin  prepended to PATH for servers marked node22.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = join(here, "..", "corpus");
const scratch = mkdtempSync(join(tmpdir(), "mcp-corpus-"));

// alias: the short prefix mcpmux would give the server's tools.
// env: dummy credentials for servers that refuse to start without them;
// none of them is used to reach anything while listing.
//
// Tried and left out (see ../README.md):
//   @modelcontextprotocol/server-redis@2025.4.25 (args: redis://...): connects
//     at start and exits when there is no Redis.
//   @azure-devops/mcp@2.10.0: needs the native module keytar, whose prebuilt
//     binary cannot be fetched here.
export const servers = [
  { alias: "everything", pkg: "@modelcontextprotocol/server-everything", version: "2026.8.31", args: ["stdio"] },
  { alias: "fs", pkg: "@modelcontextprotocol/server-filesystem", version: "2026.8.31", args: [scratch] },
  { alias: "memory", pkg: "@modelcontextprotocol/server-memory", version: "2026.8.31", args: [], env: { MEMORY_FILE_PATH: join(scratch, "memory.jsonl") } },
  { alias: "thinking", pkg: "@modelcontextprotocol/server-sequential-thinking", version: "2026.8.31", args: [] },
  { alias: "github", pkg: "@modelcontextprotocol/server-github", version: "2025.4.8", args: [], env: { GITHUB_PERSONAL_ACCESS_TOKEN: "dummy" } },
  { alias: "gitlab", pkg: "@modelcontextprotocol/server-gitlab", version: "2025.4.25", args: [], env: { GITLAB_PERSONAL_ACCESS_TOKEN: "dummy", GITLAB_API_URL: "https://gitlab.invalid/api/v4" } },
  { alias: "slack", pkg: "@modelcontextprotocol/server-slack", version: "2025.4.25", args: [], env: { SLACK_BOT_TOKEN: "xoxb-dummy", SLACK_TEAM_ID: "T00000000" } },
  { alias: "puppeteer", pkg: "@modelcontextprotocol/server-puppeteer", version: "2025.5.12", args: [], env: { PUPPETEER_SKIP_DOWNLOAD: "1", PUPPETEER_SKIP_CHROMIUM_DOWNLOAD: "1" } },
  { alias: "brave", pkg: "@modelcontextprotocol/server-brave-search", version: "0.6.2", args: [], env: { BRAVE_API_KEY: "dummy" } },
  { alias: "maps", pkg: "@modelcontextprotocol/server-google-maps", version: "0.6.2", args: [], env: { GOOGLE_MAPS_API_KEY: "dummy" } },
  { alias: "postgres", pkg: "@modelcontextprotocol/server-postgres", version: "0.6.2", args: ["postgresql://dummy:dummy@127.0.0.1:1/dummy"] },
  { alias: "playwright", pkg: "@playwright/mcp", version: "0.0.86", args: [], env: { PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: "1" } },
  { alias: "notion", pkg: "@notionhq/notion-mcp-server", version: "2.5.2", args: [], env: { NOTION_TOKEN: "ntn_dummy" } },
  { alias: "firecrawl", pkg: "firecrawl-mcp", version: "3.26.0", args: [], env: { FIRECRAWL_API_KEY: "fc-dummy" }, node22: true },
  { alias: "context7", pkg: "@upstash/context7-mcp", version: "4.1.1", args: [] },
  { alias: "supabase", pkg: "@supabase/mcp-server-supabase", version: "0.13.0", args: ["--access-token", "sbp_dummy", "--features=account,database,debugging,development,functions,branching,storage"] },
  { alias: "k8s", pkg: "mcp-server-kubernetes", version: "4.1.7", args: [] },
  { alias: "sentry", pkg: "@sentry/mcp-server", version: "0.39.0", args: ["--access-token", "dummy"], node22: true },
  { alias: "heroku", pkg: "@heroku/mcp-server", version: "1.2.0", args: [], env: { HEROKU_API_KEY: "dummy" } },
  { alias: "mongodb", pkg: "mongodb-mcp-server", version: "3.0.4", args: [], env: { MDB_MCP_API_CLIENT_ID: "dummy", MDB_MCP_API_CLIENT_SECRET: "dummy", MDB_MCP_TELEMETRY: "disabled" } },
  { alias: "exa", pkg: "exa-mcp-server", version: "3.4.1", args: [], env: { EXA_API_KEY: "dummy" } },
  { alias: "tavily", pkg: "tavily-mcp", version: "0.2.22", args: [], env: { TAVILY_API_KEY: "tvly-dummy" } },
  { alias: "stripe", pkg: "@stripe/mcp", version: "0.2.5", args: ["--tools=all", "--api-key=sk_test_dummy"] },
  { alias: "hubspot", pkg: "@hubspot/mcp-server", version: "0.4.0", args: [], env: { PRIVATE_APP_ACCESS_TOKEN: "dummy" } },
  { alias: "figma", pkg: "figma-developer-mcp", version: "0.13.2", args: ["--stdio", "--figma-api-key=dummy"] },
  { alias: "aws-kb", pkg: "@modelcontextprotocol/server-aws-kb-retrieval", version: "0.6.2", args: [], env: { AWS_ACCESS_KEY_ID: "dummy", AWS_SECRET_ACCESS_KEY: "dummy", AWS_REGION: "us-east-1" } },
  { alias: "shopify", pkg: "@shopify/dev-mcp", version: "1.16.0", args: [] },
];

const TIMEOUT_MS = Number(process.env.LIST_TIMEOUT_MS || 240000);
const today = new Date().toISOString().slice(0, 10);

function list(s) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...(s.env || {}), npm_config_yes: "true", NO_UPDATE_NOTIFIER: "1" };
    if (s.node22 && process.env.NODE22) env.PATH = `${process.env.NODE22}:${env.PATH}`;
    const argv = ["-y", `${s.pkg}@${s.version}`, ...s.args];
    const child = spawn("npx", argv, { env, cwd: scratch, stdio: ["pipe", "pipe", "pipe"], detached: true });
    let buf = "", stderr = "", nextId = 1, done = false;
    const pending = new Map();
    const tools = [];
    let serverInfo = null;
    const finish = (err, val) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try { process.kill(-child.pid, "SIGTERM"); } catch {}
      err ? reject(Object.assign(err, { stderr })) : resolve(val);
    };
    const timer = setTimeout(() => finish(new Error(`timeout after ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
    const send = (msg) => child.stdin.write(JSON.stringify(msg) + "\n");
    const request = (method, params) => new Promise((res, rej) => {
      const id = nextId++;
      pending.set(id, { res, rej });
      send({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    });
    child.stderr.on("data", (d) => { stderr = (stderr + d).slice(-4000); });
    child.on("error", (e) => finish(e));
    child.on("exit", (code, sig) => finish(new Error(`exited (${code ?? sig}) before listing`)));
    child.stdout.on("data", (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line) continue;
        let msg;
        try { msg = JSON.parse(line); } catch { continue; } // a stray log line on stdout
        if (msg.id !== undefined && msg.method) {
          // A request from the server (roots/list, ping, ...): answer it plainly.
          if (msg.method === "roots/list") send({ jsonrpc: "2.0", id: msg.id, result: { roots: [] } });
          else if (msg.method === "ping") send({ jsonrpc: "2.0", id: msg.id, result: {} });
          else send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "not supported" } });
          continue;
        }
        const p = pending.get(msg.id);
        if (!p) continue;
        pending.delete(msg.id);
        msg.error ? p.rej(new Error(JSON.stringify(msg.error))) : p.res(msg.result);
      }
    });
    (async () => {
      const init = await request("initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "mcpmux-corpus-lister", version: "1" },
      });
      serverInfo = init.serverInfo || null;
      send({ jsonrpc: "2.0", method: "notifications/initialized" });
      let cursor;
      for (let page = 0; page < 100; page++) {
        const r = await request("tools/list", cursor ? { cursor } : undefined);
        tools.push(...(r.tools || []));
        cursor = r.nextCursor;
        if (!cursor) break;
      }
      finish(null, { serverInfo, protocolVersion: init.protocolVersion, tools });
    })().catch((e) => finish(e));
  });
}

const want = process.argv.slice(2);
const chosen = want.length ? servers.filter((s) => want.includes(s.alias)) : servers;
for (const s of chosen) {
  const t0 = Date.now();
  try {
    const r = await list(s);
    if (!r.tools.length) throw new Error("listed no tools");
    const command = ["npx", "-y", `${s.pkg}@${s.version}`, ...s.args.map((a) => a.startsWith(scratch) ? a.replace(scratch, "$TMPDIR") : a)].join(" ");
    const out = {
      package: s.pkg,
      version: s.version,
      listed: today,
      command,
      ...(s.env ? { env: Object.keys(s.env) } : {}),
      serverInfo: r.serverInfo,
      protocolVersion: r.protocolVersion,
      tools: r.tools,
    };
    writeFileSync(join(outDir, `${s.alias}.json`), JSON.stringify(out, null, 2) + "\n");
    console.log(`ok   ${s.alias} ${s.pkg}@${s.version}: ${r.tools.length} tools (${Date.now() - t0} ms)`);
  } catch (e) {
    console.log(`FAIL ${s.alias} ${s.pkg}@${s.version}: ${e.message}\n     stderr: ${(e.stderr || "").trim().split("\n").slice(-3).join(" | ")}`);
  }
}
process.exit(0);
