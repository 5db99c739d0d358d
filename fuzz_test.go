package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// FuzzConfig: any config file either loads into a configuration that
// validates, or is refused with an error naming the file; never a panic.
func FuzzConfig(f *testing.F) {
	example, _ := os.ReadFile("config.toml.example")
	for _, seed := range []string{string(example), "", "timeout_ms = -1\n", "[sandbox]\nmode = \"x\"\n",
		"[env]\nset = { A = \"\\u0000\" }\n", "[sandbox]\ndeny_read = [\"rel\"]\nnetwork = \"off\"\n", "a = [[[[", "\xff\xfe"} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if err := cfg.validate(); err != nil {
			t.Errorf("a loaded config does not validate: %v", err)
		}
	})
}

// FuzzTaskID: only ids of the form bash-N are valid, and a valid id never
// names a path outside the tasks directory.
func FuzzTaskID(f *testing.F) {
	for _, seed := range []string{"bash-1", "bash-0", "bash-", "../bash-1", "bash-1/..", "bash-١", "bash-99999999999999999999", "", "bash-1\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !validTaskID(id) {
			return
		}
		if !strings.HasPrefix(id, "bash-") || strings.ContainsAny(id, "/\\\x00.") {
			t.Errorf("validTaskID(%q) = true", id)
		}
		if filepath.Join("/state/tasks", id) != "/state/tasks/"+id {
			t.Errorf("id %q does not name one entry of the tasks directory", id)
		}
	})
}

// FuzzTempName: isTempName accepts exactly the names the regular
// expression it stands for matches; the seeds run as a plain test.
func FuzzTempName(f *testing.F) {
	for _, seed := range []string{".a.json.0123456789abcdef.tmp", ".c.json.tmp", "..0123456789abcdef.tmp",
		"...0123456789abcdef.tmp", ".x.0123456789ABCDEF.tmp", ".x.0123456789abcde.tmp", ".x.0123456789abcdef0.tmp",
		"a.x.0123456789abcdef.tmp", ".x.0123456789abcdef.tmpx", ".\n.0123456789abcdef.tmp", ".\xff.0123456789abcdef.tmp",
		".é.0123456789abcdef.tmp", ".x.012345678\xc3abcdef.tmp", ".tmp", "", "."} {
		f.Add(seed)
	}
	re := regexp.MustCompile(`^\..+\.[0-9a-f]{16}\.tmp$`)
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := isTempName(name), re.MatchString(name); got != want {
			t.Errorf("isTempName(%q) = %v, want %v", name, got, want)
		}
	})
}

// FuzzCallRecord: the hand-built call record is byte for byte what
// encoding/json writes, whatever the values.
func FuzzCallRecord(f *testing.F) {
	f.Add(4242, uint64(1234567), "2b790d47-87b5-426c-9852-6f163999a0b1", 0, uint64(0), "", uint64(0), uint64(0), uint64(0))
	f.Add(-1, uint64(1<<63), "a\"b\\c<d>&\u2028\x01", 1<<31, uint64(99), "", uint64(7), uint64(8), uint64(1))
	f.Add(0, uint64(0), "", 7, uint64(1), "\xff", uint64(1)<<63, uint64(0), uint64(5))
	f.Fuzz(func(t *testing.T, pid int, start uint64, boot string, leader int, leaderStart uint64, leaderBoot string, pipe1, pipe2, since uint64) {
		r := &callRecord{Caller: procRecord{PID: pid, Start: start, BootID: boot},
			Tree: treeRecord{procRecord: procRecord{PID: leader, Start: leaderStart, BootID: leaderBoot}, Since: since}}
		for _, p := range []uint64{pipe1, pipe2} {
			if p != 0 {
				r.Tree.Pipes = append(r.Tree.Pipes, p)
			}
		}
		got, err := r.line()
		want, werr := jsonLine(r)
		if err != nil || werr != nil || string(got) != string(want) {
			t.Errorf("line() = %s (%v), encoding/json writes %s (%v)", got, err, want, werr)
		}
	})
}
