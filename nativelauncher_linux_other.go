//go:build linux && !amd64 && !arm64

package main

// nativeLauncherBytes is empty: the native launcher is built for amd64 and
// arm64 only, and bashcall re-executes itself as the launcher elsewhere.
var nativeLauncherBytes []byte
