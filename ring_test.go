package main

import (
	"encoding/json"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seqByte is byte x of the output of "seq 100000000 999999999": ten bytes
// a line, so every offset of the stream has one known value.
func seqByte(x int64) byte {
	if x%10 == 9 {
		return '\n'
	}
	return strconv.FormatInt(100000000+x/10, 10)[x%10]
}

// TestRingContiguity: reads racing a fast writer get bytes that were
// contiguous in the stream, ending where the read says, or a gap marked
// lossy; never bytes of two laps of the ring spliced together.
func TestRingContiguity(t *testing.T) {
	tk := &task{id: "bash-1", dir: t.TempDir(), meta: taskMeta{MaxOutputBytes: 500, MaxSpillBytes: 0}}
	outs, err := openTaskStreams(tk, true)
	if err != nil {
		t.Fatal(err)
	}
	defer outs[0].close()
	defer outs[1].close()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		rnd := rand.New(rand.NewSource(1))
		var off int64
		buf := make([]byte, 3000)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := 1 + rnd.Intn(len(buf))
			for i := range buf[:n] {
				buf[i] = seqByte(off + int64(i))
			}
			outs[0].Write(buf[:n])
			off += int64(n)
		}
	}()
	p := filepath.Join(tk.dir, "stdout.tail")
	var cursor int64
	reads, bad := 0, 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && bad < 5; reads++ {
		r := readTaskStream(p, cursor, 500)
		first := r.next - int64(len(r.data))
		if !r.lossy && first != cursor {
			t.Errorf("read %d: a read that is not lossy starts at %d, want the cursor %d", reads, first, cursor)
			bad++
		}
		for i, b := range r.data {
			if want := seqByte(first + int64(i)); b != want {
				t.Errorf("read %d of [%d,%d): byte %d is %q, want %q: %q", reads, first, r.next, first+int64(i), b, want, r.data)
				bad++
				break
			}
		}
		cursor = r.next
	}
	close(stop)
	<-done
	t.Logf("%d reads", reads)
}

// TestTaskReadContiguity: bash_output on a task printing as fast as it can
// returns runs of consecutive lines, each read following the previous one
// unless it says output was dropped.
func TestTaskReadContiguity(t *testing.T) {
	e := newTestEnv(t, "max_output_bytes = 2000\nmax_spill_bytes = 10000\n")
	id := e.start("seq 100000000 999999999", "A")
	defer e.call(sessionReq("bash_kill", `{"task_id":`+jsonString(id)+`}`, "A"))
	var prev string // the previous read, when this one should follow it
	lossy, reads := 0, 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); reads++ {
		var got taskOutputResult
		json.Unmarshal(e.call(outputReq(id, "A", "")).StructuredContent, &got)
		if got.Lossy {
			lossy++
			prev = ""
		}
		if err := checkSeqText(prev + got.Stdout); err != "" {
			t.Fatalf("read %d (lossy %v): %s", reads, got.Lossy, err)
		}
		prev += got.Stdout
		if j := strings.LastIndexByte(prev, '\n'); j >= 0 {
			prev = prev[strings.LastIndexByte(prev[:j], '\n')+1:] // the last whole line on
		}
	}
	t.Logf("%d of %d reads were lossy", lossy, reads)
}

// checkSeqText says what is wrong with s as a piece of the output of seq:
// its whole lines must be consecutive numbers, and its partial first and
// last lines must fit them.
func checkSeqText(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) < 3 {
		return ""
	}
	whole := lines[1 : len(lines)-1]
	n, err := strconv.Atoi(whole[0])
	if err != nil {
		return "not a number: " + strconv.Quote(whole[0])
	}
	if !strings.HasSuffix(strconv.Itoa(n-1), lines[0]) {
		return "the first partial line " + strconv.Quote(lines[0]) + " does not come before " + whole[0]
	}
	for _, l := range whole {
		if l != strconv.Itoa(n) {
			return "line " + strconv.Quote(l) + " where " + strconv.Itoa(n) + " belongs"
		}
		n++
	}
	if !strings.HasPrefix(strconv.Itoa(n), lines[len(lines)-1]) {
		return "the last partial line " + strconv.Quote(lines[len(lines)-1]) + " does not follow " + strconv.Itoa(n-1)
	}
	return ""
}
