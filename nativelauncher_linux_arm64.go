package main

import _ "embed"

// nativeLauncherBytes is launcher/launcher.c built for arm64 by go generate.
//
//go:embed launcher/launcher_arm64.bin
var nativeLauncherBytes []byte
