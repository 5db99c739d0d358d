package main

// The names control paths are reached by (control.go): a control path
// named through a symlink, or found on PATH, is redirected for the next
// call as surely as by writing the path itself, so the symlinks on the
// way and the earlier PATH directories are control paths too.

import (
	"os"
	"path/filepath"
	"strings"
)

// linksOnWay lists the symlinks that resolving p follows, each by its own
// path (the links before it resolved). A control path named through a
// link that a confined command could point elsewhere is replaced for the
// next call as surely as by writing the path itself (the host names the
// same link again), so each such link is a control path too.
func linksOnWay(p string) []string {
	var links []string
	resolveLinks(p, nil, &links)
	return links
}

// resolveLinks is resolveWithin, adding to *links (unless nil) the path
// of each symlink it follows.
func resolveLinks(p string, steps *int, links *[]string) (string, bool) {
	if !filepath.IsAbs(p) {
		if wd, err := os.Getwd(); err == nil {
			p = wd + "/" + p // not cleaned: ".." follows the symlinks before it
		}
	}
	resolved := "/"
	rest := strings.Split(p, "/")
	for followed := 0; len(rest) > 0; {
		if steps != nil {
			if *steps <= 0 {
				return "", false
			}
			*steps--
		}
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		next := filepath.Join(resolved, c) // ".." is resolved's parent: it holds no symlink
		target, err := os.Readlink(next)
		if err != nil || followed >= 40 {
			resolved = next // not a symlink, not there, or a loop
			continue
		}
		followed++
		if links != nil {
			*links = append(*links, next)
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, true
}

// launchName is the name the host ran bashcall by: its argv[0], or for
// the process of a server's call the server's (-launched-as).
func (inv *invocation) launchName() string {
	if inv.launchedAs != "" {
		return inv.launchedAs
	}
	if len(os.Args) > 0 {
		return os.Args[0]
	}
	return ""
}

// launchPaths are the control paths of how the host runs bashcall by
// name: the symlinks on the way to it and, for a bare name found on PATH,
// the same name in every PATH directory searched before the one it was
// found in (a bashcall a command put there would be the one the host runs
// next, unconfined). A bare name not on PATH was not found through it.
func launchPaths(name, path string) []string {
	if name == "" {
		return nil
	}
	if strings.Contains(name, "/") {
		return linksOnWay(name)
	}
	var dirs []string
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			// "" and relative entries are the host's working directory,
			// which is bashcall's.
			wd, err := os.Getwd()
			if err != nil {
				continue
			}
			dir = filepath.Join(wd, dir)
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return append(dirs, linksOnWay(p)...)
		}
		// Where a bashcall put in this directory would be found first:
		// the file, not the directory (a working directory of / would
		// contain every writable path), where it leads (a symlink there,
		// dangling or to a file not yet executable) and the links on the
		// way.
		dirs = append(append(dirs, canonicalPrefix(p)), linksOnWay(p)...)
	}
	return nil
}
