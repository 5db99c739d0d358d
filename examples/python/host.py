#!/usr/bin/env python3
"""A complete bashcall host loop, standard library only: the tool definitions
from `bashcall schema`, a scripted model, and each of its tool calls passed as
is to bashcall on stdin with the session added. BASHCALL names the binary."""
import json, os, shutil, subprocess, sys, tempfile

BASHCALL = os.environ.get("BASHCALL", "bashcall")
SESSION = {"id": "example-%d" % os.getpid(), "cwd": tempfile.mkdtemp(prefix="bashcall-example-")}

def bashcall(args, stdin=None):
    out = subprocess.run([BASHCALL, *args], input=stdin, capture_output=True, text=True)
    if not out.stdout:  # bashcall always answers a call on stdout; this is a setup problem
        sys.exit("bashcall %s failed: %s" % (" ".join(args), out.stderr.strip()))
    return out.stdout

def call(name, **args):  # a tool call as an OpenAI-style API returns it
    return {"id": "call_" + name, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, separators=(",", ":"))}}

def model():  # scripted: what a model sends, given the text it read last
    yield call("bash", command="echo hello from bash", description="Say hello")
    started = yield call("bash", command="sleep 1; echo done", description="Wait a second", run_in_background=True)
    yield "idle"  # the model has nothing to do: the host waits for notices
    yield call("bash_output", task_id=started.split()[-1], wait=True)
    write = dict(command="echo note > notes.txt", description="Write a note")
    yield call("bash", **write)  # denied: this session is read-only
    yield call("bash", **write, sandbox_permissions="workspace-write",
               justification="The note must be saved in the workspace.")

def ask_user(required):  # a scripted person answering the approval prompt
    print("user asked: %s -> yes" % required["reason"])
    return "allowed-once"

tools = json.loads(bashcall(["schema", "-format", "openai"]))  # what the model API is given
print("tools:", ", ".join(t["function"]["name"] for t in tools))
bashcall(["mode", "-session", SESSION["id"], "read-only"])  # this session starts read-only
script, text = model(), None
for tc in iter(lambda: script.send(text), None):
    if tc == "idle":
        for notice in json.loads(bashcall(["wait", "-session", SESSION["id"], "-timeout", "30s"]))["notices"]:
            print("notice while idle:", notice)
        text = None
        continue
    print("model calls %s %s" % (tc["function"]["name"], tc["function"]["arguments"]))
    request = dict(tc, session=SESSION)
    response = json.loads(bashcall([], json.dumps(request)))
    if response.get("approvalRequired"):
        request["approval"] = ask_user(response["approvalRequired"])
        response = json.loads(bashcall([], json.dumps(request)))
    text = response["content"][0]["text"]
    print(text)  # exactly what the model reads
    for notice in response.get("notices", []):
        print("notice:", notice)
shutil.rmtree(SESSION["cwd"])
