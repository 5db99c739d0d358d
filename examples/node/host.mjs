#!/usr/bin/env node
// A complete bashcall host loop, standard library only: the tool definitions
// from `bashcall schema`, a scripted model, and each of its tool calls passed
// as is to bashcall on stdin with the session added. BASHCALL names the binary.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
const BASHCALL = process.env.BASHCALL || "bashcall";
const session = { id: `example-${process.pid}`, cwd: mkdtempSync(join(tmpdir(), "bashcall-example-")) };

function bashcall(args, input) {
  const out = spawnSync(BASHCALL, args, { input, encoding: "utf8" });
  if (!out.stdout) { // bashcall always answers a call on stdout; this is a setup problem
    console.error(`bashcall ${args.join(" ")} failed: ${out.error || out.stderr.trim()}`);
    process.exit(1);
  }
  return out.stdout;
}
// A tool call as an OpenAI-style API returns it.
const call = (name, args) => ({ id: `call_${name}`, type: "function", function: { name, arguments: JSON.stringify(args) } });

function* model() { // scripted: what a model sends, given the text it read last
  yield call("bash", { command: "echo hello from bash", description: "Say hello" });
  const started = yield call("bash", { command: "sleep 1; echo done", description: "Wait a second", run_in_background: true });
  yield "idle"; // the model has nothing to do: the host waits for notices
  yield call("bash_output", { task_id: started.split(" ").pop(), wait: true });
  const write = { command: "echo note > notes.txt", description: "Write a note" };
  yield call("bash", write); // denied: this session is read-only
  yield call("bash", { ...write, sandbox_permissions: "workspace-write", justification: "The note must be saved in the workspace." });
}

const askUser = (required) => { // a scripted person answering the approval prompt
  console.log(`user asked: ${required.reason} -> yes`);
  return "allowed-once";
};
const tools = JSON.parse(bashcall(["schema", "-format", "openai"])); // what the model API is given
console.log("tools:", tools.map((t) => t.function.name).join(", "));
bashcall(["mode", "-session", session.id, "read-only"]); // this session starts read-only
const script = model();
for (let step = script.next(), text = null; !step.done; step = script.next(text)) {
  const tc = step.value;
  if (tc === "idle") {
    const { notices } = JSON.parse(bashcall(["wait", "-session", session.id, "-timeout", "30s"]));
    notices.forEach((n) => console.log("notice while idle:", n));
    continue;
  }
  console.log(`model calls ${tc.function.name} ${tc.function.arguments}`);
  const request = { ...tc, session };
  let response = JSON.parse(bashcall([], JSON.stringify(request)));
  if (response.approvalRequired) {
    request.approval = askUser(response.approvalRequired);
    response = JSON.parse(bashcall([], JSON.stringify(request)));
  }
  text = response.content[0].text;
  console.log(text); // exactly what the model reads
  (response.notices || []).forEach((n) => console.log("notice:", n));
}
rmSync(session.cwd, { recursive: true });
