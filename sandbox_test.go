package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestABIVersionsIncrementing: index == version, and no version governs
// fewer rights than the one before it.
func TestABIVersionsIncrementing(t *testing.T) {
	for v := 2; v < len(abiVersions); v++ {
		prev, cur := abiVersions[v-1], abiVersions[v]
		if cur.fs&prev.fs != prev.fs || cur.scoped&prev.scoped != prev.scoped {
			t.Errorf("ABI %d governs less than ABI %d", v, v-1)
		}
	}
	if len(abiVersions) != 8 {
		t.Errorf("abiVersions has %d entries, want ABI 0 to 7", len(abiVersions))
	}
}

// TestMissingErrata: which Landlock errata a kernel lacks, from its ABI and
// its mask of fixed errata, and how version and doctor say so.
func TestMissingErrata(t *testing.T) {
	tests := []struct {
		abi   int
		fixed uint64
		want  []uint64 // the bits of the missing errata
	}{
		{7, 0b111, nil},
		{7, 0, []uint64{1, 2, 4}},
		{6, 0b101, []uint64{2}},
		{5, 0, []uint64{1, 4}}, // erratum 2 concerns signal scoping, from ABI 6
		{3, 0, []uint64{4}},
		{3, 0b100, nil},
		{0, 0, nil},
	}
	for _, tt := range tests {
		var got []uint64
		for _, e := range missingErrata(tt.abi, tt.fixed) {
			got = append(got, e.bit)
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("missingErrata(%d, %#b) mismatch (-want +got):\n%s", tt.abi, tt.fixed, d)
		}
	}
	lines := support{ABI: 6, Errata: 0b101, Seccomp: true, NetFilter: true}.report()
	want := "landlock erratum 2: signal scoping also stops signals between threads of one process in different domains; the command's threads share one domain (not fixed in this kernel)"
	if lines[len(lines)-1] != want {
		t.Errorf("report() ends with %q, want %q", lines[len(lines)-1], want)
	}
	for _, l := range (support{ABI: 7, Errata: 0b111}).report() {
		if strings.Contains(l, "erratum") {
			t.Errorf("report() of a fixed kernel says %q", l)
		}
	}
}

// TestPlanRuleset is the ABI table as a pure function, for ABI 1 to 7 and
// beyond.
func TestPlanRuleset(t *testing.T) {
	writeABI1 := accessABI1
	tests := []struct {
		abi         int
		handled     accessFS
		scoped      uint64
		enforcement string
		scoping     bool
	}{
		{1, writeABI1, 0, "partial", false},
		{2, writeABI1 | accessRefer, 0, "partial", false},
		{3, writeABI1 | accessRefer | accessTruncate, 0, "partial", false},
		{4, writeABI1 | accessRefer | accessTruncate, 0, "partial", false},
		{5, writeABI1 | accessRefer | accessTruncate | accessIoctlDev, 0, "full", false},
		{6, writeABI1 | accessRefer | accessTruncate | accessIoctlDev, scopeSignal | scopeAbstractUnixSocket, "full", true},
		{7, writeABI1 | accessRefer | accessTruncate | accessIoctlDev, scopeSignal | scopeAbstractUnixSocket, "full", true},
		{9, writeABI1 | accessRefer | accessTruncate | accessIoctlDev, scopeSignal | scopeAbstractUnixSocket, "full", true},
	}
	for _, tt := range tests {
		got := planRuleset([]string{"/dev/null", "/ws"}, readGrant{}, false, tt.abi, nil)
		want := rulesetPlan{Handled: tt.handled, Scoped: tt.scoped, Rules: []landlockRule{
			{Path: "/", Access: accessExecute | accessReadFile | accessReadDir},
			// Device nodes are never created (PROTOCOL.md section 7).
			{Path: "/dev/null", Access: tt.handled &^ (accessMakeChar | accessMakeBlock)},
			{Path: "/ws", Access: tt.handled &^ (accessMakeChar | accessMakeBlock)},
		}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("planRuleset(abi %d) mismatch (-want +got):\n%s", tt.abi, d)
		}
		if e := enforcement(tt.abi); e != tt.enforcement {
			t.Errorf("enforcement(%d) = %q, want %q", tt.abi, e, tt.enforcement)
		}
		if s := scoped(tt.abi); s != tt.scoping {
			t.Errorf("scoped(%d) = %v, want %v", tt.abi, s, tt.scoping)
		}
	}
}

// TestRuleAccess: a rule on a file keeps only file rights.
func TestRuleAccess(t *testing.T) {
	all := abiVersions[7].fs
	if got, want := ruleAccess(all, false), accessExecute|accessWriteFile|accessReadFile|accessTruncate|accessIoctlDev; got != want {
		t.Errorf("ruleAccess(all, file) = %#x, want %#x", got, want)
	}
	if got := ruleAccess(all, true); got != all {
		t.Errorf("ruleAccess(all, dir) = %#x, want %#x", got, all)
	}
}

// TestStrictlyWider covers the widening table.
func TestStrictlyWider(t *testing.T) {
	tests := []struct {
		target, current string
		want            bool
	}{
		{modeWorkspaceWrite, modeReadOnly, true},
		{modeFullAccess, modeReadOnly, true},
		{modeFullAccess, modeWorkspaceWrite, true},
		{modeWorkspaceWrite, modeWorkspaceWrite, false},
		{modeReadOnly, modeWorkspaceWrite, false},
		{modeFullAccess, modeFullAccess, false},
		{modeFullAccess, "forged", false},
	}
	for _, tt := range tests {
		if got := strictlyWider(tt.target, tt.current); got != tt.want {
			t.Errorf("strictlyWider(%q, %q) = %v, want %v", tt.target, tt.current, got, tt.want)
		}
	}
}

