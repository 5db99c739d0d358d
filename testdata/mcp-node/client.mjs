// An MCP client built on the official TypeScript SDK, run by
// TestMCPNodeClient (mcp_test.go): it starts bashcall mcp over stdio, lists
// the tools (the SDK checks their shapes), calls bash (the SDK checks each
// structuredContent against the tool's outputSchema), follows progress and
// answers an elicitation, then prints what it saw as one JSON object.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const transport = new StdioClientTransport({
  command: process.env.BASHCALL_EXE,
  args: ["mcp", "-config", process.env.BASHCALL_CONFIG_FILE, "-state-dir", process.env.BASHCALL_STATE],
  env: { ...process.env, BASHCALL_TEST_MAIN: "1" },
  cwd: process.cwd(),
  stderr: "inherit",
});
const client = new Client({ name: "bashcall-test", version: "1.0.0" }, { capabilities: { elicitation: {} } });
let elicited = "";
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicited = request.params.message;
  return { action: "accept", content: { decision: "allow-once" } };
});
await client.connect(transport);

const server = client.getServerVersion().name;
const { tools } = await client.listTools();
const bash = (command, extra = {}) => ({ name: "bash", arguments: { command, description: "Run a test command", ...extra } });
const hello = await client.callTool(bash("echo hello from mcp"));
const progress = [];
await client.callTool(bash("echo one; sleep 0.6; echo two"), undefined, {
  onprogress: (p) => progress.push(p.message),
});
const escalated = await client.callTool(bash("echo escalated", {
  sandbox_permissions: "danger-full-access",
  justification: "The test needs to run unconfined.",
}));
const failed = await client.callTool(bash("exit 3"));
console.log(JSON.stringify({
  server,
  tools: tools.map((t) => t.name),
  text: hello.content[0].text,
  progress,
  escalated: escalated.content[0].text,
  elicited,
  failedText: failed.content[0].text,
}));
await client.close();
