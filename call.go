package main

// Answering one call: read it, dispatch it to a tool, write the response.
// The bash tool's planning and foreground run are in bashtool.go.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// invocation is what one bashcall process knows while it answers.
type invocation struct {
	cfg      config
	stateDir string
	environ  []string
	getenv   func(string) string
	// protected are paths no sandboxed command may write: the state dir,
	// the config file and, when serving, the spool dir.
	protected []string
	// named are the same as the host named them, for the symlinks on the
	// way (controlPaths: a confined call's, not every call's, cost).
	named    []string
	spoolDir string // canonical, when serving
	// others are bashcall's other directories a confined call withholds
	// and protects (ownDirs), read once a call is to be confined.
	others []string
	// abort delivers SIGINT and SIGTERM while a call is answered
	// (signals.go).
	abort chan os.Signal
	// progress streams a foreground run's output to bashcall mcp.
	progress *progressFeed
	// reaper ties the tasks of one owner to the life of a process (the
	// hidden -reaper flag of bashcall mcp's children).
	reaper *reaperTie
	// launchedAs is the name the host ran the server by, for the process
	// of a server's call (launchName).
	launchedAs string
	// textOnly: the response is printed as its text alone (-text).
	textOnly bool
}

// runCall answers the call on stdin.
func runCall(args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c commonFlags
	fs := newFlagSet("bashcall", stderr, &c)
	textFlag := fs.Bool("text", false, "print only the model-facing text of the response")
	progressFlag := fs.Int("progress-fd", -1, "")    // for bashcall mcp; not in the usage
	warmFlag := fs.Bool("warm", false, "")           // for the servers' warm children; not in the usage
	reaperFlag := fs.String("reaper", "", "")        // for bashcall mcp's children; not in the usage
	launchedFlag := fs.String("launched-as", "", "") // for the servers' children: the server's argv[0]
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	// Before the first thread of bashcall's own (the signals'), which
	// the runtime could fail to start.
	if err := roomForThreads(); err != nil {
		data, rerr := readRequest(stdin)
		return answerFailure(data, rerr, stdout, *textFlag, err)
	}
	sigs := catchSignals()
	if testOnlyInProcess {
		defer sigs.stop()
	}
	if f, ok := stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprintln(stderr, "bashcall: reading one call (JSON) from the terminal; end it with Ctrl-D, or see bashcall -h")
	}
	// The request first, the settings after: a server's warm child
	// (warm.go), started before its call, sees the config as it is when
	// the call comes.
	warmed := *warmFlag && !requestWaiting(stdin)
	if warmed {
		getenv := getenvFrom(environ)
		warmUp(getenv, configPath(c.config, getenv), c.stateDir)
		defer dropPreparedCall() // a call that starts no command leaves it
	}
	data, rerr := readRequest(stdin)
	if warmed {
		boundRulesAhead()
	}
	inv, err := loadSettings(&c, environ, true)
	if err != nil {
		return answerFailure(data, rerr, stdout, *textFlag, err)
	}
	inv.launchedAs = *launchedFlag
	if inv.progress, err = openProgressFeed(*progressFlag); err != nil {
		return usageError{err}
	}
	if inv.reaper, err = parseReaperTie(*reaperFlag); err != nil {
		return usageError{err}
	}
	var req *request
	if err = rerr; err == nil {
		req, err = parseRequest(data)
	}
	if warmed && (err != nil || req.Name != "bash") {
		releaseRulesAhead() // only a bash call launches
	}
	var ir *invalidRequest
	if errors.As(err, &ir) {
		resp := &response{ID: ir.id}
		setError(resp, err)
		if werr := writeResponse(stdout, resp, *textFlag); werr != nil {
			return werr
		}
		return errResponded
	}
	if err != nil {
		return err
	}
	inv.abort = sigs.arm()
	inv.textOnly = *textFlag
	err = writeResponse(stdout, inv.handle(req), *textFlag)
	releaseStdout(stdout)
	return err
}

// releaseStdout lets go of the host's stdout once the response is written
// and what it held released: a server reading its child's stdout to the
// end answers on that, not on the child's exit, which can take a
// millisecond more. Descriptor 1 then reads /dev/null, so that no file
// opened later can take its number.
func releaseStdout(stdout io.Writer) {
	f, ok := stdout.(*os.File)
	if !ok || testOnlyInProcess {
		return
	}
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		dupOnto(int(null.Fd()), int(f.Fd()))
		null.Close()
	}
}

// answerFailure answers a call that bashcall cannot serve at all (a bad
// config, a refused state dir) with an error response, so that a host can
// always parse stdout, and returns err for the exit status and stderr.
func answerFailure(data []byte, rerr error, stdout io.Writer, textOnly bool, err error) error {
	if rerr != nil || len(bytes.TrimSpace(data)) == 0 {
		return err
	}
	resp := &response{}
	if req, perr := parseRequest(data); perr == nil {
		resp.ID, resp.Name = req.ID, req.Name
	}
	why := "internal: " + err.Error()
	if errors.As(err, new(usageError)) {
		why = "invalid configuration: " + err.Error()
	}
	setError(resp, &toolError{why})
	writeResponse(stdout, resp, textOnly)
	return err
}

// writeResponse writes the JSON line, or only the text with -text.
func writeResponse(w io.Writer, r *response, textOnly bool) error {
	defer r.written()
	if textOnly {
		_, err := io.WriteString(w, r.text()) // exactly the model's text: no newline added
		return err
	}
	return encodeResponse(w, r)
}

// handle answers one parsed request. Every failure becomes an error
// response; nothing here ends the process.
func (inv *invocation) handle(req *request) *response {
	resp := &response{ID: req.ID, Name: req.Name, Present: &presentation{}}
	inv.stopDeadCalls()
	var err error
	if t, ok := lookupTool(req.Name); ok {
		err = t.handle(inv, req, resp)
	} else {
		err = errUnknownTool(req.Name)
	}
	if err != nil {
		setError(resp, err)
	}
	if req.ArgsErr == nil {
		resp.Present.Call = callCard(req.Name, req.Args)
	}
	if req.Session.ID != "" && !inv.textOnly { // -text prints no notices: they stay pending
		resp.Notices = inv.takeNotices(ownerKey(req.Session.ID))
	}
	return resp
}

// setError makes resp an error response.
func setError(resp *response, err error) {
	var te *toolError
	msg := err.Error()
	if !errors.As(err, &te) && !errors.As(err, new(*invalidRequest)) {
		msg = "internal: " + msg
	}
	text := textErrorPrefix + msg
	resp.IsError = true
	resp.Content = []textContent{{Type: "text", Text: text}}
	if resp.Present == nil {
		resp.Present = &presentation{}
	}
	resp.Present.Result = genericCard(text)
}

// setText makes resp a successful response with text.
func setText(resp *response, text string, result *card) {
	resp.Content = []textContent{{Type: "text", Text: text}}
	if result == nil {
		result = genericCard(text)
	}
	resp.Present.Result = result
}
