// The official TypeScript SDK's client (the one the MCP Inspector is built on) against
// `skill-mcp serve` over stdio. Usage: node ts_client.mjs SDK_DIR COMMAND [ARG...]
// Prints one JSON object: what each call came back as, as that client's user would get it.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, command, ...args] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", rel)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const transport = new StdioClientTransport({ command, args, env: { ...process.env, SKILL_MCP_LOG: "warning" } });
const client = new Client({ name: "ts-sdk-client-test", version: "1.0.0" });
await client.connect(transport);

const calls = [
  ["skill_list", { limit: 2 }],
  ["skill_load", { name: "alpha" }],
  ["skill_load", { name: "nope" }],
  ["skill_file", { name: "alpha", paths: ["SKILL.md", "../beta/SKILL.md"] }],
  ["skill_file", { name: "alpha", paths: Array(9).fill("SKILL.md") }],
  ["skill_run", { skill: "alpha", script: "scripts/hello.py", confirmToken: "not-a-token" }],
  ["skill_search", { query: "" }],
];
const out = { tools: (await client.listTools()).tools.map((t) => t.name), calls: [] };
for (const [name, callArgs] of calls) {
  try {
    const result = await client.callTool({ name, arguments: callArgs });
    out.calls.push({ name, isError: Boolean(result.isError), reason: result.structuredContent?.reason ?? null });
  } catch (err) {
    out.calls.push({ name, thrown: String(err?.message ?? err) });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
