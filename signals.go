package main

// SIGINT and SIGTERM for a call. They abort the call once it is armed
// (its request read and parsed) and bashcall listens for them: the
// command's tree is stopped and the answer says so. Before that, they end
// the process, killed by the signal and having written nothing, as an
// uncaught signal does. A SIGINT ignored since the process started stays
// ignored until the call is armed.
//
// A process's first signal.Notify starts the runtime's signal thread and
// updates its mask through it, two round trips per signal to another
// thread: about 0.1 ms. A call started for its request listens from the
// moment its command's process exists (runSpec.Forked), so that this is
// paid while the command starts, or when a wait begins (an approval, a
// bash_output or bash_wait wait): until then a signal ends it with
// nothing started, or, just after the fork, with its command killed by
// the parent-death signal. A server's warm child listens from its start,
// before its request comes; until its call is armed the relay does what
// the uncaught signal would.

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

	mu        sync.Mutex
	listening bool
	abort     chan os.Signal // nil until armed
}

// catchSignals is the call's signals, not yet listened for.
func catchSignals() *callSignals {
	return &callSignals{caught: make(chan os.Signal, 2), intIgnored: signal.Ignored(syscall.SIGINT)}
}

// listen starts catching SIGTERM, and SIGINT unless it is ignored and
// the call not armed. Only the first call does anything.
func (s *callSignals) listen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listening {
		return
	}
	s.listening = true
	if s.intIgnored && s.abort == nil {
		signal.Notify(s.caught, syscall.SIGTERM)
	} else {
		signal.Notify(s.caught, syscall.SIGINT, syscall.SIGTERM)
	}
	go s.relay()
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

// arm makes SIGINT and SIGTERM abort the call once it listens, and
// returns the channel that delivers them.
func (s *callSignals) arm() chan os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abort = make(chan os.Signal, 2)
	if s.listening && s.intIgnored {
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

// whileStarting is what a foreground call does once its command's
// process exists, while the command starts: SIGINT and SIGTERM are
// caught from then on, dead calls' leftovers are stopped, and the
// response's encoder is made ready.
func (inv *invocation) whileStarting() {
	inv.aborts()
	inv.sweep()
	warmEncoder()
}

// aborts is the call's abort channel, listened for from now on.
func (inv *invocation) aborts() chan os.Signal {
	if inv.listen != nil {
		inv.listen()
	}
	return inv.abort
}