// TestPlanSandbox: fail closed without Landlock, the writable set of each
// mode, and the refusal to expose bashcall's own state.
func TestPlanSandbox(t *testing.T) {
	if _, err := planSandbox(modeReadOnly, "/ws", nil, nil, nil, 0, errNoLandlock); err == nil || !strings.Contains(err.Error(), `sandbox mode "read-only" is requested but no sandbox backend is usable on this host`) {
		t.Errorf("no landlock: err = %v", err)
	}
	if p, err := planSandbox(modeFullAccess, "/ws", nil, nil, nil, 0, errNoLandlock); err != nil || p.confined() {
		t.Errorf("danger-full-access without landlock: %+v, %v", p, err)
	}
	p, err := planSandbox(modeReadOnly, "/ws", []string{"/extra"}, nil, nil, 7, nil)
	if err != nil || cmp.Diff([]string{"/dev/null", "/dev/tty"}, p.Writable) != "" {
		t.Errorf("read-only writable = %v, %v", p.Writable, err)
	}
	p, err = planSandbox(modeWorkspaceWrite, "/ws", []string{"/extra"}, nil, []string{"/state"}, 5, nil)
	if err != nil || cmp.Diff([]string{"/dev/null", "/dev/tty", "/ws", "/tmp", "/extra"}, p.Writable) != "" {
		t.Errorf("workspace-write writable = %v, %v", p.Writable, err)
	}
	if d := cmp.Diff(sandboxFacts{Mode: modeWorkspaceWrite, Enforcement: "full", Network: "on"}, p.Facts); d != "" {
		t.Errorf("facts at ABI 5 = %+v", p.Facts)
	}
	// network = "off" that the kernel cannot enforce fails closed.
	for _, in := range []sandboxInput{{mode: modeReadOnly, workspace: "/ws", netOff: true, netFiltered: true},
		{mode: modeReadOnly, workspace: "/ws", netOff: true}} {
		abi := 3
		if !in.netFiltered {
			abi = 7
		}
		if _, err := planSandboxWith(in, abi, nil); err == nil || !strings.Contains(err.Error(), `network = "off" needs Landlock ABI 4`) {
			t.Errorf("network off at ABI %d, filter %v: err = %v", abi, in.netFiltered, err)
		}
	}
	for _, protected := range []string{"/ws/.state", "/ws", "/"} {
		_, err = planSandbox(modeWorkspaceWrite, "/ws", nil, nil, []string{protected}, 7, nil)
		var te *toolError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "must not be able to change") {
			t.Errorf("protected %q inside the workspace: err = %v", protected, err)
		}
	}
}

// TestClassifyDenied: the denial classifier.
func TestClassifyDenied(t *testing.T) {
	one, zero := 1, 0
	tests := []struct {
		mode   string
		code   *int
		stderr string
		want   bool
	}{
		{modeWorkspaceWrite, &one, "touch: x: Permission denied", true},
		{modeReadOnly, &one, "cp: Read-only file system", true},
		{modeReadOnly, &one, "rm: Operation not permitted", true},
		{modeReadOnly, &zero, "Permission denied", false},
		{modeReadOnly, nil, "Permission denied", false},
		{modeFullAccess, &one, "Permission denied", false},
		{modeReadOnly, &one, "No such file or directory", false},
	}
	for _, tt := range tests {
		if got := classifyDenied(tt.mode, tt.code, tt.stderr); got != tt.want {
			t.Errorf("classifyDenied(%q, %v, %q) = %v, want %v", tt.mode, tt.code, tt.stderr, got, tt.want)
		}
	}
}

// TestClassifyNetwork: with the network off, a failure that speaks of
// sockets is a network denial, whose marker replaces the file one; denied
// is still the contract's: a file-permission signature in stderr.
func TestClassifyNetwork(t *testing.T) {
	one := 1
	for _, tt := range []struct {
		stderr                string
		denied, networkDenied bool
	}{
		{"bash: socket: Permission denied", true, true},
		{"curl: (7) Failed to connect", false, true},
		{"touch: x: Read-only file system", true, false},
	} {
		f := sandboxFacts{Mode: modeWorkspaceWrite, Network: "off"}
		f.classify(&one, tt.stderr)
		if f.Denied != tt.denied || f.NetworkDenied != tt.networkDenied {
			t.Errorf("%q: denied %v, networkDenied %v; want %v, %v", tt.stderr, f.Denied, f.NetworkDenied, tt.denied, tt.networkDenied)
		}
		want := markerDenied(modeWorkspaceWrite)
		if tt.networkDenied {
			want = markerNetworkDenied(modeWorkspaceWrite)
		}
		if got := sandboxMarkers(&f, false); len(got) != 1 || got[0] != want {
			t.Errorf("%q: markers %q, want %q", tt.stderr, got, want)
		}
	}
}

// TestSchema: the escalation fields, the escalation paragraph and the
// task tools appear exactly when they apply, in both formats.
func TestSchema(t *testing.T) {
	for _, tt := range []struct{ name, config string }{
		{"sandboxing", ""},
		{"full_access", "[sandbox]\nmode = \"danger-full-access\"\n"},
		{"no_background", "[background]\nenabled = false\n"},
	} {
		for _, format := range schemaFormats {
			t.Run(tt.name+"_"+format, func(t *testing.T) {
				e := newSandboxingEnv(t, tt.config)
				r := e.run("", "schema", "-format", format)
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
				golden(t, tt.name+"_"+format, r.stdout)
			})
		}
	}
	e := newTestEnv(t, "")
	if r := e.run("", "prompt"); r.code != 0 {
		t.Fatal(r.stderr)
	} else {
		golden(t, "prompt", r.stdout)
	}
}
