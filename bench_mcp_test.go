package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkMCPCall: one call of true at a time through a running bashcall
// mcp, against bash -c true, as medians over interleaved rounds, each
// call 20 ms after the one before (as a model's calls come: the server's
// next process has started, the caches have cooled). With
// BASHCALL_BENCH_BASE naming a git revision, an mcp server built from
// that revision answers in the same rounds (half of them first), and
// saved-ms is the median of the rounds' differences: a change to the
// servers' path, measured against what it changes.
//
//	BASHCALL_BENCH_BASE=HEAD~1 go test -run '^$' -bench MCPCall -benchtime 300x
func BenchmarkMCPCall(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.name, func(b *testing.B) {
			e := mode.env(b)
			cur := startBenchMCP(b, e, e.bin, "cur")
			var base *benchMCP
			if rev := os.Getenv("BASHCALL_BENCH_BASE"); rev != "" {
				base = startBenchMCP(b, e, buildRevision(b, rev), "base")
			}
			time.Sleep(200 * time.Millisecond) // the servers' first processes start
			var bash, tCur, tBase samples
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bash.add(timeCmd(b, exec.Command("bash", "-c", "true")))
				time.Sleep(20 * time.Millisecond)
				if base != nil && i%2 == 1 {
					tBase.add(base.call(i), 0)
					time.Sleep(20 * time.Millisecond)
				}
				tCur.add(cur.call(i), 0)
				time.Sleep(20 * time.Millisecond)
				if base != nil && i%2 == 0 {
					tBase.add(base.call(i), 0)
					time.Sleep(20 * time.Millisecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(bash.wall(), "bash-ms")
			b.ReportMetric(tCur.wall(), "mcp-ms")
			b.ReportMetric(tCur.wall()/bash.wall(), "mcp/bash")
			if base != nil {
				b.ReportMetric(tBase.wall(), "base-ms")
				b.ReportMetric(tBase.wall()/bash.wall(), "base/bash")
				b.ReportMetric(median(diffs(tBase.walls, tCur.walls)), "saved-ms")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchMCP is a running bashcall mcp, initialized.
type benchMCP struct {
	b   *testing.B
	in  io.WriteCloser
	out *bufio.Reader
}

func startBenchMCP(b *testing.B, e *benchEnv, bin, name string) *benchMCP {
	c := exec.Command(bin, "mcp", "-config", e.config, "-state-dir", e.state+"-"+name, "-workspace", e.work)
	c.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(filepath.Dir(e.work), "cache"))
	in, err := c.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Signal(syscall.SIGKILL)
			<-done
		}
	})
	m := &benchMCP{b: b, in: in, out: bufio.NewReader(out)}
	m.rpc(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return m
}

func (m *benchMCP) rpc(line string) string {
	io.WriteString(m.in, line+"\n")
	resp, err := m.out.ReadString('\n')
	if err != nil {
		m.b.Fatal(err)
	}
	return resp
}

// call times one tools/call of true, in ms, and checks its answer.
func (m *benchMCP) call(i int) float64 {
	start := time.Now()
	resp := m.rpc(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true","description":"bench"}}}`, i+1))
	d := float64(time.Since(start)) / 1e6
	if !strings.Contains(resp, `"isError":false`) {
		m.b.Fatalf("mcp answered: %s", resp)
	}
	return d
}
