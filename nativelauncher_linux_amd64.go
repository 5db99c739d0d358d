package main

import _ "embed"

// nativeLauncherBytes is launcher/launcher.c built for amd64 by go generate.
//
//go:embed launcher/launcher_amd64.bin
var nativeLauncherBytes []byte
