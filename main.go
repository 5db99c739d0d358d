// Command bashcall runs one model tool call of a bash command under a
// Landlock sandbox and answers with one JSON response.
//
// A host hands it a call on stdin (or through a spool directory) and reads
// the response on stdout. Background tasks live in a private state
// directory, so that later, separate invocations can read, wait on, list
// and kill them. The contract is PROTOCOL.md; README.md explains the rest.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}

const usage = `Usage:
    bashcall [-config FILE] [-state-dir DIR] [-text] < call.json
    bashcall serve -spool DIR [-workers N] [-once]
    bashcall schema [-format mcp|openai|anthropic]
    bashcall prompt
    bashcall mode -session ID [MODE]
    bashcall wait -session ID [-timeout DURATION]
    bashcall mcp [-workspace DIR]
    bashcall doctor
    bashcall gc [-older-than DURATION]
    bashcall version (or --version)
    bashcall help (or -h)

Every subcommand also takes -config FILE and -state-dir DIR after its name.

Examples:
    $ echo '{"name":"bash","arguments":{"command":"echo hi","description":"Say hi"}}' | bashcall
    $ echo '{"name":"bash","arguments":{"command":"ls","description":"List files"}}' | bashcall -text
    $ bashcall schema -format openai > tools.json
    $ bashcall mode -session sess-A read-only
    $ bashcall wait -session sess-A -timeout 5m
    $ bashcall serve -spool /var/spool/bashcall -workers 8
    $ bashcall doctor
    $ bashcall mcp -workspace ~/proj
    $ bashcall gc -older-than 1h

Environment:
    BASHCALL_CONFIG            the config file (beaten by -config)
    BASHCALL_STATE_DIR         the state dir (beaten by -state-dir)
    XDG_CONFIG_HOME            the config file is $XDG_CONFIG_HOME/bashcall/config.toml
                               (default ~/.config) when neither of the above names one
    XDG_STATE_HOME             the default state dir is $XDG_STATE_HOME/bashcall
                               (default ~/.local/state)
    XDG_CACHE_HOME             the base of a session's build cache (default ~/.cache)
    HOME                       the base of the three defaults above
    PATH                       where the configured shell is looked up
    BASHCALL_DISABLE_LANDLOCK  =1: act as if the kernel had no Landlock (confined
                               modes then fail closed)
    BASHCALL_PROTECT           =snapshot: protect git hooks and config by snapshot
                               and restore instead of a private mount namespace
    BASHCALL_LAUNCHER          =go: confine commands with bashcall itself as the
                               launcher instead of the native one
    BASHCALL_SPOOL_DIR         set by serve for the calls it runs (kept unwritable)
Commands never see a BASHCALL_* variable: the environment scrub removes them.

Exit status: 0 when a response was written (whatever its isError), 2 for a
usage error or a request that cannot be parsed, 1 for an internal failure.
doctor exits 0 only when a call in the default mode can run here.
`

// testOnlyInProcess is set by the tests that call run in the test process,
// which must stay dumpable and keep its descriptors across exec.
var testOnlyInProcess bool

// usageError is a command line the user got wrong (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errLauncher ends a launcher that could not exec the command; the reason
// is already on its status pipe.
var errLauncher = errors.New("launcher failed")

// errResponded ends an invocation whose request was invalid: the error
// response is written, only the exit status is left to give.
var errResponded = errors.New("invalid request")

// exitCode prints err once and maps it to an exit status.
func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	var he *hintError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errLauncher):
		return 125
	case errors.Is(err, errResponded):
		return 2
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "bashcall: %v\nRun 'bashcall -h' for usage.\n", err)
		return 2
	case errors.As(err, &he):
		fmt.Fprintf(stderr, "bashcall: error: %v\nhint: %s\n", err, he.hint)
		return 1
	}
	fmt.Fprintf(stderr, "bashcall: error: %v\n", err)
	return 1
}

// run dispatches to a subcommand; without one it answers a call on stdin.
// environ is the environment bashcall runs in ("NAME=value" entries): the
// one place it is read, so that a test can run bashcall in-process.
func run(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if !testOnlyInProcess {
		if err := hardenProcess(); err != nil {
			return err
		}
	}
	warnf = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	err := dispatch(args, environ, stdin, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		_, err = fmt.Fprint(stdout, usage)
	}
	return err
}

