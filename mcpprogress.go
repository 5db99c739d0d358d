package main

// The progress feed of a foreground call run for bashcall mcp: with the
// hidden flag -progress-fd N, the stdin call path also writes, at most
// every progressEvery, one JSON line {"progress", "message"} to descriptor
// N: the bytes of output so far (stdout and stderr together) and the tail
// of what is new since the last line. The server turns each line into
// notifications/progress. Without the flag nothing changes.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

const (
	progressEvery        = 250 * time.Millisecond
	progressMessageBytes = 4096
)

// progressFeed collects output for the feed; writing to it never blocks
// the command's pipes: the descriptor is written by a goroutine of its own.
type progressFeed struct {
	f     *os.File
	mu    sync.Mutex
	total int64
	fresh *tail // what is new since the last line, its last bytes only
	dirty bool
	stop  chan struct{}
	done  chan struct{}
}

// openProgressFeed opens descriptor fd as the feed; nil for -1.
func openProgressFeed(fd int) (*progressFeed, error) {
	if fd < 0 {
		return nil, nil
	}
	if fd <= 2 {
		return nil, fmt.Errorf("-progress-fd must name a descriptor above 2, got %d", fd)
	}
	return &progressFeed{f: os.NewFile(uintptr(fd), "progress"), fresh: newTail(progressMessageBytes)}, nil
}

// tee returns the writers a foreground run gives its streams, and the
// function that ends the feed once the command is done, after a last line
// with what is still unsent. A nil feed changes nothing.
func (p *progressFeed) tee(stdout, stderr io.Writer) (io.Writer, io.Writer, func()) {
	if p == nil {
		return stdout, stderr, func() {}
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.loop()
	return io.MultiWriter(stdout, p), io.MultiWriter(stderr, p), func() {
		close(p.stop)
		<-p.done
		p.f.Close()
	}
}

// Write notes new output; it never fails.
func (p *progressFeed) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.total += int64(len(b))
	p.fresh.write(b)
	p.dirty = true
	p.mu.Unlock()
	return len(b), nil
}

func (p *progressFeed) loop() {
	defer close(p.done)
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.flush()
		case <-p.stop:
			p.flush()
			return
		}
	}
}

// flush writes one line when there is new output.
func (p *progressFeed) flush() {
	p.mu.Lock()
	if !p.dirty {
		p.mu.Unlock()
		return
	}
	u := progressUpdate{Progress: p.total, Message: validText(p.fresh.bytes())}
	p.fresh, p.dirty = newTail(progressMessageBytes), false
	p.mu.Unlock()
	b, err := json.Marshal(u)
	if err == nil {
		p.f.Write(append(b, '\n'))
	}
}
