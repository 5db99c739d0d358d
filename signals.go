package main

// SIGINT and SIGTERM for a call. They abort the call once it is armed
// (its request read and parsed): the command's tree is stopped and the
// answer says so. Before that, they end the process, killed by the
// signal and having written nothing, as an uncaught signal does. A SIGINT
// ignored since the process started stays ignored until then.
//
// They are caught from the start of the process, not from the moment the
// call is armed: a process's first signal.Notify starts the runtime's
// signal thread and updates its mask through it, two round trips per
// signal to another thread, which a server's warm child then does before
// its request comes. Until the call is armed the relay does what the
// uncaught signal would.

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// callSignals relays SIGINT and SIGTERM to a call once it is armed.
type callSignals struct {
	caught     chan os.Signal
	intIgnored bool // SIGINT was ignored when the process started

	mu    sync.Mutex
	abort chan os.Signal // nil until armed
}

// catchSignals starts catching SIGTERM, and SIGINT unless it is ignored.
func catchSignals() *callSignals {
	s := &callSignals{caught: make(chan os.Signal, 2), intIgnored: signal.Ignored(syscall.SIGINT)}
	if s.intIgnored {
		signal.Notify(s.caught, syscall.SIGTERM)
	} else {
		signal.Notify(s.caught, syscall.SIGINT, syscall.SIGTERM)
	}
	go s.relay()
	return s
}

// relay hands each signal to the armed call, or ends the process with it.
func (s *callSignals) relay() {
	for sig := range s.caught {
		s.mu.Lock()
		if s.abort == nil {
			// Not armed: the signal does what it would uncaught, once the
			// record a warm child made ahead is gone (nothing ran). The
			// lock stays held, so that the call cannot be armed meanwhile.
			dropPreparedCall()
			signal.Reset(sig)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
			select {} // the process ends with the signal
		}
		select {
		case s.abort <- sig:
		default: // as signal.Notify does: a full channel drops it
		}
		s.mu.Unlock()
	}
}

// arm makes SIGINT and SIGTERM abort the call from now on, and returns
// the channel that delivers them.
func (s *callSignals) arm() chan os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abort = make(chan os.Signal, 2)
	if s.intIgnored {
		signal.Notify(s.caught, syscall.SIGINT)
	}
	return s.abort
}

// stop ends the catching: only for a process that answers more than one
// call (a test), since stopping waits on the runtime's signal thread.
func (s *callSignals) stop() {
	signal.Stop(s.caught)
	close(s.caught)
}