// dispatch runs the subcommand args name.
func dispatch(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "--version" && args[0] != "-version" {
		return runCall(args, environ, stdin, stdout, stderr)
	}
	switch args[0] {
	case launcherArg:
		return runLauncher(args[1:])
	case supervisorArg:
		return runSupervisor(args[1:], stdin, stdout)
	case "serve", "mode", "wait", "mcp", "gc":
		if err := roomForThreads(); err != nil {
			return err
		}
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], environ, stdout, stderr)
	case "schema":
		return runSchema(args[1:], environ, stdout, stderr)
	case "prompt":
		return runPrompt(args[1:], environ, stdout, stderr)
	case "mode":
		return runMode(args[1:], environ, stdout, stderr)
	case "wait":
		return runWait(args[1:], environ, stdout, stderr)
	case "mcp":
		return runMCP(args[1:], environ, stdin, stdout, stderr)
	case "doctor":
		return runDoctor(args[1:], environ, stdout, stderr)
	case "gc":
		return runGC(args[1:], environ, stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(args[1:], environ, stdout, stderr)
	case "help":
		return flag.ErrHelp
	}
	return usageError{fmt.Errorf("unknown command %q", args[0])}
}

// commonFlags are the flags every subcommand takes.
type commonFlags struct {
	config   string
	stateDir string
}

// newFlagSet returns a flag set for one subcommand, with -config and
// -state-dir. It prints nothing: parseFlags returns what went wrong, once,
// and run prints the usage on -h (stderr is kept for the callers' sake).
func newFlagSet(name string, stderr io.Writer, c *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// parseFlags reports errors once and run prints the usage on -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.config, "config", "", "read the configuration from `FILE`")
	fs.StringVar(&c.stateDir, "state-dir", "", "keep tasks and spill files in `DIR`")
	return fs
}

// parseFlags parses args and refuses stray arguments beyond maxArgs.
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > maxArgs {
		return usageError{fmt.Errorf("%sunexpected argument %q", commandPrefix(fs), strings.Join(fs.Args()[maxArgs:], " "))}
	}
	return nil
}

// commandPrefix is "NAME: " for a subcommand's messages, "" for a call.
func commandPrefix(fs *flag.FlagSet) string {
	if fs.Name() == "bashcall" {
		return ""
	}
	return fs.Name() + ": "
}

// loadSettings resolves the config and, when wantState, the checked state
// dir, for a subcommand.
func loadSettings(c *commonFlags, environ []string, wantState bool) (*invocation, error) {
	inv := newInvocation(environ)
	cfg, err := loadConfig(configPath(c.config, inv.getenv))
	if err != nil {
		return nil, usageError{err}
	}
	inv.cfg = cfg
	if !wantState {
		return inv, nil
	}
	dir, err := stateDirPath(c.stateDir, &inv.cfg, inv.getenv)
	if err != nil {
		return nil, err
	}
	if inv.stateDir, err = openStateDir(dir); err != nil {
		return nil, err
	}
	inv.protectPaths(dir)
	return inv, nil
}

// newInvocation is an invocation in the environment environ.
func newInvocation(environ []string) *invocation {
	return &invocation{environ: environ, getenv: getenvFrom(environ)}
}

// getenvFrom looks variables up in environ. The first entry of a name
// wins, as with os.Getenv on an environment that names a variable twice.
func getenvFrom(environ []string) func(string) string {
	return func(name string) string {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
}

// protectPaths records what a sandboxed command must never be able to
// write: the state dir and the config file; serve names its spool dir to
// the bashcall processes it runs calls in.
func (inv *invocation) protectPaths(givenStateDir string) {
	inv.protected = []string{inv.stateDir}
	inv.named = []string{givenStateDir}
	if inv.cfg.path != "" {
		inv.protected = append(inv.protected, canonicalOr(inv.cfg.path))
		inv.named = append(inv.named, inv.cfg.path)
	}
	if inv.spoolDir = spoolDirOf(inv.getenv); inv.spoolDir != "" {
		inv.protected = append(inv.protected, inv.spoolDir)
		inv.named = append(inv.named, inv.getenv("BASHCALL_SPOOL_DIR"))
	}
}
