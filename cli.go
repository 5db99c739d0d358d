package main

// The subcommands other than a call: schema, prompt, version, mode, gc.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// version is set with -ldflags "-X main.version=v1.2.3".
var version string

// runSchema prints the tool definitions.
func runSchema(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("schema", stderr, &c)
	format := fs.String("format", "mcp", "`mcp`, openai or anthropic")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if !validSchemaFormat(*format) {
		return usageError{fmt.Errorf("schema: -format must be mcp, openai or anthropic, got %q", *format)}
	}
	inv, err := loadSettings(&c, environ, false)
	if err != nil {
		return err
	}
	_, err = stdout.Write(schemaJSON(tools(&inv.cfg), *format))
	return err
}

// runPrompt prints the system-prompt section.
func runPrompt(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	if err := parseFlags(newFlagSet("prompt", stderr, &c), args, 0); err != nil {
		return err
	}
	inv, err := loadSettings(&c, environ, false)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, systemPrompt(&inv.cfg))
	return err
}

// runVersion prints the version and what a confined call gets here.
func runVersion(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	if err := parseFlags(newFlagSet("version", stderr, &c), args, 0); err != nil {
		return err
	}
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	fmt.Fprintf(stdout, "bashcall %s (%s %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, line := range sandboxSupport(getenvFrom(environ)).report() {
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintln(stdout, launcherReport(getenvFrom(environ)))
	if err := reexecCheck(); err != nil {
		fmt.Fprintf(stdout, "re-execution: %v: confined calls and background tasks cannot start\n", err)
	}
	// The control paths of this configuration, without creating anything.
	inv, err := loadSettings(&c, environ, false)
	var dir string
	if err == nil {
		dir, err = stateDirPath(c.stateDir, &inv.cfg, inv.getenv)
	}
	if err != nil {
		fmt.Fprintf(stdout, "control paths: unknown (%v)\n", err)
		return nil
	}
	inv.stateDir = canonicalPrefix(dir)
	inv.protectPaths(dir)
	inv.others, _ = ownDirs(inv.getenv, inv.stateDir)
	fmt.Fprintf(stdout, "control paths (never writable, replaceable or inside a writable path of a confined call): %s\n", strings.Join(inv.controlPaths(), ", "))
	return nil
}

// runMode reads or sets a session's standing mode. "default" clears it.
func runMode(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("mode", stderr, &c)
	sessionFlag := fs.String("session", "", "the session `ID`")
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if *sessionFlag == "" {
		return usageError{errors.New("mode: -session is required")}
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return err
	}
	if m := fs.Arg(0); m != "" {
		if m == "default" {
			m = ""
		} else if !validMode(m) {
			return usageError{fmt.Errorf("mode: %q is not one of %s or default", m, strings.Join(modes, ", "))}
		}
		if err := inv.setStandingMode(*sessionFlag, m); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(stdout, inv.standingMode(*sessionFlag))
	return err
}

// runGC deletes settled tasks and spill files older than -older-than
// (default: [background] retention). Running tasks and the spill files of
// calls still running are never touched. What it cannot delete makes it
// fail, naming each path and the reason.
func runGC(args, environ []string, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("gc", stderr, &c)
	olderFlag := fs.String("older-than", "", "delete what finished more than `DURATION` ago")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return err
	}
	older := inv.cfg.Background.Retention
	if *olderFlag != "" {
		older = *olderFlag
	}
	age, err := parseDuration(older)
	if err != nil {
		return usageError{fmt.Errorf("gc: -older-than: %w", err)}
	}
	cutoff := time.Now().Add(-age)
	tasks, failed := inv.gcTasks(cutoff)
	budget := &spillCap{stateDir: inv.stateDir, limit: inv.cfg.MaxSpillTotalBytes}
	spills, spillFailed := budget.sweepSpills(cutoff)
	failed = append(failed, spillFailed...)
	if _, err := fmt.Fprintf(stdout, "removed %d finished tasks and %d spill files\n", tasks, spills); err != nil {
		return err
	}
	return gcFailure(inv.stateDir, failed)
}

// gcFailure words what gc could not delete, at most ten causes.
func gcFailure(stateDir string, failed []error) error {
	if len(failed) == 0 {
		return nil
	}
	shown := failed[:min(len(failed), 10)]
	if more := len(failed) - len(shown); more > 0 {
		shown = append(shown[:len(shown):len(shown)], fmt.Errorf("and %d more", more))
	}
	return fmt.Errorf("gc: what follows could not be removed from the state dir %q:\n%w", stateDir, errors.Join(shown...))
}

// gcAside prefixes the name a task's directory has while gc removes it.
const gcAside = ".gc-"

// gcTasks removes the tasks that settled before cutoff and that no tool
// holds (claimForGC), and what an earlier gc left half removed, and
// returns how many tasks it removed and what it could not remove.
func (inv *invocation) gcTasks(cutoff time.Time) (int, []error) {
	names, err := readDirNames(inv.tasksDir())
	if err != nil {
		return 0, []error{err}
	}
	n := 0
	var failed []error
	for _, name := range names {
		if !strings.HasPrefix(name, gcAside) {
			continue
		}
		// Left by a gc that died while it removed a task; one that is
		// removing it still holds it.
		aside := filepath.Join(inv.tasksDir(), name)
		if claim := claimForGC(aside); claim != nil {
			if err := os.RemoveAll(aside); err != nil {
				failed = append(failed, err)
			}
			claim.Close()
		}
	}
	for _, id := range names {
		t, err := inv.loadTask(id)
		if err != nil {
			continue
		}
		f := t.final()
		if f == nil || time.UnixMilli(f.FinishedAt).After(cutoff) {
			continue
		}
		claim := claimForGC(t.dir)
		if claim == nil {
			continue // a tool is at it: the next gc takes it
		}
		// The session's entries first, then the directory aside: a gc
		// that dies on the way leaves a settled task the next one
		// removes, or a directory aside that no session lists, and a
		// tool waiting for the lock finds no task rather than half of one
		// to settle again.
		for _, sub := range []string{"tasks", "pending", "running"} {
			if err := os.Remove(filepath.Join(inv.sessionDir(t.meta.Owner), sub, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
				failed = append(failed, err)
			}
		}
		aside := filepath.Join(inv.tasksDir(), gcAside+id)
		if err := os.Rename(t.dir, aside); err != nil {
			claim.Close()
			failed = append(failed, err)
			continue
		}
		err = os.RemoveAll(aside)
		claim.Close()
		if err != nil {
			failed = append(failed, err)
			continue
		}
		n++
	}
	return n, failed
}

// readDirNames lists a directory; a missing one is empty.
func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
